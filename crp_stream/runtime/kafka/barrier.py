"""The event-time barrier of the Kafka worker: a window request is answered once the fabric reflects
every input appended at or before the request's log-append time (docs/kafka.md, "Event-time barrier").

Kafka orders records per partition only, and ingest is slower than a request, so without a barrier a
request overtakes the documents and telemetry published just before it. Like Kafka Streams'
``max.task.idle.ms`` (a task waits, bounded, for its other input partitions before it processes a
record with a later timestamp), the retrieval worker holds a request until, for every partition of
``crp.documents``, ``crp.telemetry`` and ``crp.operator.commands``, the owning group has committed (and,
for this worker's own partitions, produced the outputs of) every record with a timestamp <= the
request's; then until the arbiter has applied every ``crp.facts`` record those caused (what was on
``crp.facts`` at that moment, twice, so the arbiter's own status changes fed back are included); and
until the reports of the session's partition appended before it were applied. The per-partition
target is ``offsets_for_times(ts + 1)`` (the first offset stamped later; the end offset if none):
LogAppendTime has millisecond resolution, so records stamped in the same millisecond as the request
are treated as before it. The wait is bounded (``barrier_wait``); on timeout the envelope is served
anyway with ``CRP-Context-Fabric-Lag`` and the ``crp_barrier_timeouts`` metric.

The barrier only reads offsets: it holds no lock, and ingest runs while a request waits.

Fast path (``_settled``): when nothing is in flight, one end-offsets request answers for every request
received so far (positions read first; if each has reached its partition's end offset, it has reached
every earlier target too), so a steady stream of requests costs one broker request per check, shared,
instead of four per request. Otherwise the exact path above runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition

from crp_stream.events.topics import DOCUMENTS, FACTS, OPERATOR_COMMANDS, TELEMETRY, WINDOW_REPORTS

log = logging.getLogger("crp_stream.kafka")

INGEST_TOPICS = {DOCUMENTS: "ingest", TELEMETRY: "ingest", OPERATOR_COMMANDS: "operator"}
ARBITER_INPUT = (FACTS, "arbiter")
PROJECTION = "vectors"  # the worker's own vector index on crp.facts (projection.py)
RETRIEVAL_INPUT = (WINDOW_REPORTS, "retrieval")
POLL_S = 0.01
T = TypeVar("T")

# (group, contract topic, partitions) -> {partition: the group's position (next offset to apply)}
Positions = Callable[[str, str, Sequence[int]], Awaitable[Mapping[int, int]]]


def caught_up(positions: Mapping[int, int], targets: Mapping[int, int]) -> bool:
    """Every partition's position has reached its target offset (a partition never seen is at 0)."""
    return all(positions.get(p, 0) >= t for p, t in targets.items())


class EventTimeBarrier:
    """Offsets and timestamps of the input partitions, read with a group-less consumer."""

    def __init__(
        self,
        client: Mapping[str, Any],
        topic: Callable[[str], str],
        partitions: Mapping[str, int],
        positions: Positions,
        wait_s: float,
        projected: bool = False,
    ):
        self.client = client  # aiokafka's connection arguments (security.py)
        self.topic = topic  # contract name -> the broker's topic name
        self.partitions = partitions
        self.positions = positions
        self.wait_s = wait_s
        self.projected = projected  # this worker's index follows crp.facts (projection.py): wait for it too
        self._consumer: AIOKafkaConsumer | None = None
        self._met: dict[str, int] = {}  # per scope: the latest stamp whose barrier was met
        self._asked: dict[str, int] = {}  # per scope: the latest stamp asked about (its record was received)
        self._checks: dict[str, asyncio.Lock] = {}  # per scope: one fast check at a time, the others share it
        self._last_ends: dict[TopicPartition, int] = {}  # the end offsets the last checks read

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(**self.client, group_id=None, enable_auto_commit=False)
        await consumer.start()
        # assigned (so their metadata is kept) and paused (nothing is fetched): only offsets are read
        tps = [tp for base in (*INGEST_TOPICS, ARBITER_INPUT[0], RETRIEVAL_INPUT[0]) for tp in self._tps(base)]
        consumer.assign(tps)
        consumer.pause(*tps)
        self._consumer = consumer

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    def _tps(self, base: str, only: Iterable[int] | None = None) -> list[TopicPartition]:
        parts = range(self.partitions.get(base, 0)) if only is None else only
        return [TopicPartition(self.topic(base), p) for p in parts]

    async def _targets_at(self, tps: list[TopicPartition], ts_ms: int, deadline: float) -> dict[TopicPartition, int]:
        """Per partition: the first offset stamped after ``ts_ms`` (or the end offset: none is). The
        partitions of every topic in two requests to the broker, not two per topic (each is a round
        trip from the event loop, and ListOffsets work for the broker on the same cores)."""
        assert self._consumer is not None
        if not tps:
            return {}
        found = await _bounded(self._consumer.offsets_for_times({tp: ts_ms + 1 for tp in tps}), deadline)
        missing = [tp for tp in tps if found.get(tp) is None]
        ends = await _bounded(self._consumer.end_offsets(missing), deadline) if missing else {}
        return {tp: (found[tp].offset if found.get(tp) is not None else ends[tp]) for tp in tps}

    async def _ends(self, tps: list[TopicPartition], deadline: float) -> dict[int, int]:
        assert self._consumer is not None
        ends = await _bounded(self._consumer.end_offsets(tps), deadline) if tps else {}
        return {tp.partition: ends[tp] for tp in tps}

    async def _until(self, group: str, base: str, targets: Mapping[int, int], deadline: float) -> bool:
        parts = sorted(p for p, t in targets.items() if t > 0)
        while True:
            if caught_up(await self.positions(group, base, parts), targets):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL_S)

    async def wait(self, ts_ms: int, partition: int | None, scope: str = "request") -> int | None:
        """Wait until the fabric reflects every input stamped <= ``ts_ms``; None when it does, else the
        lag in ms (from the request's log-append time to now) once ``wait_s`` ran out.

        ``partition``: the request's partition, whose ``crp.window.reports`` partition holds its session's
        reports (same key, same partition count). ``scope``: ``request`` (everything above), ``command``
        (an operator command: documents, telemetry and their arbitration) or ``arbiter`` (a crp.facts
        record: documents and telemetry ingested, so a claim is judged on every record stamped before)."""
        if ts_ms <= self._met.get(scope, -1):  # watermarks only move forward
            return None
        self._asked[scope] = max(self._asked.get(scope, -1), ts_ms)
        deadline = time.monotonic() + self.wait_s
        try:
            ok = await self._settled(ts_ms, deadline, scope) or await self._wait(ts_ms, partition, deadline, scope)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            ok = False
        except Exception as exc:  # offsets unavailable (broker away): serve, and say so
            log.warning("event-time barrier: %s: %s; serving without it", type(exc).__name__, exc)
            ok = False
        if ok:
            self._met[scope] = max(self._met.get(scope, -1), ts_ms)
            return None
        return max(0, round(time.time() * 1000) - ts_ms)

    def _scope(self, scope: str) -> list[tuple[str, str, list[TopicPartition]]]:
        """(group, contract topic, partitions) a scope waits on, in the exact path's order."""
        waits = [
            (g, base, self._tps(base)) for base, g in INGEST_TOPICS.items() if scope == "request" or g != "operator"
        ]
        if scope == "request":
            waits.append((RETRIEVAL_INPUT[1], RETRIEVAL_INPUT[0], self._tps(RETRIEVAL_INPUT[0])))
        if scope != "arbiter":
            waits.append((ARBITER_INPUT[1], ARBITER_INPUT[0], self._tps(ARBITER_INPUT[0])))
        if scope == "request" and self.projected:
            waits.append((PROJECTION, ARBITER_INPUT[0], self._tps(ARBITER_INPUT[0])))
        return waits

    async def _settled(self, ts_ms: int, deadline: float, scope: str) -> bool:
        """True when every partition the scope waits on (every reports partition, not only the
        request's) is applied up to its end offset: then so is everything stamped at or before any
        stamp asked so far, since those records were received, so appended, before the end offsets were
        read; the targets of a stamp only grow with it. Positions are read before the end offsets, so
        what ingest and the arbiter caused on ``crp.facts`` before them is below those end offsets.
        One check per scope at a time; the requests that arrive meanwhile share the next one."""
        assert self._consumer is not None
        lock = self._checks.setdefault(scope, asyncio.Lock())
        await _bounded(lock.acquire(), deadline)  # a check stuck on an absent broker holds no one past theirs
        try:
            if ts_ms <= self._met.get(scope, -1):  # a check that ended meanwhile covered this stamp
                return True
            bound = self._asked[scope]  # received before the reads below
            waits = self._scope(scope)
            # partitions empty at the last check are not read (nothing to apply); should one have
            # filled since, the check fails below and the exact path runs
            positions = [
                await self.positions(g, base, [tp.partition for tp in tps if self._last_ends.get(tp, 1) > 0])
                for g, base, tps in waits
            ]
            tps = [tp for _, _, group_tps in waits for tp in group_tps]
            ends = await _bounded(self._consumer.end_offsets(tps), deadline) if tps else {}
            self._last_ends.update(ends)
            for pos, (_, _, group_tps) in zip(positions, waits, strict=True):
                if not caught_up(pos, {tp.partition: ends[tp] for tp in group_tps}):
                    return False
            self._met[scope] = max(self._met.get(scope, -1), bound)
            return True
        finally:
            lock.release()

    async def _wait(self, ts_ms: int, partition: int | None, deadline: float, scope: str) -> bool:
        # every target is read once the request is in (its stamp already passed), then waited for in turn
        waits = [
            (g, base, self._tps(base)) for base, g in INGEST_TOPICS.items() if scope == "request" or g != "operator"
        ]
        if partition is not None:
            waits.append((RETRIEVAL_INPUT[1], RETRIEVAL_INPUT[0], self._tps(RETRIEVAL_INPUT[0], [partition])))
        targets = await self._targets_at([tp for _, _, tps in waits for tp in tps], ts_ms, deadline)
        for group, base, tps in waits:
            if not await self._until(group, base, {tp.partition: targets[tp] for tp in tps}, deadline):
                return False
        if scope == "arbiter":
            return True
        # what those inputs caused on crp.facts, then what the arbiter's own changes caused
        for _ in range(2):
            ends = await self._ends(self._tps(ARBITER_INPUT[0]), deadline)
            if not await self._until(ARBITER_INPUT[1], ARBITER_INPUT[0], ends, deadline):
                return False
        # then this worker's own index holds every fact those records name (the last ends read)
        return scope != "request" or not self.projected or await self._until(PROJECTION, FACTS, ends, deadline)


async def _bounded(aw: Awaitable[T], deadline: float) -> T:
    """An offsets query never outlasts the request's wait (a broker away blocks them for 40 s)."""
    return await asyncio.wait_for(aw, max(0.05, deadline - time.monotonic()))


__all__ = ["PROJECTION", "EventTimeBarrier", "caught_up"]
