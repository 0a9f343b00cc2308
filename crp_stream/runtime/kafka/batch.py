"""The Kafka worker's batched path: what faust delivered in a burst, applied in one fabric transaction.

Per record, the one-record path (``KafkaWorker.handle_message``) pays a transaction of its own: the fabric's
offsets read, the outbox row, the offset row and the commit, each a PostgreSQL round trip, then a
produce awaited before the next record. Here an agent of a batched group (ingest, arbiter) takes the
records faust has already fetched, up to ``batch_max``, and applies them in one unit of work: one
offsets read for the group, ``apply_record`` per record in delivery order (so per-partition order), one
routing of all outputs, per input partition one offset row and one outbox row, one commit; then every
output is produced and awaited at once, and only then are the records acknowledged to faust.

Nothing waits to fill a batch: the first record is applied at once, and what arrived meanwhile forms
the next batch, so batches grow with the backlog and a lone record pays no extra latency.

What stays as on the one-record path (docs/kafka.md):

- The outbox of an input partition holds the outputs of its records of the last batch until the
  broker acknowledged them; a crash in between loses nothing (the next owner produces it again).
- Records the fabric already committed are skipped (offset check, then ``processed_events``).
- Vector writes are journaled; a rolled-back batch's points are put back (``FabricExecutor.rolled_back``).
- The arbiter's event-time barrier is waited for each record, in order, before the batch is applied
  (it waits on ingest's progress, never on the arbiter's own, so waiting ahead cannot deadlock).
- Faust's Kafka offsets trail the fabric's: a record is acknowledged only after its outputs were.

On any failure of a batch (transient or not) it is rolled back and its records go through the
one-record path, one transaction each, with that path's retries: a record that keeps failing is
dead-lettered exactly as before, and the others' effects land.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from crp_stream.processors.base import AnyHandler, Output, Record
from crp_stream.processors.dispatch import apply_each
from crp_stream.runtime.kafka.delivery import Routed, outbox_key, route

if TYPE_CHECKING:
    from crp_stream.runtime.kafka.worker import KafkaWorker

log = logging.getLogger("crp_stream.kafka")

# Arbiter and ingest carry the volume (a crp.facts record per fact). Retrieval batches here only
# without the event-time barrier (else its session sequencer releases batches, request_batch.py): a
# partition's run is applied in order, the handler ending a batch before a session's second record.
# The operator keeps its per-command barrier.
BATCHED_GROUPS = ("ingest", "arbiter", "retrieval")
# records per batch unless the worker says otherwise (``kafka_batch_max``)
BATCH_MAX = 256

TP = tuple[str, int]  # (contract topic, partition)


@dataclass(frozen=True)
class Pending:
    message: Any  # the faust message (the one-record path takes it on a fallback)
    record: Record
    commit_to: int  # the fabric offset to commit once the record is applied
    lag_ms: int | None = None  # a window request's fabric lag at the barrier (None: met)

    def committing(self, commit_to: int) -> Pending:
        return replace(self, commit_to=commit_to)


@dataclass
class Applied:
    outputs: list[list[Output] | None]  # per pending record; None: the fabric had it already
    routed: list[Routed]  # every output of the batch, in emission order
    slots: list[TP]  # the input partitions whose offset (and outbox) the batch committed
    commits: dict[TP, int]


class BatchAgent:
    """One batched handler group of a worker: buffers the stream, applies it batch by batch."""

    def __init__(self, worker: KafkaWorker, handler: AnyHandler, batch_max: int = BATCH_MAX, linger_s: float = 0.0):
        self.w = worker
        self.h = handler
        self.batch_max = max(1, batch_max)
        self.linger_s = max(0.0, linger_s)

    async def run(self, stream: Any) -> None:
        """Faust acks nothing itself (``noack``): a record is acked after its batch's outputs are."""
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=self.batch_max)  # bounded: faust's fetch waits
        drain = asyncio.create_task(self._drain(queue), name=f"crp-batch-{self.h.group}")
        drain.add_done_callback(self._done)
        try:
            async for event in stream.noack().events():
                await queue.put(event)
        finally:
            drain.cancel()
            with contextlib.suppress(BaseException):
                await drain

    def _done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.w.rb.crash(task.exception())  # type: ignore[arg-type]

    async def _drain(self, queue: asyncio.Queue[Any]) -> None:
        while True:
            events = [await queue.get()]
            if self.linger_s:  # a fuller batch for a bounded wait (``batch_linger_ms``)
                deadline = time.monotonic() + self.linger_s
                while len(events) < self.batch_max and (left := deadline - time.monotonic()) > 0:
                    try:
                        events.append(await asyncio.wait_for(queue.get(), left))
                    except TimeoutError:
                        break
            while len(events) < self.batch_max and not queue.empty():
                events.append(queue.get_nowait())
            for event in await self.process(events):  # in delivery order, i.e. offset order per partition
                event.ack()

    async def process(self, events: Sequence[Any]) -> list[Any]:
        """Claim new partitions, skip what was applied, apply the rest in one batch (two if a partition
        of the run is claimed again in the middle: the run so far first). Returns the events to ack."""
        w, h = self.w, self.h
        run: list[Pending] = []
        keep = []
        for event in events:
            m = event.message
            if w.app is not None and m.generation_id != w.app.consumer_generation_id:
                # fetched before a rebalance, as faust's own streams skip them: not applied, not acked;
                # the partition's owner (maybe this worker again) reads it from the committed offset
                continue
            keep.append(event)
            await w.rb.before(h.group, m)
            slot = (h.group, w.settings.base_topic(m.topic), m.partition)
            if w.ledger.unclaimed(slot, m.generation_id):
                if any((p.record.topic, p.record.partition) == slot[1:] for p in run):
                    await self.flush(run)  # it came back in another generation: reload after the run
                    run = []
                await w.claim_partition(h, slot[1], m.partition, m.generation_id)
            if m.offset < w.ledger.offset(slot):
                w.metrics.skipped.labels(group=h.group, topic=slot[1]).inc()
                continue
            if m.timestamp:
                w.metrics.waited.labels(group=h.group).observe(max(0.0, time.time() - m.timestamp))
            run.append(Pending(m, w.record(m), w.rb.commit_to(slot, m.offset, w.ledger.offset(slot))))
        await self.flush(run)
        return keep

    async def flush(self, run: list[Pending]) -> None:
        if not run:
            return
        w, h = self.w, self.h
        t0 = time.perf_counter()
        try:
            done = await w.executor.call(h.group, self.apply_sync, run)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # rolled back and reconciled: isolate the records
            w.metrics.errors.labels(group=h.group, kind="batch").inc()
            log.warning(
                "%s: a batch of %d records failed (%s: %s); applying them one by one",
                h.group,
                len(run),
                type(exc).__name__,
                (str(exc).splitlines() or [""])[0][:200],
            )
            for p in run:
                await w.handle_message(h, p.message, p.lag_ms)
            return
        w.last_error = None
        elapsed = time.perf_counter() - t0
        if w.after_commit is not None and any(o is not None for o in done.outputs):
            w.after_commit(done.routed)
        t1 = time.perf_counter()
        await w.produce(done.routed)
        if done.routed:
            w.metrics.produced.observe(time.perf_counter() - t1)
        w.outboxes.acked(outbox_key(h.group, topic, partition) for topic, partition in done.slots)
        for (topic, partition), to in done.commits.items():  # a slot revoked meanwhile is claimed again
            w.ledger.advance((h.group, topic, partition), to)
        applied = sum(o is not None for o in done.outputs) or 1
        for p, outs in zip(run, done.outputs, strict=True):
            w.rb.applied((h.group, p.record.topic, p.record.partition), p.record.offset)
            if outs is None:
                w.metrics.skipped.labels(group=h.group, topic=p.record.topic).inc()
                continue
            w.metrics.observe(h.group, p.record.topic, elapsed / applied)  # the record's share
            w.metrics.record_outputs(p.record.topic, outs)

    def apply_sync(self, run: Sequence[Pending]) -> Applied:
        """On the fabric thread: the whole run in one unit of work (see the module docstring)."""
        w, h = self.w, self.h
        w.executor.before_apply()
        outputs: list[list[Output] | None] = []
        commits: dict[TP, int] = {}
        by_slot: dict[TP, list[Routed]] = {}
        try:
            with w.fabric.unit_of_work() as uow:
                offsets = uow.repo.batch_start(h.group, h.meta_keys)  # with the handler's meta reads
                fresh: list[Pending] = []
                for p in run:
                    tp = (p.record.topic, p.record.partition)
                    # below the fabric's offset, or a second copy within the run: applied already
                    if p.record.offset < offsets.get(tp, 0):
                        continue
                    fresh.append(p)
                    offsets[tp] = p.record.offset + 1
                    commits[tp] = max(commits.get(tp, 0), p.commit_to)
                # per record exactly what the one-record path gives (ids read ahead, handler.prepare)
                each = iter(apply_each(h, [p.record for p in fresh], uow))
                kept = {id(p) for p in fresh}
                tagged: list[tuple[TP, Output]] = []
                for p in run:
                    if id(p) not in kept:
                        outputs.append(None)
                        continue
                    outs = next(each)
                    outputs.append(outs)
                    tagged.extend(((p.record.topic, p.record.partition), o) for o in outs)
                routed = route([o for _, o in tagged], uow, w.settings, w.partitions)
                for (tp, _), r in zip(tagged, routed, strict=True):
                    by_slot.setdefault(tp, []).append(r)
                for tp, to in commits.items():
                    w.outboxes.save(uow, outbox_key(h.group, *tp), by_slot.get(tp, []), (h.group, *tp, to))
        except BaseException:
            w.executor.rolled_back()
            raise
        w.executor.committed()
        w.outboxes.committed({outbox_key(h.group, *tp): bool(by_slot.get(tp)) for tp in commits})
        return Applied(outputs, routed, sorted(commits), commits)


__all__ = ["BATCHED_GROUPS", "BATCH_MAX", "Applied", "BatchAgent", "Pending"]
