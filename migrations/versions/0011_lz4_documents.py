"""lz4 for the large JSON texts PostgreSQL writes on every window request

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07 20:30:00

A session's state (its query's and sub-queries' vectors as JSON text, ~16 KB) and a Kafka worker's
outbox (its micro-batch's outputs, in ``meta``) are rewritten on every window request. PostgreSQL
compresses a value that large with pglz by default: an upsert and commit of a 16 KB state took 0.78 ms
here, and 0.33 ms with lz4, CPU that PostgreSQL spends on the cores the worker serves from. lz4 is
PostgreSQL's other built-in TOAST method (14 and later, when the server was built with it, as
Debian's and the official images are). A server without it keeps pglz; SQLite stores text as it is.
Existing values keep the method they were written with until they are rewritten.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

COLUMNS = (("sessions", "state"), ("meta", "value"))


def _lz4(bind: sa.Connection) -> bool:
    """The server offers lz4 as a TOAST compression method."""
    if bind.dialect.name != "postgresql":
        return False
    found = bind.execute(
        sa.text("SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)")
    ).first()
    return found is not None


def _set(method: str) -> None:
    bind = op.get_bind()
    if not _lz4(bind):
        return
    for table, column in COLUMNS:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}")


def upgrade() -> None:
    _set("lz4")


def downgrade() -> None:
    _set("pglz")
