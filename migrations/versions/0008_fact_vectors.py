"""Each fact's vector in the database, for workers that keep their own embedded index

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05 05:20:00

Kafka workers on a shared PostgreSQL with the embedded engine (qdrant-edge) each keep a local vector
index, a projection of the facts: a worker started after facts exist loads their vectors from here,
and follows ``crp.facts`` for the rest (docs/vector-stores.md). One row per fact, its unit float32
vector as bytes, written in the fact's transaction.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fact_vectors",
        sa.Column("fact_id", sa.String(length=64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("fact_id", name=op.f("pk_fact_vectors")),
    )


def downgrade() -> None:
    op.drop_table("fact_vectors")
