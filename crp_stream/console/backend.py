"""What the console reads and writes, through the fabric's repository and the runtime's log: no SQL here.

``EmbeddedBackend`` serves ``crp-stream console`` on the embedded default. An operator command is
published on ``crp.operator.commands`` exactly as the CLI publishes it, then the embedded runtime runs
until idle so the page after the redirect shows its effect; a command the handler rejected is found
on ``crp.deadletter`` and its reason shown.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from crp_stream import events
from crp_stream.config import Settings
from crp_stream.core.ids import derive_id
from crp_stream.events import Command
from crp_stream.events.topics import DEADLETTER, OPERATOR_COMMANDS
from crp_stream.fabric.sql.repository import Repository
from crp_stream.processors import HANDLER_GROUPS, all_handlers
from crp_stream.processors.base import Emitter
from crp_stream.processors.effects import audit
from crp_stream.runtime.console_port import CommandResult, TopicRecord, TopicRow, thresholds_view
from crp_stream.runtime.embedded import Append, EmbeddedLog, open_fabric, open_runtime, system_clock

DENIED_KEY = "console"


class EmbeddedBackend:
    """The fabric + the embedded log of one data directory. One lock: SQLite and qdrant-edge are
    used by one request at a time (an operator console is not a hot path)."""

    def __init__(self, settings: Settings, *, clock: Callable[[], int] = system_clock) -> None:
        self.settings = settings
        self.clock = clock
        self.fabric = open_fabric(settings)
        self._lock = threading.RLock()
        self._denied = itertools.count()
        self._reads = {h.group: tuple(h.topics) for h in all_handlers()}

    @contextmanager
    def log(self) -> Iterator[EmbeddedLog]:
        """A short-lived connection to the log, under the lock: one SQLite connection is never shared
        between the server's threads, and a ``crp-stream run`` beside the console sees every append."""
        with self._lock:
            log_ = EmbeddedLog(self.settings.log_path, self.clock)
            try:
                yield log_
            finally:
                log_.close()

    @contextmanager
    def repo(self) -> Iterator[Repository]:
        with self._lock, self.fabric.unit_of_work() as uow:
            yield uow.repo

    # --- reads ------------------------------------------------------------------------------------

    def topics(self) -> list[TopicRow]:
        with self.repo() as repo:
            committed = {g: repo.offsets(g) for g in HANDLER_GROUPS}
        with self.log() as log_:
            ends = log_.end_offsets()
        rows = []
        for physical, end in sorted(ends.items()):
            base = self.settings.base_topic(physical)
            consumers = {}
            for group in HANDLER_GROUPS:
                if base in self._reads.get(group, ()):
                    done = sum(o for (t, _p), o in committed[group].items() if t == base)
                    consumers[group] = (done, max(0, end - done))
            rows.append(TopicRow(base, end, consumers))
        return rows

    def records(self, topic: str, key: str | None = None, limit: int = 1000) -> list[TopicRecord]:
        """The records of ``topic`` (of one key if given), oldest first, at most ``limit``."""
        out = []
        with self.log() as log_:
            for rec in log_.iter_topic(self.settings.topic(topic), 0):
                if key is None or rec.key == key:
                    out.append(TopicRecord(rec.key, rec.value, rec.headers, rec.record_id))
                    if len(out) >= limit:
                        break
        return out

    def model(self) -> dict[str, Any]:
        with self.repo() as repo:
            return thresholds_view(self.fabric, repo)

    def vector_count(self) -> int:
        with self._lock:
            return int(self.fabric.vectors.count())

    # --- writes -----------------------------------------------------------------------------------

    def publish_command(
        self, command: Command, target_id: str, key: str, actor: str, reason: str | None, tenant: str | None = None
    ) -> CommandResult:
        """Publish the operator command and process it; the handler's reason if it was rejected."""
        with self._lock:
            rt = open_runtime(self.settings, clock=self.clock, fabric=self.fabric)
            try:
                dead = self.settings.topic(DEADLETTER)
                ends = rt.log.end_offsets()
                position = str(ends.get(self.settings.topic(OPERATOR_COMMANDS), 0))
                command_id = derive_id(
                    "operator-console", command, target_id, actor, reason or "", position, *([tenant] if tenant else [])
                )
                cmd = events.OperatorCommand(
                    command_id=command_id,
                    command=command,
                    target_id=target_id,
                    actor=actor,
                    reason=reason,
                    tenant=tenant,
                )
                rt.publish(OPERATOR_COMMANDS, key, events.encode(cmd))
                rt.run_until_idle()
                for rec in rt.log.iter_topic(dead, ends.get(dead, 0)):
                    try:
                        value = json.loads(rec.value)
                    except ValueError:
                        continue
                    if isinstance(value, dict) and command_id in str(value.get("raw", "")):
                        return CommandResult(command_id, str(value.get("reason")))
                return CommandResult(command_id, None)
            finally:
                rt.log.close()

    def record_denied(self, details: dict[str, Any]) -> str:
        """An ``ACCESS_DENIED`` audit event (audit log + ``crp.audit``) for a refused write. ``details``
        never holds the token: the caller passes what was asked and why it was refused."""
        with self._lock:
            now = self.clock()
            event_id = derive_id(
                "console-denied", json.dumps(details, sort_keys=True), str(now), str(next(self._denied))
            )
            out = Emitter(cause=event_id)
            with self.fabric.unit_of_work() as uow:
                audit(uow, out, event_id, "ACCESS_DENIED", DENIED_KEY, now, details)
            with self.log() as log_:
                log_.append(
                    [Append(self.settings.topic(o.topic), o.key, o.value, o.record_id, now) for o in out.outputs]
                )
            return event_id

    def close(self) -> None:
        self.fabric.close()
