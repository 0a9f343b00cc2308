"""Per-session order for the Kafka retrieval group, with the event-time barrier in front of requests.

A session's window requests and reports arrive on two topics (same key, same partition number), so
Kafka gives no order between them. Each session gets a queue ordered by log-append time (a report
stamped in the same millisecond as a request goes first: a report never answers a later request).
A report at the head is applied at once; a request at the head waits for the barrier
(``barrier``), while reports that sort before it are still applied. Sessions are independent:
one waiting request holds back only the records of its own session that come after it, never the rest
of its partition, and never ingest.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import faust

from crp_stream.events.topics import FACTS, WINDOW_REQUESTS
from crp_stream.fabric.sql.repository import Repository
from crp_stream.processors.base import AnyHandler
from crp_stream.runtime.kafka.barrier import PROJECTION, EventTimeBarrier
from crp_stream.runtime.kafka.request_batch import RequestBatcher

if TYPE_CHECKING:
    from crp_stream.runtime.kafka.worker import KafkaWorker

log = logging.getLogger("crp_stream.kafka")

#: How long the fabric offsets of another worker's groups, read for the barrier, are reused.
POSITIONS_TTL_S = 0.05
#: At most this many released records per transaction: a record's envelope waits for its whole batch, and
#: a few records already share most of a transaction's fixed cost.
REQUESTS_PER_BATCH = 16
#: The groups the barrier waits for (``barrier.py``): their offsets are read together.
BARRIER_GROUPS = ("arbiter", "ingest", "operator", "retrieval")


@dataclass(order=True)
class Item:
    sort: tuple[int, int, int]  # (log-append ms, 0 report / 1 request, offset)
    event: faust.EventT[Any] = field(compare=False)
    request: bool = field(compare=False)
    partition: int = field(compare=False)


def _wake(event: asyncio.Event, _: object) -> None:
    event.set()


class SessionSequencer:
    def __init__(
        self,
        requests_topic: str,
        process: Callable[[Any, int | None], Awaitable[None]],
        barrier: Callable[[int, int], Coroutine[Any, Any, int | None]],
        on_error: Callable[[BaseException], None],
    ):
        self.requests_topic = requests_topic  # the broker's name of crp.window.requests
        self.process = process  # (event, fabric lag ms or None) -> applied, produced and acked
        self.barrier = barrier  # (log-append ms, partition) -> None when met, else the lag in ms
        self.on_error = on_error
        self.queues: dict[bytes, list[Item]] = {}
        self.wake: dict[bytes, asyncio.Event] = {}
        self.tasks: dict[bytes, asyncio.Task[None]] = {}

    def offer(self, event: faust.EventT[Any]) -> None:
        m = event.message
        request = m.topic == self.requests_topic
        ts_ms = round((m.timestamp or 0.0) * 1000)  # faust gives seconds
        item = Item((ts_ms, int(request), int(m.offset)), event, request, int(m.partition))
        session = bytes(m.key or b"")
        bisect.insort(self.queues.setdefault(session, []), item)
        self.wake.setdefault(session, asyncio.Event()).set()
        if session not in self.tasks:
            task = asyncio.create_task(self._drain(session), name=f"crp-session-{session[:40]!r}")
            self.tasks[session] = task
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.on_error(task.exception())  # type: ignore[arg-type]

    def drop(self, topic: str, partition: int) -> None:
        """A revoked partition's queued records go to its next owner (they were not acknowledged)."""
        for q in self.queues.values():
            q[:] = [i for i in q if (i.event.message.topic, i.event.message.partition) != (topic, partition)]
        for wake in self.wake.values():
            wake.set()

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self.queues.values())

    async def _drain(self, session: bytes) -> None:
        q = self.queues[session]
        wait: asyncio.Task[int | None] | None = None
        waiting_for: Item | None = None
        try:
            while q:
                head = q[0]
                if not head.request:
                    q.pop(0)
                    await self.process(head.event, None)
                    continue
                wake = self.wake[session]
                if wait is None or waiting_for is not head:
                    if wait is not None:
                        wait.cancel()
                    wait = asyncio.create_task(self.barrier(head.sort[0], head.partition))
                    wait.add_done_callback(functools.partial(_wake, wake))  # woken by either: met, or queued
                    waiting_for = head
                if not wait.done():
                    wake.clear()
                    await wake.wait()
                if wait.done():
                    lag = wait.result()
                    wait, waiting_for = None, None
                    if head in q:  # not dropped by a revocation meanwhile
                        q.remove(head)
                        await self.process(head.event, lag)
                # else: a record was queued; if it sorts before the request it is applied first
        finally:
            if wait is not None:
                wait.cancel()
            if not q:
                self.queues.pop(session, None)
                self.wake.pop(session, None)
            self.tasks.pop(session, None)

    async def stop(self) -> None:
        tasks = list(self.tasks.values())
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t


class WorkerBarrier:
    """The Kafka worker's side of the barrier: sequencing, positions and low-watermark commits."""

    def __init__(self, worker: KafkaWorker):
        self.w = worker
        self.barrier: EventTimeBarrier | None = None
        self.sequencer: SessionSequencer | None = None
        self.batcher: RequestBatcher | None = None
        # received, not yet acknowledged to faust, by slot and offset: faust commits the run of acked
        # offsets from the lowest it was given, whatever lies below it, so acks go out in offset order
        self.unacked: dict[tuple[str, str, int], dict[int, Any]] = {}
        self.done: dict[tuple[str, str, int], set[int]] = {}
        self.inflight: dict[tuple[str, str, int], set[int]] = {}
        self.received: dict[tuple[str, str, int], int] = {}
        self.locks: dict[tuple[str, str, int], asyncio.Lock] = {}
        self._db_positions: dict[str, tuple[float, dict[tuple[str, int], int]]] = {}
        self._positions_lock = asyncio.Lock()  # one read at a time; the requests waiting meanwhile share it
        # On PostgreSQL the barrier's offset reads run on a thread of their own, off the fabric thread,
        # whose queue is the window requests' (started in ``start``); elsewhere on the fabric thread.
        self._reads: ThreadPoolExecutor | None = None

    def sequence(self, h: AnyHandler, event: faust.EventT[Any]) -> None:
        w = self.w
        m = event.message
        slot = (h.group, w.settings.base_topic(m.topic), m.partition)
        self.inflight.setdefault(slot, set()).add(m.offset)
        self.received[slot] = max(self.received.get(slot, -1), m.offset)
        self.unacked.setdefault(slot, {})[m.offset] = event
        if self.sequencer is None:
            if w.batch_max > 1:
                self.batcher = RequestBatcher(w, h, min(w.batch_max, REQUESTS_PER_BATCH))

            async def process(ev: Any, lag: int | None) -> None:
                if self.batcher is not None:  # with the other sessions' records released meanwhile
                    await self.batcher.submit(ev, lag)
                else:
                    await w.handle_message(h, ev.message, lag)
                self.ack(h.group, ev)

            self.sequencer = SessionSequencer(w.settings.topic(WINDOW_REQUESTS), process, self.wait, self.crash)
        self.sequencer.offer(event)

    def ack(self, group: str, event: faust.EventT[Any]) -> None:
        """Acknowledge ``event`` once applied, and only as part of the run of applied offsets from the
        lowest one received, so faust never commits past a record still waiting."""
        m = event.message
        slot = (group, self.w.settings.base_topic(m.topic), m.partition)
        pending = self.unacked.get(slot)
        if pending is None or m.offset not in pending:
            event.ack()
            return
        done = self.done.setdefault(slot, set())
        done.add(m.offset)
        while pending and min(pending) in done:
            low = min(pending)
            done.discard(low)
            pending.pop(low).ack()

    def crash(self, exc: BaseException) -> None:
        log.error("records applied off the log order failed: %s: %s", type(exc).__name__, exc)
        if self.w.app is not None:
            self.w.app._crash(exc)

    async def start(self) -> None:
        """Before the agents run (so no request finds it half started); only when the barrier is on."""
        w = self.w
        if w.settings.barrier_wait <= 0 or not {"retrieval", "operator", "arbiter"} & set(w.groups):
            return
        barrier = EventTimeBarrier(
            w.kafka, w.settings.topic, w.partitions, self.positions, w.settings.barrier_wait, w.projection is not None
        )
        await barrier.start()
        self.barrier = barrier
        if w.fabric.engine.dialect.name == "postgresql":
            self._reads = ThreadPoolExecutor(1, thread_name_prefix="crp-barrier")

    async def wait(self, ts_ms: int, partition: int | None, scope: str = "request") -> int | None:
        w = self.w
        if self.barrier is None:
            return None
        t0 = time.perf_counter()
        lag = await self.barrier.wait(ts_ms, partition, scope)
        w.metrics.barrier.observe(time.perf_counter() - t0)
        if lag is not None:
            w.metrics.barrier_timeouts.inc()
            log.warning(
                "%s stamped %d applied before the event-time barrier was met (lag %d ms)",
                {"request": "window request", "command": "operator command"}.get(scope, f"{FACTS} record"),
                ts_ms,
                lag,
            )
        return lag

    async def positions(self, group: str, base: str, parts: Sequence[int]) -> dict[int, int]:
        """Where ``group`` stands on ``base``: this worker's own position (outputs acknowledged) for the
        partitions it holds, else the offset committed in the fabric (another worker's)."""
        w = self.w
        if group == PROJECTION and w.projection is not None:  # this worker's own vector index
            return w.projection.position(parts)
        out = w.ledger.positions(group, base, parts)
        rest = [p for p in parts if p not in out]
        if rest:
            at, offsets = self._db_positions.get(group, (0.0, {}))
            if time.monotonic() - at > POSITIONS_TTL_S:
                async with self._positions_lock:  # a read that finished meanwhile serves this request too
                    at, offsets = self._db_positions.get(group, (0.0, {}))
                    if time.monotonic() - at > POSITIONS_TTL_S:
                        offsets = await self._read_positions(group)
            out.update({p: offsets.get((base, p), 0) for p in rest})
        return out

    async def _read_positions(self, group: str) -> dict[tuple[str, int], int]:
        """The fabric offsets of ``group`` (and, on PostgreSQL, of every barrier group in the same
        statement, on the barrier's own thread: a read never queues in front of a window request)."""
        w = self.w
        if self._reads is None:

            def read() -> dict[tuple[str, int], int]:
                with w.fabric.unit_of_work() as uow:
                    return dict(uow.repo.offsets(group))

            offsets: dict[tuple[str, int], int] = await w.executor.retry(read, f"barrier: offsets of {group}")
            self._db_positions[group] = (time.monotonic(), offsets)
            return offsets
        groups = sorted({*BARRIER_GROUPS, group})

        def read_all() -> dict[str, dict[tuple[str, int], int]]:
            with w.fabric.engine.connect() as conn:  # read only: rolled back on close
                return Repository(conn).offsets_of(groups)

        found: dict[str, dict[tuple[str, int], int]] = await w.executor.retry(
            read_all, "barrier: offsets", pool=self._reads
        )
        now = time.monotonic()
        for g, offsets in found.items():
            self._db_positions[g] = (now, offsets)
        return found[group]

    async def before(self, group: str, m: Any) -> None:
        """On their own agents (ingest keeps going): an operator command acts on what was recorded and
        arbitrated before it; the arbiter judges a fact once every input stamped before it is ingested."""
        scope = {"operator": "command", "arbiter": "arbiter"}.get(group)
        if scope is None or self.barrier is None or not m.timestamp:
            return
        if scope == "arbiter" and self.w.settings.base_topic(m.topic) != FACTS:
            return
        await self.wait(self.event_ms(m) if scope == "arbiter" else round(m.timestamp * 1000), None, scope)

    @staticmethod
    def event_ms(m: Any) -> int:
        """A crp.facts record's event time: the epoch of the fact it records (a status change's time)."""
        try:
            value = json.loads(m.value)
            at = value.get("epoch") or value.get("at")
            return int(datetime.fromisoformat(str(at).replace("Z", "+00:00")).timestamp() * 1000)
        except (ValueError, TypeError, AttributeError):
            return round(float(m.timestamp) * 1000)

    def commit_to(self, slot: tuple[str, str, int], offset: int, floor: int = 0) -> int:
        """The offset to commit once ``offset`` is applied: in log order the next one; with records
        applied out of order, the lowest one still waiting. ``floor``: the fabric's offset. A record
        below it, redelivered after a restart and still queued, was applied already (it will be
        skipped): it must not pull the fabric's offset back below records applied since (that left
        the crash test's worker with nothing to do while its fabric offset said otherwise)."""
        return self.commit_past(slot, [offset], floor)

    def commit_past(self, slot: tuple[str, str, int], offsets: Sequence[int], floor: int = 0) -> int:
        """``commit_to`` once all of ``offsets`` (a batch's records of one partition) are applied."""
        applied = set(offsets)
        inflight = self.inflight.get(slot)
        if inflight is None:
            return max(max(applied) + 1, floor)
        rest = [o for o in inflight if o not in applied and o >= floor]
        return max(min(rest) if rest else max(self.received.get(slot, -1), *applied) + 1, floor)

    def forget(self, topic: str, partition: int) -> None:
        base = self.w.settings.base_topic(topic)
        for slot in [s for s in {*self.inflight, *self.unacked} if s[1:] == (base, partition)]:
            self.inflight.pop(slot, None)
            self.received.pop(slot, None)
            self.unacked.pop(slot, None)
            self.done.pop(slot, None)
        if self.sequencer is not None:
            self.sequencer.drop(topic, partition)

    def lock(self, slot: tuple[str, str, int]) -> asyncio.Lock:
        return self.locks.setdefault(slot, asyncio.Lock())

    def applied(self, slot: tuple[str, str, int], offset: int) -> None:
        inflight = self.inflight.get(slot)
        if inflight is not None:
            inflight.discard(offset)

    async def stop(self) -> None:
        if self.sequencer is not None:
            await self.sequencer.stop()
        if self.batcher is not None:
            await self.batcher.stop()
        if self.barrier is not None:
            with contextlib.suppress(Exception):
                await self.barrier.stop()
        if self._reads is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._reads.shutdown)
            self._reads = None


__all__ = ["SessionSequencer", "WorkerBarrier"]
