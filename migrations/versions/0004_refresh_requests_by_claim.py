"""Refresh requests by claim

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 15:20:00

The arbiter reads a claim's open refresh requests on every changed verdict
(``refresh_requests_for_claim``); without an index on the claim each read scanned every request.
"""
from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        op.f("ix_refresh_requests_claim_key_status"), "refresh_requests", ["claim_key", "status"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_refresh_requests_claim_key_status"), table_name="refresh_requests")
