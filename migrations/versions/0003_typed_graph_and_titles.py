"""Typed graph edges and document titles

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 02:20:00

Every edge records its kind (similarity, adjacency, mention), part of the key: a pair of
facts can be both similar and adjacent, and each kind keeps its own weight (the arbiter reads the
similarity edges only). A document's title is kept so that facts naming it link to it. Existing
edges are similarity edges.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("edges", recreate="always") as batch:
        batch.add_column(sa.Column("kind", sa.String(length=16), nullable=False, server_default="similarity"))
        batch.drop_constraint("pk_edges", type_="primary")
        batch.create_primary_key("pk_edges", ["src", "dst", "kind"])
    op.create_table(
        "documents",
        sa.Column("source", sa.String(length=256), nullable=False),
        sa.Column("document_id", sa.String(length=256), nullable=False),
        sa.Column("title", sa.String(length=1024), nullable=True),
        sa.Column("title_key", sa.String(length=1024), nullable=True),
        sa.Column("section", sa.String(length=1024), nullable=True),
        sa.Column("lead_fact_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("source", "document_id", name=op.f("pk_documents")),
    )
    op.create_index(op.f("ix_documents_title_key"), "documents", ["title_key"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_documents_title_key"), table_name="documents")
    op.drop_table("documents")
    op.execute("DELETE FROM edges WHERE kind <> 'similarity'")
    with op.batch_alter_table("edges", recreate="always") as batch:
        batch.drop_constraint("pk_edges", type_="primary")
        batch.create_primary_key("pk_edges", ["src", "dst"])
        batch.drop_column("kind")
