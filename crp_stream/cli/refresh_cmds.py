"""``crp-stream refresh ...``: the operator's refresh commands (tables, or JSON with ``--json``)."""

from __future__ import annotations

import argparse
from typing import Any, get_args

from crp_stream.cli.base import CliError
from crp_stream.cli.tables import (
    SHORT_ID,
    command_tenant,
    done,
    fields,
    grid,
    print_json,
    publish_command,
    repo_view,
    resolve_id,
    time_text,
)
from crp_stream.config import Settings
from crp_stream.events import AuditType, Command
from crp_stream.fabric.sql.repository import Repository

AUDIT_TYPES: tuple[str, ...] = get_args(AuditType)


def refresh_json(r: dict[str, Any]) -> dict[str, Any]:
    payload = {k: v for k, v in r["payload"].items() if k not in ("type", "high_trust_epoch_s")}
    return {
        **payload,
        "request_id": r["request_id"],
        "status": r["status"],
        "claim_key": r["claim_key"],
        "created_at": time_text(r["created_at_us"]),
        "resolved_at": time_text(r["resolved_at_us"]) or None,
        "resolved_by": r["resolved_by"],
    }


def refresh_list(ns: argparse.Namespace, settings: Settings) -> int:
    with repo_view(settings) as repo:
        rows = repo.refresh_requests(None if ns.status == "all" else ns.status)
    if ns.json:
        print_json([refresh_json(r) for r in rows])
        return 0
    if not rows:
        print(f"no refresh requests ({ns.status})")
        return 0
    table = []
    for r in rows:
        p = r["payload"]
        table.append(
            [
                r["request_id"][:SHORT_ID],
                r["status"],
                r["source"],
                p.get("subject"),
                p.get("attribute"),
                f"{p.get('stale_value')} -> {p.get('observed_value')}",
                p.get("corroborating_partitions"),
                p.get("evidence_total"),
                time_text(r["created_at_us"]),
                r["resolved_by"] or "",
            ]
        )
    headers = [
        "request",
        "status",
        "source",
        "subject",
        "attribute",
        "stale -> observed",
        "corr",
        "evidence",
        "requested",
        "resolved by",
    ]
    print(grid(headers, table, [SHORT_ID, 8, 24, 32, 24, 40, 4, 8, 20, 20]))
    return 0


def find_refresh(repo: Repository, wanted: str) -> dict[str, Any]:

    rid = resolve_id("refresh request", wanted, [r["request_id"] for r in repo.refresh_requests()])
    req = repo.refresh_request(rid) if rid else None
    if req is None:
        raise CliError(f"no refresh request {wanted!r} (see: crp-stream refresh list)")
    return dict(req)


def refresh_show(ns: argparse.Namespace, settings: Settings) -> int:
    with repo_view(settings) as repo:
        r = refresh_json(find_refresh(repo, ns.id))
    if ns.json:
        print_json(r)
        return 0
    print(
        fields(
            [
                (k, r.get(k))
                for k in (
                    "request_id",
                    "status",
                    "source",
                    "subject",
                    "attribute",
                    "stale_value",
                    "observed_value",
                    "high_trust_epoch",
                    "divergent_epoch",
                    "corroborating_partitions",
                    "evidence_total",
                    "requested_at",
                    "resolved_at",
                    "resolved_by",
                    "claim_key",
                    "reason",
                )
            ]
            + [("evidence", ", ".join(r.get("evidence", [])))]
        )
    )
    return 0


def refresh_resolve(ns: argparse.Namespace, settings: Settings) -> int:

    with repo_view(settings) as repo:
        req = find_refresh(repo, ns.id)
        tenant = command_tenant(repo.claim_tenant(req["claim_key"]))
    if req["status"] != "open":
        raise CliError(
            f"refresh request {req['request_id']} is already {req['status']}"
            f"{' by ' + req['resolved_by'] if req['resolved_by'] else ''}"
        )
    rid = req["request_id"]
    publish_command(ns, settings, "resolve_refresh", rid, req["source"], tenant)
    p = req["payload"]
    done(
        ns,
        f"resolved refresh request {rid} ({req['source']}: {p.get('subject')} {p.get('attribute')} "
        f"{p.get('stale_value')} -> {p.get('observed_value')}) by {ns.actor}",
        {"command": "resolve_refresh", "request_id": rid, "actor": ns.actor, "status": "resolved"},
    )
    return 0


def refresh_acknowledge(ns: argparse.Namespace, settings: Settings) -> int:
    return refresh_decide(ns, settings, "acknowledge_refresh", "acknowledged", "open")


def refresh_reject(ns: argparse.Namespace, settings: Settings) -> int:
    return refresh_decide(ns, settings, "reject_refresh", "rejected", "rejected")


def refresh_decide(ns: argparse.Namespace, settings: Settings, command: Command, verb: str, status: str) -> int:
    with repo_view(settings) as repo:
        req = find_refresh(repo, ns.id)
        tenant = command_tenant(repo.claim_tenant(req["claim_key"]))
    if req["status"] != "open":
        raise CliError(
            f"refresh request {req['request_id']} is already {req['status']}"
            f"{' by ' + req['resolved_by'] if req['resolved_by'] else ''}"
        )
    rid = req["request_id"]
    publish_command(ns, settings, command, rid, req["source"], tenant)
    done(
        ns,
        f"{verb} refresh request {rid} ({req['source']}) by {ns.actor}",
        {"command": command, "request_id": rid, "actor": ns.actor, "status": status},
    )
    return 0
