"""Window requests and reports of many sessions, applied in one fabric transaction.

The session sequencer (``sessions.py``) releases a session's records one at a time, each once its
barrier is met. Released records of different sessions that meet here while the fabric thread is
busy form the next batch: one unit of work (the group's offsets read once, one outbox and offset row
per input partition, one commit), one hop to the fabric thread, and every output produced at once.
A lone request pays nothing extra: the first record of a batch is applied at once.

A batch holds at most one record per session (the sequencer waits for a record's outputs before it
releases the next), so the order within the batch is free: it is applied in offset order per
partition, which is what ``BatchAgent.apply_sync`` needs to tell applied records from new ones. The
offset committed for a partition is the lowest one still waiting outside the batch
(``WorkerBarrier.commit_past``). On a failure the batch is rolled back and its records go through
the one-record path, each with its own retries and dead letter, as ``BatchAgent`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import faust

from crp_stream.processors.base import AnyHandler
from crp_stream.runtime.kafka.batch import BatchAgent, Pending

if TYPE_CHECKING:
    from crp_stream.runtime.kafka.worker import KafkaWorker


class RequestBatcher(BatchAgent):
    """The retrieval group's batches: ``submit`` returns once the record's outputs are acknowledged."""

    def __init__(self, worker: KafkaWorker, handler: AnyHandler, batch_max: int):
        super().__init__(worker, handler, batch_max)
        self._queue: asyncio.Queue[tuple[faust.EventT[Any], int | None, asyncio.Future[None]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def submit(self, event: faust.EventT[Any], lag_ms: int | None) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((event, lag_ms, done))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._serve(), name="crp-retrieval-batch")
        await done

    async def _serve(self) -> None:
        while True:
            items = [await self._queue.get()]
            while len(items) < self.batch_max and not self._queue.empty():
                items.append(self._queue.get_nowait())
            try:
                await self.apply_released([(event, lag) for event, lag, _ in items])
            except BaseException as exc:
                for _e, _l, done in items:
                    if not done.done():
                        done.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for _e, _l, done in items:
                if not done.done():
                    done.set_result(None)

    async def apply_released(self, released: list[tuple[faust.EventT[Any], int | None]]) -> None:
        """Claim new partitions, skip what the fabric has, apply the rest as one batch."""
        w, h = self.w, self.h
        run: list[Pending] = []
        for event, lag in sorted(
            released, key=lambda x: (x[0].message.topic, x[0].message.partition, x[0].message.offset)
        ):
            m = event.message
            slot = await w.claimed(h, m)
            if m.offset < w.ledger.offset(slot):
                w.metrics.skipped.labels(group=h.group, topic=slot[1]).inc()
                w.rb.applied(slot, m.offset)
                continue
            if m.timestamp:
                w.metrics.waited.labels(group=h.group).observe(max(0.0, time.time() - m.timestamp))
            run.append(Pending(m, w.record(m, lag), 0, lag))
        commits = {
            tp: w.rb.commit_past((h.group, *tp), offsets, w.ledger.offset((h.group, *tp)))
            for tp, offsets in _offsets_by_slot(run).items()
        }
        await self.flush([p.committing(commits[(p.record.topic, p.record.partition)]) for p in run])

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task


def _offsets_by_slot(run: list[Pending]) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for p in run:
        out.setdefault((p.record.topic, p.record.partition), []).append(p.record.offset)
    return out


__all__ = ["RequestBatcher"]
