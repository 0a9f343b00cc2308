"""The keys of sealed input records

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05 09:00:00

A producer may seal a document's or an observation's text with a key of its own (docs/security.md
"The log forgets"); ``forget`` destroys the key (NULL), so the broker's copy can no longer be read.
The row stays: a record sealed with a destroyed key is forgotten, not unknown.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sealing_keys",
        sa.Column("key_id", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=256), nullable=False),
        sa.Column("document", sa.String(length=256), nullable=False),
        sa.Column("key", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_sealing_keys")),
    )
    op.create_index("ix_sealing_keys_scope", "sealing_keys", ["tenant", "source", "document"])


def downgrade() -> None:
    op.drop_index("ix_sealing_keys_scope", table_name="sealing_keys")
    op.drop_table("sealing_keys")
