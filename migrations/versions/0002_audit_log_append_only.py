"""audit_log is append-only, enforced by the database

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 08:40:00

No code path updates or deletes audit rows (tests/unit/fabric/sql/test_audit_append_only.py scans for
one); these triggers make the database refuse it too, for any client with write access to the table.
"""
from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

MESSAGE = "audit_log is append-only"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"""
            CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'insufficient_privilege';
            END $$""")
        op.execute("""CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
                      FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()""")
        op.execute("""CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
                      FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only()""")
        return
    for action in ("UPDATE", "DELETE"):
        op.execute(f"""CREATE TRIGGER audit_log_no_{action.lower()} BEFORE {action} ON audit_log
                       BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END""")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER audit_log_no_truncate ON audit_log")
        op.execute("DROP TRIGGER audit_log_no_change ON audit_log")
        op.execute("DROP FUNCTION audit_log_append_only()")
        return
    for action in ("UPDATE", "DELETE"):
        op.execute(f"DROP TRIGGER audit_log_no_{action.lower()}")
