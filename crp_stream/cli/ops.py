"""Operator-facing commands of ``crp-stream`` (issue 4 §4): refresh requests, quarantine review, audit.

``refresh list|show|resolve|acknowledge|reject``, ``quarantine list|show|confirm|release`` and ``audit tail`` print a
table a person can scan, or JSON with ``--json``. An action publishes an ``OperatorCommand`` on
``crp.operator.commands``, runs the embedded runtime until idle so its effect is visible at once, and
prints one line saying what happened; a rejected command prints the handler's reason. Ids may be
abbreviated to any unique prefix (the tables show 12 characters).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, get_args

from crp_stream import events
from crp_stream.cli.base import CliError, Parser, add_common, settings_of
from crp_stream.config import Settings
from crp_stream.events import AuditType, Command
from crp_stream.runtime.embedded import open_runtime

SHORT_ID = 12
AUDIT_TYPES: tuple[str, ...] = get_args(AuditType)


def register(sub: Any) -> None:
    """The operator commands on the top-level sub-parser."""

    def leaf(parent: Any, name: str, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = parent.add_parser(name, help=help_)
        add_common(p)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    def act(p: argparse.ArgumentParser) -> None:
        p.add_argument("id", metavar="ID")
        p.add_argument("--actor", required=True, help="who decides (written into the audit event)")
        p.add_argument("--reason", help="why (written into the audit event)")

    rf = sub.add_parser("refresh", help="refresh requests filed against stale high-trust sources")
    rsub = rf.add_subparsers(dest="ops_cmd", required=True, parser_class=Parser)
    p = leaf(rsub, "list", "list refresh requests")
    p.add_argument("--status", choices=["open", "resolved", "rejected", "all"], default="all")
    leaf(rsub, "show", "show one refresh request").add_argument("id", metavar="ID")
    act(leaf(rsub, "resolve", "resolve a refresh request (operator command resolve_refresh)"))
    act(leaf(rsub, "acknowledge", "record that you took a refresh request; it stays open (acknowledge_refresh)"))
    act(
        leaf(
            rsub,
            "reject",
            "close a refresh request as rejected: the source is not stale, its stale facts "
            "become active again (reject_refresh)",
        )
    )

    qr = sub.add_parser("quarantine", help="quarantine candidates (poisoning review)")
    qsub = qr.add_subparsers(dest="ops_cmd", required=True, parser_class=Parser)
    p = leaf(qsub, "list", "list quarantine candidates")
    p.add_argument("--status", choices=["pending", "confirmed", "released", "all"], default="all")
    leaf(qsub, "show", "show one candidate, its facts and its history").add_argument("id", metavar="ID")
    act(leaf(qsub, "confirm", "quarantine a candidate's facts (confirm_quarantine)"))
    act(leaf(qsub, "release", "return a candidate's (or a fact's) quarantined facts to active (release_quarantine)"))

    rf.set_defaults(handler=dispatch)
    qr.set_defaults(handler=dispatch)
    au = sub.add_parser("audit", help="the audit log")
    au.set_defaults(handler=dispatch)
    asub = au.add_subparsers(dest="ops_cmd", required=True, parser_class=Parser)
    p = leaf(asub, "tail", "the latest audit events, oldest first")
    p.add_argument("--type", dest="audit_type", metavar="T", help=f"one of: {', '.join(AUDIT_TYPES)}")
    p.add_argument("--limit", type=int, default=20)


def dispatch(ns: argparse.Namespace) -> int:
    settings = settings_of(ns)

    handlers: dict[tuple[str, str], Callable[[argparse.Namespace, Settings], int]] = {
        ("refresh", "list"): _refresh_list,
        ("refresh", "show"): _refresh_show,
        ("refresh", "resolve"): _refresh_resolve,
        ("refresh", "acknowledge"): _refresh_acknowledge,
        ("refresh", "reject"): _refresh_reject,
        ("quarantine", "list"): _quarantine_list,
        ("quarantine", "show"): _quarantine_show,
        ("quarantine", "confirm"): _quarantine_confirm,
        ("quarantine", "release"): _quarantine_release,
        ("audit", "tail"): _audit_tail,
    }
    fn = handlers.get((ns.cmd, getattr(ns, "ops_cmd", "")))
    if fn is None:
        raise CliError(f"unknown command {ns.cmd!r}")
    if getattr(ns, "id", None) is not None and not ns.id.strip():
        raise CliError("ID: must not be empty")
    if getattr(ns, "actor", None) is not None and not ns.actor.strip():
        raise CliError("--actor: must name who decides")
    return fn(ns, settings)


# --- stores -----------------------------------------------------------------------------------------


@contextmanager
def _repo(settings: Settings) -> Iterator[Any]:
    """A read-only view of the fabric's relational store (no embedder, no vector index)."""
    from crp_stream.fabric import db
    from crp_stream.fabric.repository import Repository

    engine = db.make_engine(settings.database)
    try:
        if not db.is_migrated(engine):
            db.upgrade(engine)
        with engine.begin() as conn:
            yield Repository(conn)
    finally:
        engine.dispose()


def _resolve_id(kind: str, wanted: str, ids: Sequence[str]) -> str | None:

    if wanted in ids:
        return wanted
    found = [i for i in ids if i.startswith(wanted)]
    if len(found) > 1:
        raise CliError(f"{kind} id {wanted!r} is ambiguous: {', '.join(sorted(found)[:5])}")
    return found[0] if found else None


def _time(us: int | None) -> str:
    from crp_stream.processors.base import rfc3339

    return "" if us is None else rfc3339(us)[:19].replace("T", " ") + "Z"


def _cell(value: Any, width: int) -> str:
    text = "" if value is None else str(value).replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], widths: Sequence[int]) -> str:
    cells = [[_cell(v, w) for v, w in zip(row, widths, strict=True)] for row in rows]
    cols = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.upper().ljust(c) for h, c in zip(headers, cols, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(c) for v, c in zip(r, cols, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False))


def _fields(pairs: Sequence[tuple[str, Any]]) -> str:
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k.ljust(width)}  {'' if v is None else v}" for k, v in pairs)


# --- refresh ----------------------------------------------------------------------------------------


def _refresh_json(r: dict[str, Any]) -> dict[str, Any]:
    payload = {k: v for k, v in r["payload"].items() if k not in ("type", "high_trust_epoch_s")}
    return {
        **payload,
        "request_id": r["request_id"],
        "status": r["status"],
        "claim_key": r["claim_key"],
        "created_at": _time(r["created_at_us"]),
        "resolved_at": _time(r["resolved_at_us"]) or None,
        "resolved_by": r["resolved_by"],
    }


def _refresh_list(ns: argparse.Namespace, settings: Settings) -> int:
    with _repo(settings) as repo:
        rows = repo.refresh_requests(None if ns.status == "all" else ns.status)
    if ns.json:
        _print_json([_refresh_json(r) for r in rows])
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
                _time(r["created_at_us"]),
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
    print(_table(headers, table, [SHORT_ID, 8, 24, 32, 24, 40, 4, 8, 20, 20]))
    return 0


def _find_refresh(repo: Any, wanted: str) -> dict[str, Any]:

    rid = _resolve_id("refresh request", wanted, [r["request_id"] for r in repo.refresh_requests()])
    req = repo.refresh_request(rid) if rid else None
    if req is None:
        raise CliError(f"no refresh request {wanted!r} (see: crp-stream refresh list)")
    return dict(req)


def _refresh_show(ns: argparse.Namespace, settings: Settings) -> int:
    with _repo(settings) as repo:
        r = _refresh_json(_find_refresh(repo, ns.id))
    if ns.json:
        _print_json(r)
        return 0
    print(
        _fields(
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


def _refresh_resolve(ns: argparse.Namespace, settings: Settings) -> int:

    with _repo(settings) as repo:
        req = _find_refresh(repo, ns.id)
    if req["status"] != "open":
        raise CliError(
            f"refresh request {req['request_id']} is already {req['status']}"
            f"{' by ' + req['resolved_by'] if req['resolved_by'] else ''}"
        )
    rid = req["request_id"]
    _command(ns, settings, "resolve_refresh", rid, req["source"])
    p = req["payload"]
    _done(
        ns,
        f"resolved refresh request {rid} ({req['source']}: {p.get('subject')} {p.get('attribute')} "
        f"{p.get('stale_value')} -> {p.get('observed_value')}) by {ns.actor}",
        {"command": "resolve_refresh", "request_id": rid, "actor": ns.actor, "status": "resolved"},
    )
    return 0


def _refresh_acknowledge(ns: argparse.Namespace, settings: Settings) -> int:
    return _refresh_decide(ns, settings, "acknowledge_refresh", "acknowledged", "open")


def _refresh_reject(ns: argparse.Namespace, settings: Settings) -> int:
    return _refresh_decide(ns, settings, "reject_refresh", "rejected", "rejected")


def _refresh_decide(ns: argparse.Namespace, settings: Settings, command: Command, verb: str, status: str) -> int:
    with _repo(settings) as repo:
        req = _find_refresh(repo, ns.id)
    if req["status"] != "open":
        raise CliError(
            f"refresh request {req['request_id']} is already {req['status']}"
            f"{' by ' + req['resolved_by'] if req['resolved_by'] else ''}"
        )
    rid = req["request_id"]
    _command(ns, settings, command, rid, req["source"])
    _done(
        ns,
        f"{verb} refresh request {rid} ({req['source']}) by {ns.actor}",
        {"command": command, "request_id": rid, "actor": ns.actor, "status": status},
    )
    return 0


# --- quarantine -------------------------------------------------------------------------------------


def _candidate_json(c: dict[str, Any]) -> dict[str, Any]:
    payload = {k: v for k, v in c["payload"].items() if k not in ("type", "verdict")}
    return {
        **payload,
        "candidate_id": c["candidate_id"],
        "status": c["status"],
        "claim_key": c["claim_key"],
        "created_at": _time(c["created_at_us"]),
        "decided_at": _time(c["decided_at_us"]) or None,
        "decided_by": c["decided_by"],
    }


def _quarantine_list(ns: argparse.Namespace, settings: Settings) -> int:
    with _repo(settings) as repo:
        rows = repo.candidates(None if ns.status == "all" else ns.status)
    if ns.json:
        _print_json([_candidate_json(c) for c in rows])
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
            _time(c["created_at_us"]),
            c["decided_by"] or "",
        ]
        for c in rows
    ]
    print(
        _table(
            ["candidate", "status", "source", "subject", "attribute", "value", "facts", "filed", "decided by"],
            table,
            [SHORT_ID, 9, 24, 32, 24, 24, 5, 20, 24],
        )
    )
    return 0


def _find_candidate(repo: Any, wanted: str) -> dict[str, Any] | None:
    cid = _resolve_id("candidate", wanted, [c["candidate_id"] for c in repo.candidates()])
    return dict(repo.candidate(cid)) if cid else None


def _quarantine_show(ns: argparse.Namespace, settings: Settings) -> int:

    with _repo(settings) as repo:
        cand = _find_candidate(repo, ns.id)
        if cand is None:
            raise CliError(f"no quarantine candidate {ns.id!r} (see: crp-stream quarantine list)")
        facts = repo.facts_by_ids(cand["payload"].get("fact_ids", []))
        cid = cand["candidate_id"]
        history = [
            a
            for a in repo.audit(limit=100_000)
            if cid in (a["details"].get("candidate_id"), a["details"].get("target_id"))
        ]
    c = _candidate_json(cand)
    c["facts"] = [
        {"fact_id": f["fact_id"], "status": f["status"], "text": f["text"], "epoch": _time(f["epoch_us"])}
        for f in sorted(facts.values(), key=lambda f: f["fact_id"])
    ]
    c["history"] = [_audit_json(a) for a in history]
    if ns.json:
        _print_json(c)
        return 0
    print(
        _fields(
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
        _table(
            ["fact", "status", "epoch", "text"],
            [[f["fact_id"], f["status"], f["epoch"], f["text"]] for f in c["facts"]],
            [32, 11, 20, 60],
        )
    )
    if c["history"]:
        print()
        print(_audit_table(c["history"]))
    return 0


def _quarantine_confirm(ns: argparse.Namespace, settings: Settings) -> int:

    with _repo(settings) as repo:
        cand = _find_candidate(repo, ns.id)
    if cand is None:
        raise CliError(f"no quarantine candidate {ns.id!r} (see: crp-stream quarantine list)")
    if cand["status"] == "confirmed":
        raise CliError(f"quarantine candidate {cand['candidate_id']} is already confirmed by {cand['decided_by']}")
    cid = cand["candidate_id"]
    _command(ns, settings, "confirm_quarantine", cid, cand["source"])
    n = len(cand["payload"].get("fact_ids", []))
    _done(
        ns,
        f"quarantined {n} fact(s) of {cand['source']} (candidate {cid}) by {ns.actor}",
        {"command": "confirm_quarantine", "candidate_id": cid, "actor": ns.actor, "status": "confirmed"},
    )
    return 0


def _quarantine_release(ns: argparse.Namespace, settings: Settings) -> int:

    with _repo(settings) as repo:
        cand = _find_candidate(repo, ns.id)
        fact = None if cand else repo.facts_by_ids([ns.id]).get(ns.id)
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
    _command(ns, settings, "release_quarantine", target, source)
    _done(
        ns,
        f"released {what} of {source}: its facts are active again, by {ns.actor}",
        {"command": "release_quarantine", "target_id": target, "actor": ns.actor, "status": "released"},
    )
    return 0


# --- actions ----------------------------------------------------------------------------------------


def _command(ns: argparse.Namespace, settings: Settings, command: Command, target_id: str, key: str) -> None:
    """Publish the command, run the embedded runtime until idle, and fail with the handler's reason
    if the command was dead-lettered."""
    from crp_stream.core.ids import derive_id

    actor = ns.actor.strip()
    if not actor:
        raise CliError("--actor: must name who decides")
    rt = open_runtime(settings)
    try:
        dead = settings.topic("crp.deadletter")
        ends = rt.log.end_offsets()
        position = str(ends.get(settings.topic("crp.operator.commands"), 0))
        command_id = derive_id("operator-cli", command, target_id, actor, ns.reason or "", position)
        cmd = events.OperatorCommand(
            command_id=command_id, command=command, target_id=target_id, actor=actor, reason=ns.reason
        )
        rt.publish("crp.operator.commands", key, events.encode(cmd))
        rt.run_until_idle()
        for rec in rt.log.iter_topic(dead, ends.get(dead, 0)):
            try:
                value = json.loads(rec.value)
            except ValueError:
                continue
            if isinstance(value, dict) and command_id in str(value.get("raw", "")):
                raise CliError(f"{command} {target_id}: rejected: {value.get('reason')}")
    finally:
        rt.fabric.close()
        rt.log.close()


def _done(ns: argparse.Namespace, line: str, obj: dict[str, Any]) -> None:
    if ns.json:
        print(json.dumps(obj, sort_keys=True))
    else:
        print(line)


# --- audit ------------------------------------------------------------------------------------------


def _audit_json(a: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_id": a["event_id"],
        "audit_type": a["audit_type"],
        "at": _time(a["at_us"]),
        "key": a["key"],
        "details": a["details"],
    }


def _summary(details: dict[str, Any]) -> str:
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


def _audit_table(rows: Sequence[dict[str, Any]]) -> str:
    table = [[a["at"], a["audit_type"], a["key"], _summary(a["details"])] for a in rows]
    return _table(["at", "type", "key", "summary"], table, [20, 24, 28, 110])


def _audit_tail(ns: argparse.Namespace, settings: Settings) -> int:

    if ns.audit_type and ns.audit_type not in AUDIT_TYPES:
        raise CliError(f"--type: {ns.audit_type!r} is not an audit type ({', '.join(AUDIT_TYPES)})")
    if ns.limit < 1:
        raise CliError(f"--limit: {ns.limit} must be at least 1")
    with _repo(settings) as repo:
        rows = [_audit_json(a) for a in repo.audit(ns.audit_type, ns.limit)]
    if ns.json:
        _print_json(rows)
    elif not rows:
        print("no audit events" + (f" of type {ns.audit_type}" if ns.audit_type else ""))
    else:
        print(_audit_table(rows))
    return 0
