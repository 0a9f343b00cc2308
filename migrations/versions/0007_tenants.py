"""Tenants: every fact names its tenant

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05 05:30:00

One deployment serves many teams (docs/contract.md "Tenants"). A fact keeps the tenant of the
input that recorded it; facts from before this revision belong to ``default``, which is what an
input without ``tenant`` names, so their ids, keys and every output stay the same. The index
serves ``crp-stream forget --tenant T --source S`` and the console's tenant filter.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("facts", sa.Column("tenant", sa.String(64), nullable=False, server_default="default"))
    op.create_index(op.f("ix_facts_tenant_source"), "facts", ["tenant", "source"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_facts_tenant_source"), table_name="facts")
    with op.batch_alter_table("facts") as batch:
        batch.drop_column("tenant")
