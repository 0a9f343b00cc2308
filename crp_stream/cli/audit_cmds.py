"""``crp-stream audit ...``: the operator's audit commands (tables, or JSON with ``--json``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, get_args

from crp_stream.cli.base import CliError
from crp_stream.cli.tables import (
    SHORT_ID,
    grid,
    print_json,
    repo_view,
    time_text,
)
from crp_stream.config import Settings
from crp_stream.events import AuditType

AUDIT_TYPES: tuple[str, ...] = get_args(AuditType)


def audit_json(a: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_id": a["event_id"],
        "audit_type": a["audit_type"],
        "at": time_text(a["at_us"]),
        "key": a["key"],
        "details": a["details"],
    }


def summary(details: dict[str, Any]) -> str:
    parts = []
    for k in ("actor", "request_id", "candidate_id", "target_id"):
        if details.get(k):
            value = str(details[k])
            parts.append(f"{k}={value[:SHORT_ID] if k != 'actor' else value}")
    if details.get("policy"):
        parts.append(str(details["policy"]))
    if details.get("reason"):
        parts.append(str(details["reason"]))
    return "; ".join(parts)


def audit_table(rows: Sequence[dict[str, Any]]) -> str:
    table = [[a["at"], a["audit_type"], a["key"], summary(a["details"])] for a in rows]
    return grid(["at", "type", "key", "summary"], table, [20, 24, 28, 110])


def audit_tail(ns: argparse.Namespace, settings: Settings) -> int:

    if ns.audit_type and ns.audit_type not in AUDIT_TYPES:
        raise CliError(f"--type: {ns.audit_type!r} is not an audit type ({', '.join(AUDIT_TYPES)})")
    if ns.limit < 1:
        raise CliError(f"--limit: {ns.limit} must be at least 1")
    if settings.broker:  # the crp.audit topic itself
        from crp_stream.cli.kafka_ops import audit_rows

        rows = [audit_json(a) for a in audit_rows(settings, ns.audit_type, ns.limit)]
    else:
        with repo_view(settings) as repo:
            rows = [audit_json(a) for a in repo.audit(ns.audit_type, ns.limit)]
    if ns.json:
        print_json(rows)
    elif not rows:
        print("no audit events" + (f" of type {ns.audit_type}" if ns.audit_type else ""))
    else:
        print(audit_table(rows))
    return 0
