"""The operator commands with ``--broker``: ``refresh``/``quarantine`` decisions go to the Kafka topic
``crp.operator.commands`` and are applied by a worker's operator group (this waits for it, up to
``WAIT_S``); their lists read the workers' database; ``audit tail`` reads the ``crp.audit`` topic."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from typing import Any

from crp_stream import events
from crp_stream.cli.base import CliError
from crp_stream.cli.tables import repo_view
from crp_stream.config import Settings
from crp_stream.core.ids import derive_id
from crp_stream.events import Command
from crp_stream.events.topics import AUDIT, DEADLETTER, OPERATOR_COMMANDS
from crp_stream.processors.base import dt_to_us
from crp_stream.runtime.kafka.transport import Transport

WAIT_S = 30.0


def publish_command(
    ns: argparse.Namespace, settings: Settings, command: Command, target_id: str, key: str, tenant: str | None = None
) -> None:
    """Produce the command, then wait until an operator worker applied it (its processed mark in the
    database) or dead-lettered it (fail with the handler's reason)."""
    actor = ns.actor.strip()
    nonce = str(time.time_ns())  # two identical decisions are two commands
    command_id = derive_id("operator-cli", command, target_id, actor, ns.reason or "", nonce, tenant or "")
    cmd = events.OperatorCommand(
        command_id=command_id, command=command, target_id=target_id, actor=actor, reason=ns.reason, tenant=tenant
    )

    async def go() -> str | None:
        t = Transport(settings, "crp-cli-operator")
        await t.start()
        try:
            dead_from = await t.end_offsets([DEADLETTER])
            await t.produce(OPERATOR_COMMANDS, key, events.encode(cmd))
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                with repo_view(settings) as repo:
                    if repo.processed_hash("operator", f"command_id:{command_id}") is not None:
                        return None
                records = t.records([DEADLETTER], dead_from)
                async with contextlib.aclosing(records):  # its consumer closes before we return
                    async for r in records:
                        dead_from[(r.topic, r.partition)] = r.offset + 1
                        if _refuses(_json(r.value), command_id, settings):
                            return str(_json(r.value).get("reason"))
                await asyncio.sleep(0.3)
        finally:
            await t.close()
        raise CliError(
            f"{command} {target_id}: published as {command_id}, but no operator worker applied it within "
            f"{WAIT_S:.0f} s (is a worker with the operator group running on this database?)"
        )

    reason = asyncio.run(go())
    if reason is not None:
        raise CliError(f"{command} {target_id}: rejected: {reason}")


def _refuses(dead: dict[str, Any], command_id: str, settings: Settings) -> bool:
    """A dead letter of our command (its ``topic`` is the contract name; the raw bytes hold the id)."""
    return dead.get("topic") in (OPERATOR_COMMANDS, settings.topic(OPERATOR_COMMANDS)) and command_id in str(
        dead.get("raw", "")
    )


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def audit_rows(settings: Settings, audit_type: str | None, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` audit events on ``crp.audit`` (of one type), oldest first, shaped as the
    database's rows (``at_us``, ``details``, ...)."""

    async def go() -> list[dict[str, Any]]:
        t = Transport(settings, "crp-cli-audit")
        await t.start()
        seen: dict[str, dict[str, Any]] = {}  # by event id: a re-produced output counts once
        async for r in t.records([AUDIT]):
            ev = events.AuditRecorded.model_validate_json(r.value)
            if audit_type is None or ev.audit_type == audit_type:
                seen.setdefault(
                    ev.event_id,
                    {
                        "event_id": ev.event_id,
                        "audit_type": ev.audit_type,
                        "at_us": dt_to_us(ev.at),
                        "key": r.key,
                        "details": ev.details,
                        "ts": (r.ts_ms, r.partition, r.offset),
                    },
                )
        rows = sorted(seen.values(), key=lambda a: (a["at_us"], a["ts"]))
        return rows[-limit:]

    return asyncio.run(go())


__all__ = ["audit_rows", "publish_command"]
