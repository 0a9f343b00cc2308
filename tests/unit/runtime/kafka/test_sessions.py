"""The retrieval group's per-session order and the event-time barrier's bookkeeping."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from crp_stream.runtime.kafka.barrier import caught_up
from crp_stream.runtime.kafka.sessions import SessionSequencer

REQ, REP = "p.window.requests", "p.window.reports"


@dataclass
class Msg:
    topic: str
    key: bytes
    offset: int
    timestamp: float  # seconds, as faust gives it
    partition: int = 0


@dataclass
class Ev:
    message: Msg


def test_caught_up_needs_every_partition_at_its_target() -> None:
    assert caught_up({0: 5, 1: 3}, {0: 5, 1: 3})
    assert not caught_up({0: 5, 1: 2}, {0: 5, 1: 3})
    assert caught_up({}, {0: 0})  # a partition never seen is at 0
    assert not caught_up({}, {0: 1})


def _run(script: Any) -> list[tuple[str, int, int | None]]:
    applied: list[tuple[str, int, int | None]] = []
    gates: dict[int, asyncio.Event] = {}

    async def main() -> None:
        async def process(ev: Ev, lag: int | None) -> None:
            applied.append((ev.message.key.decode(), ev.message.offset, lag))

        async def barrier(ts_ms: int, partition: int | None) -> int | None:
            gate = gates.setdefault(ts_ms, asyncio.Event())
            await gate.wait()
            return None

        errors: list[BaseException] = []
        seq = SessionSequencer(REQ, process, barrier, errors.append)
        await script(seq, gates)
        await seq.stop()
        assert errors == []

    asyncio.run(main())
    return applied


def test_a_waiting_request_holds_back_only_its_own_session_and_earlier_reports_pass() -> None:
    async def script(seq: SessionSequencer, gates: dict[int, asyncio.Event]) -> None:
        seq.offer(Ev(Msg(REQ, b"a", 10, 1.000)))  # session a, window request stamped 1000 ms: waits
        seq.offer(Ev(Msg(REQ, b"b", 11, 1.001)))  # session b: its own barrier
        seq.offer(Ev(Msg(REP, b"a", 3, 1.002)))  # a's report stamped after the request: behind it
        seq.offer(Ev(Msg(REP, b"a", 2, 0.999)))  # a's report stamped before it: applied first
        await asyncio.sleep(0.01)
        gates.setdefault(1001, asyncio.Event()).set()  # b's barrier is met first
        await asyncio.sleep(0.01)
        gates.setdefault(1000, asyncio.Event()).set()
        await asyncio.sleep(0.01)

    applied = _run(script)
    assert applied == [("a", 2, None), ("b", 11, None), ("a", 10, None), ("a", 3, None)]


def test_a_report_in_the_same_millisecond_goes_before_the_request() -> None:
    async def script(seq: SessionSequencer, gates: dict[int, asyncio.Event]) -> None:
        gates.setdefault(5000, asyncio.Event()).set()
        seq.offer(Ev(Msg(REQ, b"s", 7, 5.000)))
        seq.offer(Ev(Msg(REP, b"s", 4, 5.000)))
        await asyncio.sleep(0.01)

    assert [(k, o) for k, o, _ in _run(script)] == [("s", 4), ("s", 7)]


def test_dropped_partition_records_are_not_applied() -> None:
    async def script(seq: SessionSequencer, gates: dict[int, asyncio.Event]) -> None:
        seq.offer(Ev(Msg(REQ, b"s", 7, 5.000, partition=2)))
        seq.offer(Ev(Msg(REQ, b"t", 8, 5.001, partition=1)))
        await asyncio.sleep(0.01)
        seq.drop(REQ, 2)
        gates.setdefault(5000, asyncio.Event()).set()
        gates.setdefault(5001, asyncio.Event()).set()
        await asyncio.sleep(0.01)

    assert [(k, o) for k, o, _ in _run(script)] == [("t", 8)]


def test_the_committed_offset_is_the_lowest_record_not_yet_applied() -> None:
    """Requests applied out of log order: the fabric's offset never passes a record still waiting."""
    from types import SimpleNamespace

    from crp_stream.runtime.kafka.sessions import WorkerBarrier

    rb = WorkerBarrier(SimpleNamespace())  # type: ignore[arg-type]
    slot = ("retrieval", "crp.window.requests", 0)
    assert rb.commit_to(slot, 7) == 8  # a partition not sequenced: the next offset
    rb.inflight[slot] = {3, 4, 5}
    rb.received[slot] = 5
    assert rb.commit_to(slot, 4) == 3  # 3 still waits
    rb.applied(slot, 4)
    assert rb.commit_to(slot, 3) == 5
    rb.applied(slot, 3)
    assert rb.commit_to(slot, 5) == 6  # everything received is applied


def test_a_batch_of_one_partition_commits_past_all_its_records_and_no_further() -> None:
    """Records of several sessions applied together: the offset committed is the lowest one still
    waiting outside the batch, as if they had been applied one by one."""
    from types import SimpleNamespace

    from crp_stream.runtime.kafka.sessions import WorkerBarrier

    rb = WorkerBarrier(SimpleNamespace())  # type: ignore[arg-type]
    slot = ("retrieval", "crp.window.requests", 0)
    assert rb.commit_past(slot, [4, 7]) == 8  # not sequenced: past the highest
    rb.inflight[slot] = {3, 4, 5, 6}
    rb.received[slot] = 6
    assert rb.commit_past(slot, [4, 6]) == 3  # 3 still waits
    assert rb.commit_past(slot, [3, 4]) == 5  # 5 still waits
    assert rb.commit_past(slot, [3, 4, 5, 6]) == 7  # everything received is applied
    assert rb.commit_past(slot, [5, 6], floor=5) == 7  # 3 and 4, below the fabric's offset, were applied


def test_records_redelivered_below_the_fabrics_offset_do_not_pull_it_back() -> None:
    """After a restart faust redelivers from its own (older) offset: 0 and 1 are below the fabric's
    offset 2 and queued (to be skipped); 2 applied first must commit 3, not 0."""
    from types import SimpleNamespace

    from crp_stream.runtime.kafka.sessions import WorkerBarrier

    rb = WorkerBarrier(SimpleNamespace())  # type: ignore[arg-type]
    slot = ("retrieval", "crp.window.requests", 1)
    rb.inflight[slot] = {0, 1, 2}
    rb.received[slot] = 2
    assert rb.commit_to(slot, 2, floor=2) == 3
    rb.inflight[slot] = {0, 2, 4}
    rb.received[slot] = 4
    assert rb.commit_to(slot, 4, floor=2) == 2  # 2 (not below the floor) still waits


def test_acks_go_to_faust_in_offset_order() -> None:
    """Faust commits the run of acked offsets from the lowest acked, whatever lies below it: a record
    applied early is acknowledged only once every record before it was applied."""
    from types import SimpleNamespace

    from crp_stream.runtime.kafka.sessions import WorkerBarrier

    acked: list[int] = []

    class Event:
        def __init__(self, offset: int):
            self.message = Msg(REQ, b"s", offset, 1.0)

        def ack(self) -> None:
            acked.append(self.message.offset)

    settings = SimpleNamespace(base_topic=lambda t: "crp.window.requests")
    rb = WorkerBarrier(SimpleNamespace(settings=settings))  # type: ignore[arg-type]
    events = {o: Event(o) for o in (3, 4, 5)}
    rb.unacked[("retrieval", "crp.window.requests", 0)] = dict(events)
    rb.ack("retrieval", events[5])
    rb.ack("retrieval", events[4])
    assert acked == []  # 3 still waits
    rb.ack("retrieval", events[3])
    assert acked == [3, 4, 5]
