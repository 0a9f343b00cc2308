"""The arbiter applies ``crp.facts`` in event-time order (docs/kafka.md, "Event-time barrier").

Ingest runs ahead across its input partitions in fetch order, so ``crp.facts`` holds the facts of a
document stamped later before those of telemetry stamped earlier, and a verdict could weigh a record
the embedded log would only show it later. As Kafka Streams does for a task with several input
partitions (``max.task.idle.ms``: always the record with the lowest timestamp, waiting a bounded time
for partitions that may still bring a lower one), the arbiter's agent buffers what it receives and
applies the record with the lowest event time (a fact's epoch, a status change's time) once it is
sure no lower one can still come: every input stamped up to that time is ingested (so its facts are
on ``crp.facts``) and the agent has received ``crp.facts`` up to the end offsets read after that.
The wait is bounded by ``barrier_wait``; past it the record is applied anyway (logged, counted).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from typing import TYPE_CHECKING, Any

from crp_stream.processors.base import AnyHandler

if TYPE_CHECKING:
    from crp_stream.runtime.kafka.sessions import WorkerBarrier

log = logging.getLogger("crp_stream.kafka")
FACTS = "crp.facts"


class OrderedFacts:
    def __init__(self, rb: WorkerBarrier, h: AnyHandler):
        self.rb = rb
        self.h = h
        self.heap: list[tuple[int, int, int, Any]] = []  # (event ms, partition, offset, event)
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.ready_ms = -1  # every record with an event time up to this has been received

    def offer(self, event: Any) -> None:
        m = event.message
        heapq.heappush(self.heap, (self.rb.event_ms(m), int(m.partition), int(m.offset), event))
        self.wake.set()
        if self.task is None:
            self.task = asyncio.create_task(self._drain(), name="crp-arbiter-order")
            self.task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.rb.crash(task.exception())  # type: ignore[arg-type]

    def drop(self, topic: str, partition: int) -> None:
        self.heap = [i for i in self.heap if (i[3].message.topic, i[1]) != (topic, partition)]
        heapq.heapify(self.heap)

    async def _drain(self) -> None:
        while True:
            if not self.heap:
                self.wake.clear()
                await self.wake.wait()
                continue
            await self._ready(self.heap[0][0])
            if not self.heap:  # dropped by a revocation meanwhile
                continue
            _t, _p, _o, event = heapq.heappop(self.heap)  # the lowest now: it may have arrived meanwhile
            await self.rb.w.handle_message(self.h, event.message)
            event.ack()

    async def _ready(self, t: int) -> None:
        if t <= self.ready_ms or self.rb.barrier is None:
            return
        deadline = time.monotonic() + self.rb.w.settings.barrier_wait
        if await self.rb.wait(t, None, "arbiter") is not None:
            return  # timed out (counted): apply what we have
        try:
            ends = await self.rb.barrier.facts_ends(deadline)
        except (TimeoutError, OSError) as exc:
            log.warning("arbiter order: crp.facts end offsets unavailable (%s): applying", type(exc).__name__)
            return
        while True:
            behind = [p for p, end in ends.items() if end > 0 and self._received(p) < end]
            # a partition with nothing new since a restart: its position is the fabric's offset
            applied = await self.rb.positions(self.h.group, FACTS, behind) if behind else {}
            if all(applied.get(p, 0) >= ends[p] for p in behind):
                break
            if time.monotonic() >= deadline:
                self.rb.w.metrics.barrier_timeouts.inc()
                log.warning("arbiter order: crp.facts not received up to its end offsets in time: applying")
                return
            await asyncio.sleep(0.005)
        self.ready_ms = t

    def _received(self, partition: int) -> int:
        """The next offset of ``partition`` this agent has not received yet (as far as it knows)."""
        return self.rb.received.get((self.h.group, FACTS, partition), -1) + 1


__all__ = ["OrderedFacts"]
