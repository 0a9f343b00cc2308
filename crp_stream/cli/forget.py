"""``crp-stream forget --tenant T (--document ID | --source S | --all) --actor A``: remove a tenant's
document, source or every fact for good (an operator command ``forget``; docs/security.md
"Forgetting"). On the embedded log the records that carried the text are removed too. ``--vacuum``:
then ``VACUUM FULL`` the tables forget touched, on PostgreSQL, whose dead row versions keep the text."""

from __future__ import annotations

import argparse
from typing import Any

from crp_stream.cli.base import CliError, add_broker, add_common, settings_of
from crp_stream.cli.tables import done, publish_command, repo_view
from crp_stream.core.tenants import DEFAULT_TENANT, is_tenant_name


def register(sub: Any) -> None:
    p = sub.add_parser("forget", help="remove a tenant's document, source or every fact, from the log too")
    add_common(p)
    add_broker(p, "the command goes to its operator workers; --database is theirs")
    p.add_argument("--tenant", default=DEFAULT_TENANT, help="the tenant (default: default)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--document", metavar="ID", help="a document id (or the event id of a document without one)")
    what.add_argument("--source", metavar="S", help="every fact of this source in the tenant")
    what.add_argument("--all", action="store_true", help="every fact of the tenant")
    p.add_argument("--actor", required=True, help="who decides (written into the audit event)")
    p.add_argument("--reason", help="why (written into the audit event)")
    p.add_argument(
        "--vacuum",
        action="store_true",
        help="then VACUUM FULL the tables forget touched (PostgreSQL; locks each while it is rewritten)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    settings = settings_of(ns)
    if not is_tenant_name(ns.tenant):
        raise CliError(f"--tenant: {ns.tenant!r} is not a tenant name (letters, digits, '.', '_', '-'; up to 64)")
    for flag, value in (("--document", ns.document), ("--source", ns.source)):
        if value is not None and not value.strip():
            raise CliError(f"{flag}: must not be empty")
    if settings.broker and not settings.database_url:
        raise CliError("forget: with --broker, give the workers' database: --database URL (or CRP_DATABASE_URL)")
    target = "all" if ns.all else f"document:{ns.document}" if ns.document is not None else f"source:{ns.source}"
    tenant = None if ns.tenant == DEFAULT_TENANT else ns.tenant
    publish_command(ns, settings, "forget", target, ns.source or ns.tenant, tenant)
    with repo_view(settings) as repo:
        found = repo.audit("FACTS_FORGOTTEN", limit=1)
    counts = found[-1]["details"] if found else {}
    n = counts.get("facts", 0)
    line = f"forgot {n} fact(s) of tenant {ns.tenant} ({target}) by {ns.actor}"
    extra: dict[str, Any] = {}
    if ns.vacuum:
        from crp_stream.fabric.sql import db

        try:
            extra["vacuumed"] = vacuumed = db.vacuum_full(settings.database)
        except db.VacuumError as exc:
            raise CliError(f"--vacuum: {exc} (the forget itself was applied)") from None
        line += (
            f"; VACUUM FULL of {len(vacuumed)} tables"
            if vacuumed
            else "; --vacuum: nothing to do on SQLite (deleted rows are overwritten as they go)"
        )
    done(ns, line, {"command": "forget", "tenant": ns.tenant, "target": target, "actor": ns.actor, **counts, **extra})
    return 0
