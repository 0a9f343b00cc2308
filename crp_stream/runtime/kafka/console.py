"""The operator console on a Kafka worker: ``crp-stream worker --console`` mounts it at ``/console`` on the
worker's HTTP port (faust's aiohttp server; the ASGI app is served through ``aiohttp-asgi``).

``KafkaConsoleBackend`` reads the fabric through the worker's engine (PostgreSQL), and the topics and
publishes operator commands through short-lived aiokafka clients, each on its own event loop in the
console's request thread (apart from faust's loop, which the records keep); after a command it waits
for an operator worker (any in the group) to apply it or dead-letter it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from crp_stream import events
from crp_stream.config import Settings
from crp_stream.core.ids import derive_id
from crp_stream.events import Command
from crp_stream.events.topics import OPERATOR_COMMANDS
from crp_stream.fabric.sql.repository import Repository
from crp_stream.processors import HANDLER_GROUPS, all_handlers
from crp_stream.processors.base import Emitter
from crp_stream.processors.dispatch import ID_HEADER
from crp_stream.processors.effects import audit
from crp_stream.runtime.console_port import CommandResult, TopicRecord, TopicRow, thresholds_view

log = logging.getLogger("crp_stream.console")
MOUNT = "/console"
WAIT_S = 30.0  # how long a write waits for an operator worker to apply the command
T = TypeVar("T")


async def _stop(consumer: AIOKafkaConsumer) -> None:
    # In a faust process a group-less consumer's stop awaits its own cancelled committed-offsets task
    # and re-raises that CancelledError; the consumer is closed by then.
    with contextlib.suppress(asyncio.CancelledError):
        await consumer.stop()


class KafkaConsoleBackend:
    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.settings: Settings = worker.settings
        self.fabric = worker.fabric
        self._reads = {h.group: tuple(h.topics) for h in all_handlers()}

    @staticmethod
    def _on_loop(make: Callable[[], Coroutine[Any, Any, T]], timeout: float = 60.0) -> T:
        return asyncio.run(asyncio.wait_for(make(), timeout))

    @contextmanager
    def repo(self) -> Iterator[Repository]:
        with self.fabric.engine.begin() as conn:
            yield Repository(conn)

    # --- reads ------------------------------------------------------------------------------------

    async def _ends(self, topics: list[str]) -> dict[str, int]:
        c = AIOKafkaConsumer(**self.worker.kafka, enable_auto_commit=False)
        await c.start()
        cluster = await c._client.fetch_all_metadata()  # fresh metadata of every topic (as kafka/rebuild.py)
        try:
            tps = [TopicPartition(t, p) for t in topics for p in sorted(cluster.partitions_for_topic(t) or ())]
            ends = await c.end_offsets(tps) if tps else {}
        finally:
            await _stop(c)
        out: dict[str, int] = {}
        for tp, end in ends.items():
            out[tp.topic] = out.get(tp.topic, 0) + int(end)
        return out

    def topics(self) -> list[TopicRow]:
        names = [self.settings.topic(t) for t in events.TOPICS]
        ends = self._on_loop(lambda: self._ends(names))
        with self.repo() as repo:
            committed = {g: repo.offsets(g) for g in HANDLER_GROUPS}
        rows = []
        for physical in sorted(ends):
            base = self.settings.base_topic(physical)
            consumers = {}
            for group in HANDLER_GROUPS:
                if base in self._reads.get(group, ()) and committed[group]:
                    done = sum(o for (t, _p), o in committed[group].items() if t == base)
                    consumers[group] = (done, max(0, ends[physical] - done))
            rows.append(TopicRow(base, ends[physical], consumers))
        return rows

    async def _read(self, topic: str, key: str | None, limit: int) -> list[TopicRecord]:
        c = AIOKafkaConsumer(**self.worker.kafka, enable_auto_commit=False)
        await c.start()
        cluster = await c._client.fetch_all_metadata()  # fresh metadata of every topic (as kafka/rebuild.py)
        out: list[TopicRecord] = []
        try:
            tps = [TopicPartition(topic, p) for p in sorted(cluster.partitions_for_topic(topic) or ())]
            if not tps:
                return out
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            ends = await c.end_offsets(tps)
            got: list[tuple[int, TopicRecord]] = []
            while [tp for tp in tps if await c.position(tp) < ends[tp]]:
                for batch in (await c.getmany(timeout_ms=1000, max_records=500)).values():
                    for m in batch:
                        k = m.key.decode("utf-8", "replace") if m.key is not None else None
                        if key is None or k == key:
                            hdrs = tuple((h, bytes(v)) for h, v in (m.headers or ()))
                            rid = next((v.decode() for h, v in hdrs if h == ID_HEADER), None)
                            got.append((m.timestamp, TopicRecord(k, bytes(m.value or b""), hdrs, rid)))
            out = [r for _ts, r in sorted(got, key=lambda x: x[0])][:limit]
        finally:
            await _stop(c)
        return out

    def records(self, topic: str, key: str | None = None, limit: int = 1000) -> list[TopicRecord]:
        """The topic's records (of one key), across partitions in log-append order; reads the whole topic."""
        return self._on_loop(lambda: self._read(self.settings.topic(topic), key, limit), timeout=120.0)

    def model(self) -> dict[str, Any]:
        with self.repo() as repo:
            return thresholds_view(self.fabric, repo)

    def vector_count(self) -> int:
        return int(self.fabric.vectors.count())

    # --- writes -----------------------------------------------------------------------------------

    async def _send(self, topic: str, key: str, value: bytes, headers: list[tuple[str, bytes]]) -> Any:
        producer = AIOKafkaProducer(**self.worker.kafka, acks="all")
        await producer.start()
        try:
            return await producer.send_and_wait(self.settings.topic(topic), value, key=key.encode(), headers=headers)
        finally:
            await producer.stop()

    def publish_command(
        self, command: Command, target_id: str, key: str, actor: str, reason: str | None, tenant: str | None = None
    ) -> CommandResult:
        nonce = f"{time.time_ns()}"  # two identical decisions are two commands; the id says when
        command_id = derive_id(
            "operator-console", command, target_id, actor, reason or "", nonce, *([tenant] if tenant else [])
        )
        cmd = events.OperatorCommand(
            command_id=command_id, command=command, target_id=target_id, actor=actor, reason=reason, tenant=tenant
        )
        meta = self._on_loop(lambda: self._send(OPERATOR_COMMANDS, key, events.encode(cmd), []))
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with self.repo() as repo:
                if repo.processed_hash("operator", f"command_id:{command_id}") is not None:
                    return CommandResult(command_id, None)
                for a in repo.audit_query("EVENT_REJECTED", key=key, limit=200):
                    d = a["details"]
                    if d.get("topic") == OPERATOR_COMMANDS and d.get("offset") == meta.offset:
                        return CommandResult(command_id, str(d.get("reason")))
            time.sleep(0.2)
        return CommandResult(command_id, None, pending=True)

    def record_denied(self, details: dict[str, Any]) -> str:
        now = time.time_ns() // 1000
        event_id = derive_id("console-denied", json.dumps(details, sort_keys=True), str(now))
        out = Emitter(cause=event_id)
        with self.fabric.unit_of_work() as uow:
            audit(uow, out, event_id, "ACCESS_DENIED", "console", now, details)
        for o in out.outputs:
            self._on_loop(partial(self._send, o.topic, o.key, o.value, [(ID_HEADER, o.record_id.encode())]))
        return event_id

    def close(self) -> None:
        """The worker owns the fabric and the producer."""


def mount_all(app: Any, worker: Any) -> None:
    """Serve each of the worker's ASGI mounts under its prefix on the faust app's aiohttp server.

    A plain aiohttp route per prefix (not ``ASGIResource``): faust's web enables aiohttp-cors, whose
    response hook needs every match to be a route's."""
    from aiohttp_asgi.resource import ASGIContext

    for prefix, make in worker.mounts:
        asgi_app = make(worker)

        async def handle(request: Any, asgi_app: Any = asgi_app, prefix: str = prefix) -> Any:
            try:
                return await ASGIContext(asgi_app, request, prefix).get_response()
            except BaseException as exc:
                log.warning(
                    "console: %s %s failed: %s: %s",
                    request.method,
                    request.path,
                    type(exc).__name__,
                    exc,
                    exc_info=True,
                )
                raise

        app.web.web_app.router.add_route("*", prefix + "{tail:(/.*)?}", handle)
