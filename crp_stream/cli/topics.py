"""``crp-stream topics check|create``: the Kafka topics of the contract as the rules want them.

``check`` lists every topic with its partitions, replication, timestamp type and retention and what
breaks the rules (missing; not ``LogAppendTime``; a source-of-truth topic whose retention is not
infinite, another whose retention is not ``derived_retention``; partitions other than the setting;
fewer replicas than ``replication_factor``); exit 1 if anything does. ``create`` creates the missing
ones as a worker would. Existing topics are never altered: the fix for each problem is printed.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from crp_stream.cli.base import CliError, Parser, add_broker, add_common, settings_of
from crp_stream.cli.tables import grid
from crp_stream.config import Settings


def register(sub: Any) -> None:
    tp = sub.add_parser("topics", help="check or create the Kafka topics (retention, LogAppendTime, partitions)")
    tsub = tp.add_subparsers(dest="topics_cmd", required=True, parser_class=Parser)
    for name, help_ in (
        ("check", "report each topic whose configuration breaks the rules; exit 1 if any does"),
        ("create", "create the missing topics (existing ones are left as they are)"),
    ):
        p = tsub.add_parser(name, help=help_)
        add_common(p)
        add_broker(p, "the broker whose topics these are")
        p.add_argument("--partitions", type=int, help="partitions of each topic (env CRP_PARTITIONS, default 4)")
        p.add_argument("--replication-factor", type=int, help="replicas (env CRP_REPLICATION_FACTOR, default 1)")
        p.add_argument(
            "--derived-retention",
            metavar="DURATION",
            help="retention of the topics that are not the source of truth: P30D | infinite "
            "(env CRP_DERIVED_RETENTION, default infinite)",
        )
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(handler=run)


def _settings(ns: argparse.Namespace) -> Settings:
    settings = settings_of(ns)
    if not settings.broker:
        raise CliError(f"topics {ns.topics_cmd}: --broker kafka://HOST:PORT (or CRP_BROKER) is required")
    return settings


def run(ns: argparse.Namespace) -> int:
    settings = _settings(ns)
    from crp_stream.runtime.kafka.topics import create_topics, retention_text, topic_report
    from crp_stream.runtime.kafka.transport import run as run_async

    created: list[str] = []
    if ns.topics_cmd == "create":
        created = run_async(create_topics(settings))
    report = run_async(topic_report(settings))
    bad = [t for t in report if t.problems]
    if ns.json:
        rows = [
            {
                "topic": t.name,
                "exists": t.exists,
                "partitions": t.partitions,
                "replication": t.replication,
                "timestamp_type": t.timestamp_type,
                "retention_ms": t.retention_ms,
                "problems": t.problems,
            }
            for t in report
        ]
        print(json.dumps({"created": created, "topics": rows}, indent=2, sort_keys=True))
    else:
        if ns.topics_cmd == "create":
            print(f"created {len(created)} topics" + (f": {', '.join(created)}" if created else ""))
        table = [
            [
                t.name,
                t.partitions if t.exists else "",
                t.replication if t.exists else "",
                t.timestamp_type or "",
                retention_text(t.retention_ms) if t.exists else "",
                "; ".join(t.problems) or "ok",
            ]
            for t in report
        ]
        print(
            grid(
                ["topic", "partitions", "replicas", "timestamp", "retention", "check"], table, [40, 10, 8, 14, 10, 160]
            )
        )
        if bad:
            print(
                f"{len(bad)} of {len(report)} topics break the rules. An existing topic is fixed with kafka-configs "
                "--alter --entity-type topics --entity-name TOPIC --add-config retention.ms=MS (-1: infinite) or "
                "message.timestamp.type=LogAppendTime; partitions only grow (kafka-topics --alter --partitions N)."
            )
    return 1 if bad and ns.topics_cmd == "check" else 0


__all__ = ["register", "run"]
