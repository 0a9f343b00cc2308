"""What the operator commands share: a read view of the store, id prefixes, tables, publishing a command."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from crp_stream import events
from crp_stream.cli.base import CliError
from crp_stream.config import Settings
from crp_stream.core.tenants import DEFAULT_TENANT
from crp_stream.events import Command
from crp_stream.events.topics import DEADLETTER, OPERATOR_COMMANDS
from crp_stream.runtime.embedded import open_runtime

SHORT_ID = 12


@contextmanager
def repo_view(settings: Settings) -> Iterator[Any]:
    """A read-only view of the fabric's relational store (no embedder, no vector index)."""
    from crp_stream.fabric.sql import db
    from crp_stream.fabric.sql.repository import Repository

    engine = db.make_engine(settings.database)
    try:
        if not db.is_migrated(engine):
            db.upgrade(engine)
        with engine.begin() as conn:
            yield Repository(conn)
    finally:
        engine.dispose()


def resolve_id(kind: str, wanted: str, ids: Sequence[str]) -> str | None:

    if wanted in ids:
        return wanted
    found = [i for i in ids if i.startswith(wanted)]
    if len(found) > 1:
        raise CliError(f"{kind} id {wanted!r} is ambiguous: {', '.join(sorted(found)[:5])}")
    return found[0] if found else None


def time_text(us: int | None) -> str:
    from crp_stream.processors.base import rfc3339

    return "" if us is None else rfc3339(us)[:19].replace("T", " ") + "Z"


def cell(value: Any, width: int) -> str:
    text = "" if value is None else str(value).replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def grid(headers: Sequence[str], rows: Sequence[Sequence[Any]], widths: Sequence[int]) -> str:
    cells = [[cell(v, w) for v, w in zip(row, widths, strict=True)] for row in rows]
    cols = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.upper().ljust(c) for h, c in zip(headers, cols, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(c) for v, c in zip(r, cols, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False))


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k.ljust(width)}  {'' if v is None else v}" for k, v in pairs)


def command_tenant(owner: str | None) -> str | None:
    """The ``tenant`` field of a command about a target of ``owner``: omitted for the default tenant."""
    return None if owner is None or owner == DEFAULT_TENANT else owner


def publish_command(
    ns: argparse.Namespace, settings: Settings, command: Command, target_id: str, key: str, tenant: str | None = None
) -> None:
    """Publish the command, run the embedded runtime until idle, and fail with the handler's reason
    if the command was dead-lettered."""
    from crp_stream.core.ids import derive_id

    actor = ns.actor.strip()
    if not actor:
        raise CliError("--actor: must name who decides")
    if settings.broker:  # a Kafka deployment: its operator worker applies the command
        from crp_stream.cli import kafka_ops

        kafka_ops.publish_command(ns, settings, command, target_id, key, tenant)
        return
    rt = open_runtime(settings)
    try:
        dead = settings.topic(DEADLETTER)
        ends = rt.log.end_offsets()
        position = str(ends.get(settings.topic(OPERATOR_COMMANDS), 0))
        command_id = derive_id("operator-cli", command, target_id, actor, ns.reason or "", position, tenant or "")
        cmd = events.OperatorCommand(
            command_id=command_id, command=command, target_id=target_id, actor=actor, reason=ns.reason, tenant=tenant
        )
        rt.publish(OPERATOR_COMMANDS, key, events.encode(cmd))
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


def done(ns: argparse.Namespace, line: str, obj: dict[str, Any]) -> None:
    if ns.json:
        print(json.dumps(obj, sort_keys=True))
    else:
        print(line)
