"""Each worker's embedded vector index as a projection of the facts, so that N Kafka workers with
qdrant-edge and one PostgreSQL all serve, without a Qdrant server (docs/vector-stores.md, "Several
workers, no server").

An ``edge:`` index is one process's. Where the fabric stores each fact's vector beside it
(``Fabric.stores_vectors``), every worker keeps its own index current:

- at start, the end offsets of ``crp.facts`` are read first, then every fact the database holds is
  loaded that the local index lacks (its stored vector) or holds with another status: a record below
  those offsets was produced after its transaction committed (the outbox), so the database has it;
- then it follows ``crp.facts`` from those offsets, every partition, with a group-less consumer (not a
  member of the workers' group: each worker sees every fact). For each fetched run it applies the
  committed state of the facts named: the vector of a fact it lacks, the current status of the rest.
  The database, not the record, gives the status, so a record applied late never undoes a newer one;
  a fact named there that the database no longer holds was forgotten: its point is deleted;
- the ingest worker that writes a fact upserts it itself first: the projection finds it and writes its
  status only (idempotent);
- its position on each partition (the next offset to apply) is what the event-time barrier waits on
  after the arbiter: a window request is answered once the local index holds every fact recorded up to
  the ``crp.facts`` end offsets the barrier read.

Writes go through the fabric thread (the index is not thread-safe) and are not journaled: they are the
committed state, which a rollback has no reason to put back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, TopicPartition

from crp_stream.events.topics import FACTS
from crp_stream.fabric.sql.records.vectors import FactPoint
from crp_stream.fabric.sql.repository import Repository
from crp_stream.fabric.vectors.port import VectorItem, scope
from crp_stream.runtime.kafka.barrier import PROJECTION
from crp_stream.runtime.vector_guard import GuardedVectors

if TYPE_CHECKING:
    from crp_stream.runtime.kafka.worker import KafkaWorker

log = logging.getLogger("crp_stream.kafka")

LOAD_CHUNK = 5_000  # vectors read and upserted at a time at start (about 7.5 MB at 384-d)
FETCH_MAX = 2_000


def projects(worker: KafkaWorker) -> bool:
    """A worker keeps a projection when the fabric stores vectors and it searches its index."""
    return worker.fabric.stores_vectors and bool({"ingest", "retrieval"} & set(worker.groups))


class VectorProjection:
    def __init__(self, worker: KafkaWorker):
        self.w = worker
        self.positions: dict[int, int] = {}  # partition of crp.facts -> next offset applied to the index
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        w = self.w
        consumer = AIOKafkaConsumer(**w.kafka, group_id=None, enable_auto_commit=False)
        await consumer.start()
        self._consumer = consumer
        tps = [TopicPartition(w.settings.topic(FACTS), p) for p in range(w.partitions.get(FACTS, 0))]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)  # before the database is read: it holds all below them
        loaded = await w.executor.retry(self.load, "vector projection: loading the facts")
        for tp in tps:
            consumer.seek(tp, ends[tp])
            self.positions[tp.partition] = ends[tp]
        log.info("vector projection: %d facts loaded into the local index; following %s", loaded, tps[0].topic)
        self._task = asyncio.create_task(self._follow(), name="crp-vector-projection")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                await self._consumer.stop()

    def position(self, parts: Sequence[int]) -> dict[int, int]:
        return {p: self.positions.get(p, 0) for p in parts}

    async def _follow(self) -> None:
        assert self._consumer is not None
        w = self.w
        while True:
            try:
                got = await self._consumer.getmany(timeout_ms=200, max_records=FETCH_MAX)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker away: aiokafka reconnects, the barrier times out meanwhile
                log.warning("vector projection: fetch failed: %s: %s", type(exc).__name__, exc)
                await asyncio.sleep(0.5)
                continue
            ids = sorted({bytes(r.key).decode("utf-8", "replace") for rs in got.values() for r in rs if r.key})
            try:
                if ids:
                    apply = functools.partial(w.executor.thread.run, PROJECTION, self.apply, ids)
                    await w.executor.retry(apply, "vector projection")
            except Exception as exc:
                w.rb.crash(exc)
                return
            for tp, rs in got.items():
                if rs:
                    self.positions[tp.partition] = max(self.positions.get(tp.partition, 0), rs[-1].offset + 1)

    # on the fabric thread -------------------------------------------------------------------------
    def load(self) -> int:
        """Every committed fact into the local index: the missing ones, and statuses that differ."""
        with self.w.fabric.engine.connect() as conn:  # read only: rolled back on close
            points = Repository(conn).fact_points()
        held = {fid: status for fid, status, _e in self._vectors().inner._scan_meta()} if points else {}
        missing = [p for p in points if p[0] not in held]
        loaded = sum(self._upsert(missing[start : start + LOAD_CHUNK]) for start in range(0, len(missing), LOAD_CHUNK))
        self._restatus([p for p in points if p[0] in held and held[p[0]] != p[1]])
        self._vectors().flush()
        return loaded

    def apply(self, fact_ids: Sequence[str]) -> None:
        """The committed state of ``fact_ids`` into the local index (facts not committed are left out)."""
        with self.w.fabric.engine.connect() as conn:
            points = Repository(conn).fact_points(fact_ids)
        held = self._vectors().get_vectors([p[0] for p in points])
        self._upsert([p for p in points if p[0] not in held])
        self._restatus([p for p in points if p[0] in held])
        # named on crp.facts (after their commit) but gone from the database: forgotten. The point
        # goes from this worker's index too (a vector is no text, but a forgotten fact leaves no trace)
        committed = {p[0] for p in points}
        gone = list(self._vectors().get_vectors([f for f in fact_ids if f not in committed]))
        if gone:
            self._vectors().delete(gone)

    def _vectors(self) -> GuardedVectors:
        vectors = self.w.fabric.vectors
        assert isinstance(vectors, GuardedVectors)
        return vectors

    def _upsert(self, points: Sequence[FactPoint]) -> int:
        """The points with their stored vectors; how many had one."""
        if not points:
            return 0
        with self.w.fabric.engine.connect() as conn:
            stored = Repository(conn).fact_vectors([p[0] for p in points])
        lacking = [p[0] for p in points if p[0] not in stored]
        if lacking:  # written before the fabric stored vectors (or by a tool that does not)
            log.warning(
                "vector projection: %d facts have no stored vector and are not searchable here (e.g. %s)",
                len(lacking),
                lacking[0],
            )
        items = [
            VectorItem(fid, stored[fid], status, expires_at, source, scope(tenant))
            for fid, status, expires_at, source, tenant in points
            if fid in stored
        ]
        self._vectors().upsert_committed(items)
        return len(items)

    def _restatus(self, points: Sequence[FactPoint]) -> None:
        by_status: dict[str, list[str]] = {}
        for fid, status, *_ in points:
            by_status.setdefault(status, []).append(fid)
        for status, ids in sorted(by_status.items()):
            self._vectors().set_status_committed(ids, status)


__all__ = ["VectorProjection", "projects"]
