"""``crp-stream quarantine ...``: the operator's quarantine commands (tables, or JSON with ``--json``)."""

from __future__ import annotations

import argparse
from typing import Any, get_args

from crp_stream.cli.audit_cmds import audit_json, audit_table
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
from crp_stream.events import AuditType
from crp_stream.fabric.sql.repository import Repository

AUDIT_TYPES: tuple[str, ...] = get_args(AuditType)


def candidate_json(c: dict[str, Any]) -> dict[str, Any]:
    payload = {k: v for k, v in c["payload"].items() if k not in ("type", "verdict")}
    return {
        **payload,
        "candidate_id": c["candidate_id"],
        "status": c["status"],
        "claim_key": c["claim_key"],
        "created_at": time_text(c["created_at_us"]),
        "decided_at": time_text(c["decided_at_us"]) or None,
        "decided_by": c["decided_by"],
    }


def quarantine_list(ns: argparse.Namespace, settings: Settings) -> int:
    with repo_view(settings) as repo:
        rows = repo.candidates(None if ns.status == "all" else ns.status)
    if ns.json:
        print_json([candidate_json(c) for c in rows])
        return 0
    if not rows:
        print(f"no quarantine candidates ({ns.status})")
        return 0
    table = [
        [
            c["candidate_id"][:SHORT_ID],
            c["status"],
            c["source"],
            c["payload"].get("subject"),
            c["payload"].get("attribute"),
            c["payload"].get("value"),
            len(c["payload"].get("fact_ids", [])),
            time_text(c["created_at_us"]),
            c["decided_by"] or "",
        ]
        for c in rows
    ]
    print(
        grid(
            ["candidate", "status", "source", "subject", "attribute", "value", "facts", "filed", "decided by"],
            table,
            [SHORT_ID, 9, 24, 32, 24, 24, 5, 20, 24],
        )
    )
    return 0


def find_candidate(repo: Repository, wanted: str) -> dict[str, Any] | None:
    cid = resolve_id("candidate", wanted, [c["candidate_id"] for c in repo.candidates()])
    found = repo.candidate(cid) if cid else None
    return dict(found) if found is not None else None


def quarantine_show(ns: argparse.Namespace, settings: Settings) -> int:

    with repo_view(settings) as repo:
        cand = find_candidate(repo, ns.id)
        if cand is None:
            raise CliError(f"no quarantine candidate {ns.id!r} (see: crp-stream quarantine list)")
        facts = repo.facts_by_ids(cand["payload"].get("fact_ids", []))
        cid = cand["candidate_id"]
        history = [
            a
            for a in repo.audit(limit=100_000)
            if cid in (a["details"].get("candidate_id"), a["details"].get("target_id"))
        ]
    c = candidate_json(cand)
    c["facts"] = [
        {"fact_id": f["fact_id"], "status": f["status"], "text": f["text"], "epoch": time_text(f["epoch_us"])}
        for f in sorted(facts.values(), key=lambda f: f["fact_id"])
    ]
    c["history"] = [audit_json(a) for a in history]
    if ns.json:
        print_json(c)
        return 0
    print(
        fields(
            [
                (k, c.get(k))
                for k in (
                    "candidate_id",
                    "status",
                    "source",
                    "subject",
                    "attribute",
                    "value",
                    "created_at",
                    "decided_at",
                    "decided_by",
                    "claim_key",
                    "reason",
                )
            ]
        )
    )
    print()
    print(
        grid(
            ["fact", "status", "epoch", "text"],
            [[f["fact_id"], f["status"], f["epoch"], f["text"]] for f in c["facts"]],
            [32, 11, 20, 60],
        )
    )
    if c["history"]:
        print()
        print(audit_table(c["history"]))
    return 0


def quarantine_confirm(ns: argparse.Namespace, settings: Settings) -> int:

    with repo_view(settings) as repo:
        cand = find_candidate(repo, ns.id)
        tenant = command_tenant(repo.claim_tenant(cand["claim_key"])) if cand is not None else None
    if cand is None:
        raise CliError(f"no quarantine candidate {ns.id!r} (see: crp-stream quarantine list)")
    if cand["status"] == "confirmed":
        raise CliError(f"quarantine candidate {cand['candidate_id']} is already confirmed by {cand['decided_by']}")
    cid = cand["candidate_id"]
    publish_command(ns, settings, "confirm_quarantine", cid, cand["source"], tenant)
    n = len(cand["payload"].get("fact_ids", []))
    done(
        ns,
        f"quarantined {n} fact(s) of {cand['source']} (candidate {cid}) by {ns.actor}",
        {"command": "confirm_quarantine", "candidate_id": cid, "actor": ns.actor, "status": "confirmed"},
    )
    return 0


def quarantine_release(ns: argparse.Namespace, settings: Settings) -> int:

    with repo_view(settings) as repo:
        cand = find_candidate(repo, ns.id)
        fact = None if cand else repo.facts_by_ids([ns.id]).get(ns.id)
        owner = repo.claim_tenant(cand["claim_key"]) if cand is not None else fact["tenant"] if fact else None
    if cand is None and fact is None:
        raise CliError(f"no quarantine candidate or fact {ns.id!r} (see: crp-stream quarantine list)")
    if cand is not None:
        if cand["status"] == "released":
            raise CliError(f"quarantine candidate {cand['candidate_id']} is already released by {cand['decided_by']}")
        target, source, what = cand["candidate_id"], cand["source"], f"candidate {cand['candidate_id']}"
    else:
        assert fact is not None
        if fact["status"] != "quarantined":
            raise CliError(f"fact {ns.id} is not quarantined (status {fact['status']})")
        target, source, what = ns.id, fact["source"], f"fact {ns.id}"
    publish_command(ns, settings, "release_quarantine", target, source, command_tenant(owner))
    done(
        ns,
        f"released {what} of {source}: its facts are active again, by {ns.actor}",
        {"command": "release_quarantine", "target_id": target, "actor": ns.actor, "status": "released"},
    )
    return 0
