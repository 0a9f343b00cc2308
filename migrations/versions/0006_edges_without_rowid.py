"""Edges clustered by their key on SQLite (WITHOUT ROWID)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 07:30:00

Ingest inserts and deletes similarity edges by their key (src, dst, kind) and
every read is by ``src``. As a rowid table each row lived twice, in the table and in the primary
key's index, so an insert or a delete wrote two B-trees; clustered by the key it writes one, and a
read by ``src`` walks one. The rows, their key and every query stay the same. PostgreSQL: no change.
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_COLUMNS = (
    "src VARCHAR(64) NOT NULL, dst VARCHAR(64) NOT NULL, weight FLOAT NOT NULL, "
    "kind VARCHAR(16) DEFAULT 'similarity' NOT NULL, CONSTRAINT pk_edges PRIMARY KEY (src, dst, kind)"
)


def _rebuild(suffix: str) -> None:
    op.execute(f"CREATE TABLE edges_rebuilt ({_COLUMNS}){suffix}")
    op.execute(
        "INSERT INTO edges_rebuilt (src, dst, weight, kind) SELECT src, dst, weight, kind FROM edges ORDER BY src, dst, kind"
    )
    op.execute("DROP TABLE edges")
    op.execute("ALTER TABLE edges_rebuilt RENAME TO edges")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(" WITHOUT ROWID")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild("")
