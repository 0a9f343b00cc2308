"""Operator-facing commands of ``crp-stream``: refresh requests, quarantine review, audit.

``refresh list|show|resolve|acknowledge|reject``, ``quarantine list|show|confirm|release`` and ``audit tail`` print a
table a person can scan, or JSON with ``--json``. An action publishes an ``OperatorCommand`` on
``crp.operator.commands``, runs the embedded runtime until idle so its effect is visible at once, and
prints one line saying what happened; a rejected command prints the handler's reason. Ids may be
abbreviated to any unique prefix (the tables show 12 characters).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, get_args

from crp_stream.cli import audit_cmds, quarantine_cmds, refresh_cmds
from crp_stream.cli.base import CliError, Parser, add_broker, add_common, settings_of
from crp_stream.config import Settings
from crp_stream.events import AuditType

AUDIT_TYPES: tuple[str, ...] = get_args(AuditType)


def register(sub: Any) -> None:
    """The operator commands on the top-level sub-parser."""

    def leaf(parent: Any, name: str, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = parent.add_parser(name, help=help_)
        add_common(p)
        add_broker(p, "decisions go to its operator workers; lists read their --database")
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
        ("refresh", "list"): refresh_cmds.refresh_list,
        ("refresh", "show"): refresh_cmds.refresh_show,
        ("refresh", "resolve"): refresh_cmds.refresh_resolve,
        ("refresh", "acknowledge"): refresh_cmds.refresh_acknowledge,
        ("refresh", "reject"): refresh_cmds.refresh_reject,
        ("quarantine", "list"): quarantine_cmds.quarantine_list,
        ("quarantine", "show"): quarantine_cmds.quarantine_show,
        ("quarantine", "confirm"): quarantine_cmds.quarantine_confirm,
        ("quarantine", "release"): quarantine_cmds.quarantine_release,
        ("audit", "tail"): audit_cmds.audit_tail,
    }
    fn = handlers.get((ns.cmd, getattr(ns, "ops_cmd", "")))
    if fn is None:
        raise CliError(f"unknown command {ns.cmd!r}")
    if settings.broker and ns.cmd != "audit" and not settings.database_url:
        raise CliError(f"{ns.cmd}: with --broker, give the workers' database: --database URL (or CRP_DATABASE_URL)")
    if getattr(ns, "id", None) is not None and not ns.id.strip():
        raise CliError("ID: must not be empty")
    if getattr(ns, "actor", None) is not None and not ns.actor.strip():
        raise CliError("--actor: must name who decides")
    return fn(ns, settings)
