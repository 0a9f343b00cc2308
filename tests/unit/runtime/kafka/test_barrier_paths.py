"""The event-time barrier's two paths: the shared end-offsets check when everything is applied, and the
exact per-request targets otherwise (runtime/kafka/barrier.py), against a stand-in broker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import TopicPartition

from crp_stream.runtime.kafka.barrier import EventTimeBarrier

PARTS = {"crp.documents": 2, "crp.telemetry": 2, "crp.operator.commands": 1, "crp.facts": 2, "crp.window.reports": 2}


@dataclass
class Stamped:
    offset: int


class Broker:
    """Per partition, the append stamps (ms) of its records; counts the offset requests."""

    def __init__(self) -> None:
        self.log: dict[TopicPartition, list[int]] = {}
        self.ends_asked = 0
        self.times_asked = 0

    def append(self, base: str, partition: int, ts_ms: int) -> None:
        self.log.setdefault(TopicPartition(base, partition), []).append(ts_ms)

    async def end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        self.ends_asked += 1
        await asyncio.sleep(0)
        return {tp: len(self.log.get(tp, [])) for tp in tps}

    async def offsets_for_times(self, asked: dict[TopicPartition, int]) -> dict[TopicPartition, Stamped | None]:
        self.times_asked += 1
        await asyncio.sleep(0)
        out: dict[TopicPartition, Stamped | None] = {}
        for tp, ts in asked.items():
            later = [i for i, t in enumerate(self.log.get(tp, [])) if t >= ts]
            out[tp] = Stamped(later[0]) if later else None
        return out


def _barrier(broker: Broker, positions: dict[tuple[str, str], dict[int, int]], wait_s: float = 0.3) -> EventTimeBarrier:
    async def read(group: str, base: str, parts: Sequence[int]) -> dict[int, int]:
        have = positions.get((group, base), {})
        return {p: have.get(p, 0) for p in parts}

    b = EventTimeBarrier({"bootstrap_servers": "unused"}, lambda t: t, PARTS, read, wait_s)
    b._consumer = broker
    return b


def test_requests_while_everything_is_applied_share_one_end_offsets_request() -> None:
    broker = Broker()
    broker.append("crp.documents", 0, 100)
    broker.append("crp.facts", 1, 101)
    positions = {("ingest", "crp.documents"): {0: 1}, ("arbiter", "crp.facts"): {1: 1}}
    b = _barrier(broker, positions)

    async def main() -> list[int | None]:
        return list(await asyncio.gather(*(b.wait(200 + i, i % 2) for i in range(5))))

    assert asyncio.run(main()) == [None] * 5
    assert broker.times_asked == 0  # no exact targets needed
    assert broker.ends_asked <= 2  # the first check, then at most one for the requests that came meanwhile


def test_a_record_not_applied_sends_the_request_down_the_exact_path() -> None:
    broker = Broker()
    broker.append("crp.documents", 0, 100)
    broker.append("crp.documents", 0, 300)  # stamped after the request: not waited for
    positions = {("ingest", "crp.documents"): {0: 1}}  # the later record is not applied
    b = _barrier(broker, positions)
    assert asyncio.run(b.wait(200, 0)) is None  # met on the exact targets, not on the end offsets
    assert broker.times_asked == 1


def test_an_input_stamped_before_the_request_and_not_applied_still_holds_it() -> None:
    broker = Broker()
    broker.append("crp.telemetry", 1, 150)
    b = _barrier(broker, {}, wait_s=0.05)
    lag = asyncio.run(b.wait(200, 0))
    assert lag is not None  # served with the lag once the wait ran out
    assert broker.times_asked == 1


def test_the_check_waits_for_the_arbiter_on_facts_too() -> None:
    broker = Broker()
    broker.append("crp.documents", 0, 100)
    broker.append("crp.facts", 0, 101)  # caused by the document; the arbiter has not applied it
    b = _barrier(broker, {("ingest", "crp.documents"): {0: 1}}, wait_s=0.05)
    assert asyncio.run(b.wait(200, 0)) is not None
    assert broker.times_asked == 1  # the shared check failed, the exact path then timed out


def test_a_partition_that_filled_since_the_last_check_is_waited_for() -> None:
    broker = Broker()
    positions: dict[tuple[str, str], dict[int, int]] = {}
    b = _barrier(broker, positions, wait_s=0.05)
    assert asyncio.run(b.wait(100, 0)) is None  # everything empty
    broker.append("crp.documents", 1, 150)  # not applied
    assert asyncio.run(b.wait(200, 0)) is not None
    positions[("ingest", "crp.documents")] = {1: 1}
    assert asyncio.run(b.wait(300, 0)) is None
