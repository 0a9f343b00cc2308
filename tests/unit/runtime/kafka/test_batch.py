"""The Kafka worker's batched path (runtime/kafka/batch.py), driven without a broker: stand-ins for
faust's events go through ``BatchAgent.process`` exactly as the agent's drain hands them over, and the
produced outputs are collected instead of sent. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from crp_stream.config import Settings
from crp_stream.events.topics import ALL_TOPICS
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors.base import BatchItem
from crp_stream.processors.retrieval import RetrievalHandler
from crp_stream.runtime.kafka.batch import BatchAgent
from crp_stream.runtime.kafka.delivery import Routed, load_outbox, outbox_key
from crp_stream.runtime.kafka.worker import KafkaWorker
from tests.support.services import fresh_postgres_url

LOG_APPEND_TIME = 1


@dataclass
class Message:  # the fields of a faust message the worker reads
    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    timestamp: float
    timestamp_type: int = LOG_APPEND_TIME
    headers: tuple[tuple[str, bytes], ...] = ()
    generation_id: int = 1


@dataclass
class Event:
    message: Message
    acked: list[int] = field(default_factory=list)

    def ack(self) -> bool:
        self.acked.append(self.message.offset)
        return True


def document(event_id: str, n: int = 2) -> bytes:
    facts = [{"text": f"Service {event_id} listens on port {8000 + i}."} for i in range(n)]
    return json.dumps({"event_id": event_id, "source": "vendor", "source_type": "official", "facts": facts}).encode()


def events(docs: list[tuple[int, int, str]]) -> list[Event]:
    """(partition, offset, event id) -> events on crp.documents, one broker millisecond apart."""
    return [
        Event(Message("crp.documents", p, o, b"vendor", document(eid), 1_700_000_000.0 + i / 1000))
        for i, (p, o, eid) in enumerate(docs)
    ]


class Harness:
    def __init__(self, tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch):
        settings = Settings(
            data_dir=tmp_path, database_url=database_url, embedder="hashing:16", broker="kafka://127.0.0.1:1"
        )
        self.worker = KafkaWorker(settings, ("ingest",))
        self.worker.partitions = {t: 4 for t in ALL_TOPICS}  # as ensure_topics would find them
        self.produced: list[Routed] = []
        self.transactions = 0

        async def produce(routed: list[Routed]) -> None:
            self.produced.extend(routed)

        real = self.worker.fabric.unit_of_work

        def counted() -> AbstractContextManager[UnitOfWork]:
            self.transactions += 1
            return real()

        monkeypatch.setattr(self.worker, "produce", produce)
        monkeypatch.setattr(self.worker.fabric, "unit_of_work", counted)
        self.agent = BatchAgent(self.worker, self.worker.handlers[0])

    def process(self, evs: list[Event]) -> list[Event]:
        return asyncio.run(self.agent.process(evs))

    def facts(self) -> set[str]:
        with self.worker.fabric.unit_of_work() as uow:
            return set(uow.repo.fact_ids(limit=10_000))

    def offsets(self) -> dict[tuple[str, int], int]:
        with self.worker.fabric.unit_of_work() as uow:
            return uow.repo.offsets("ingest")


@pytest.fixture
def harness(tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    h = Harness(tmp_path, database_url, monkeypatch)
    try:
        yield h
    finally:
        asyncio.run(h.worker.stop())


def test_records_delivered_together_are_applied_in_one_transaction(harness: Harness) -> None:
    first = events([(0, 0, "d0"), (1, 0, "d1")])
    assert harness.process(first) == first  # every event handed back to be acknowledged
    claims_and_batch = harness.transactions
    assert claims_and_batch == 3  # two partitions claimed (offset and outbox loaded), one batch

    burst = events([(0, 1, "d2"), (1, 1, "d3"), (0, 2, "d4"), (0, 3, "d5"), (1, 2, "d6"), (1, 3, "d7")])
    harness.transactions = 0
    harness.produced.clear()
    assert harness.process(burst) == burst
    assert harness.transactions == 1  # six documents, two partitions: one unit of work

    assert harness.offsets() == {("crp.documents", 0): 4, ("crp.documents", 1): 4}
    assert len(harness.facts()) == 16  # 8 documents of 2 facts
    recorded = [r for r in harness.produced if r.topic == "crp.facts"]
    assert len(recorded) == 12  # one FactRecorded per fact of the burst, produced after the commit
    assert len({r.record_id for r in recorded}) == 12
    # each partition's outbox holds its records' outputs of the last batch until acknowledged
    with harness.worker.fabric.unit_of_work() as uow:
        for p in (0, 1):
            pending = load_outbox(uow, outbox_key("ingest", "crp.documents", p))
            assert len(pending) == 6 and {r.record_id for r in pending} <= {r.record_id for r in recorded}

    # delivered again (a rebalance, a reset): skipped by the offsets, nothing produced, one read
    harness.transactions = 0
    harness.produced.clear()
    again = events([(0, 2, "d4"), (1, 3, "d7")])
    assert harness.process(again) == again
    assert harness.produced == []
    assert len(harness.facts()) == 16


def test_a_poison_record_in_a_batch_is_dead_lettered_and_the_rest_lands(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = harness.worker.handlers[0]
    real = handler.handle_batch

    def handle_batch(items: Sequence[BatchItem[Any]], uow: UnitOfWork) -> int:
        applied = real(items, uow)  # its facts and vectors are written, then it fails
        if any(getattr(it.event, "event_id", "") == "poison" for it in items[:applied]):
            raise RuntimeError("a bug this record triggers")
        return applied

    monkeypatch.setattr(handler, "handle_batch", handle_batch)
    harness.process(events([(0, 0, "warm")]))  # the partition is claimed before the burst
    harness.transactions = 0
    harness.produced.clear()
    burst = events([(0, 1, "a"), (0, 2, "b"), (0, 3, "poison"), (0, 4, "c"), (0, 5, "d")])
    assert harness.process(burst) == burst

    # the batch and the vector reset after its rollback (a read of the committed statuses), then one
    # transaction per record: a, b, the poison three times (each reset after), its dead letter, c, d
    assert harness.transactions == 2 + 2 + 3 * 2 + 1 + 2
    dead = [r for r in harness.produced if r.topic == "crp.deadletter"]
    assert len(dead) == 1
    body = json.loads(dead[0].value)
    assert "internal error in ingest: RuntimeError: a bug this record triggers" in json.dumps(body)
    assert harness.offsets() == {("crp.documents", 0): 6}
    facts = harness.facts()
    assert len(facts) == 10  # warm, a, b, c, d: the poison's rolled back
    recorded = {json.loads(r.value)["fact_id"] for r in harness.produced if r.topic == "crp.facts"}
    assert len(recorded) == 8 and recorded <= facts
    # the poison's vector points, written by the failed attempts, are not served
    served = {fid for fid, _ in harness.worker.fabric.vectors.search([1.0] * 16, 100, -1.0)}
    assert served <= facts


def test_a_batch_gives_exactly_the_outputs_of_one_record_per_transaction(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same burst (a duplicate document id, a document that fails validation, two partitions)
    through one batch and through the one-record path: the same outputs, in the same order, byte for
    byte, and the same facts."""
    other = f"sqlite:///{tmp_path / 'one.sqlite'}" if database_url.startswith("sqlite") else fresh_postgres_url()
    (tmp_path / "one").mkdir()
    batched, single = Harness(tmp_path, database_url, monkeypatch), Harness(tmp_path / "one", other, monkeypatch)
    try:
        burst = events([(0, 0, "d0"), (1, 0, "d1"), (0, 1, "d2"), (0, 2, "d0"), (1, 1, "d3"), (1, 2, "d4")])
        bad = burst[4].message
        burst[4] = Event(Message(bad.topic, bad.partition, bad.offset, bad.key, b'{"event_id": "d3"}', bad.timestamp))
        batched.process(burst)
        handler = single.worker.handlers[0]

        async def one_by_one() -> None:
            for ev in burst:
                await single.worker.handle_message(handler, ev.message)

        asyncio.run(one_by_one())
        got = [(r.topic, r.partition, r.key, r.value, r.record_id) for r in batched.produced]
        want = [(r.topic, r.partition, r.key, r.value, r.record_id) for r in single.produced]
        assert batched.transactions < single.transactions
        assert any(t == "crp.deadletter" for t, *_ in want) and len(want) > 6
        assert got == want
        assert batched.facts() == single.facts()
    finally:
        asyncio.run(batched.worker.stop())
        asyncio.run(single.worker.stop())


class Lingering(BatchAgent):
    """``BatchAgent._drain`` with ``process`` recording the batches it is handed."""

    def __init__(self, linger_s: float) -> None:
        self.batch_max, self.linger_s = 3, linger_s  # a lingering batch closes when full
        self.batches: list[list[int]] = []

    async def process(self, events: Sequence[Any]) -> list[Any]:
        self.batches.append(list(events))
        return []


@pytest.mark.parametrize(("linger", "want"), [(0.0, [[1], [2, 3]]), (5.0, [[1, 2, 3]])])
def test_a_batch_waits_for_more_records_only_with_a_linger(linger: float, want: list[list[int]]) -> None:
    async def scenario() -> list[list[int]]:
        agent = Lingering(linger)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        drain = asyncio.create_task(agent._drain(queue))
        await queue.put(1)
        await asyncio.sleep(0.05)  # the first record alone is taken at once (no linger)
        queue.put_nowait(2)
        queue.put_nowait(3)
        for _ in range(200):
            await asyncio.sleep(0.01)
            if sum(map(len, agent.batches)) == 3:
                break
        drain.cancel()
        return agent.batches

    assert asyncio.run(scenario()) == want


def window_events(start: float) -> list[Event]:
    """Window requests and a report of three sessions on one partition, one broker millisecond apart:
    s1's report and second window follow its first in the same burst, s9's window is rejected."""

    def request(session: str, window: int, **extra: Any) -> bytes:
        body = {"request_id": f"{session}-{window}", "session_id": session, "window": window, **extra}
        return json.dumps({"query": {"text": "which port does the service listen on?"}, **body}).encode()

    subs = {"sub_queries": [{"id": "a", "text": "the port"}, {"id": "b", "text": "the service"}]}
    report = {"session_id": "s1", "window": 1, "addressed": [{"id": "a", "depth": 0.9}], "output_text": "8000"}
    report["completeness"] = 0.5
    values = [
        ("crp.window.requests", "s1", request("s1", 1, **subs)),
        ("crp.window.requests", "s2", request("s2", 1, **subs)),
        ("crp.window.requests", "s9", request("s9", 2)),
        ("crp.window.reports", "s1", json.dumps(report).encode()),
        ("crp.window.requests", "s1", request("s1", 2)),
        ("crp.window.requests", "s3", request("s3", 1, **subs)),
    ]
    offsets: dict[str, int] = {}
    out = []
    for i, (topic, key, value) in enumerate(values):
        offsets[topic] = offsets.get(topic, -1) + 1
        out.append(Event(Message(topic, 0, offsets[topic], key.encode(), value, start + i / 1000)))
    return out


def test_retrieval_batches_give_exactly_the_outputs_of_one_record_per_transaction(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the event-time barrier the retrieval group batches what the consumer delivers: two
    windows of one session and a rejected request in the burst, the same bytes as one by one."""
    other = f"sqlite:///{tmp_path / 'one.sqlite'}" if database_url.startswith("sqlite") else fresh_postgres_url()
    (tmp_path / "one").mkdir()
    batched, single = Harness(tmp_path, database_url, monkeypatch), Harness(tmp_path / "one", other, monkeypatch)
    try:
        for h in (batched, single):
            h.process(events([(0, 0, "d0"), (1, 0, "d1"), (0, 1, "d2")]))
            h.worker.handlers.append(retrieval := RetrievalHandler())
            retrieval.bind(h.worker.fabric)
            h.produced.clear()
            h.transactions = 0
        burst = window_events(1_700_000_100.0)
        asyncio.run(BatchAgent(batched.worker, batched.worker.handlers[-1]).process(burst))
        handler = single.worker.handlers[-1]

        async def one_by_one() -> None:
            for ev in burst:
                await single.worker.handle_message(handler, ev.message)

        asyncio.run(one_by_one())
        got = [(r.topic, r.partition, r.key, r.value, r.record_id) for r in batched.produced]
        want = [(r.topic, r.partition, r.key, r.value, r.record_id) for r in single.produced]
        assert [t for t, *_ in want].count("crp.envelopes") == 4
        assert [t for t, *_ in want].count("crp.deadletter") == 1
        assert got == want
        assert batched.transactions < single.transactions  # partitions claimed, then one batch
    finally:
        asyncio.run(batched.worker.stop())
        asyncio.run(single.worker.stop())
