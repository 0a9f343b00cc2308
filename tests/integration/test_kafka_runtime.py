"""The Kafka runtime on a real broker and a real PostgreSQL, with embedded Qdrant (edge) per worker.

Each test uses its own topic prefix and database. Workers are ``crp-stream worker`` processes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata
from sqlalchemy import text

from crp_stream.fabric.sql.db import make_engine
from tests.support.kafka import Consumed, Kafka, WorkerProcess, partitions, servers, unique_prefix, wait_quiescent
from tests.support.services import fresh_postgres_url, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

OLD_MS = 978_307_200_000  # 2001-01-01: a producer's timestamp the broker must overwrite


def iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def doc(event_id: str, source: str, value: str = "2379", *, subject: str = "etcd", n: int = 2) -> dict[str, Any]:
    facts = [
        {
            "text": f"The {subject} client port is {value}.",
            "subject": subject,
            "attribute": "client port",
            "value": value,
        },
        {
            "text": f"The {subject} peer port is {int(value) + 1}.",
            "subject": subject,
            "attribute": "peer port",
            "value": str(int(value) + 1),
        },
    ][:n]
    return {"event_id": event_id, "source": source, "source_type": "official", "document_id": event_id, "facts": facts}


def recorded(recs: list[Consumed], event_id: str) -> list[Consumed]:
    return [
        r
        for r in recs
        if r.topic == "crp.facts" and r.json.get("type") == "FactRecorded" and r.json.get("origin_event_id") == event_id
    ]


def sql(database: str, query: str) -> list[tuple[Any, ...]]:
    engine = make_engine(database)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(query))]
    finally:
        engine.dispose()


def fabric_state(database: str) -> dict[str, Any]:
    return {
        t: sorted(map(repr, sql(database, f"SELECT * FROM {t}")))
        for t in (
            "facts",
            "sources",
            "edges",
            "sessions",
            "audit_log",
            "refresh_requests",
            "quarantine_candidates",
            "claims",
            "processed_events",
            "consumer_offsets",
            "meta",
        )
    }


@pytest.fixture
def env(tmp_path: Path) -> Iterator[SimpleNamespace]:
    prefix = unique_prefix("rt")
    kafka = Kafka(prefix)
    ns = SimpleNamespace(prefix=prefix, db=fresh_postgres_url(), kafka=kafka, tmp=tmp_path, workers=[])

    def worker(name: str = "w", **kw: Any) -> WorkerProcess:
        w = WorkerProcess(tmp_path, prefix, ns.db, name=name, **kw).start()
        ns.workers.append(w)
        return w

    ns.worker = worker
    try:
        yield ns
    finally:
        for w in ns.workers:
            w.stop()
        kafka.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """One worker for the tests that only publish and observe."""
    tmp = tmp_path_factory.mktemp("kafka-shared")
    prefix = unique_prefix("sh")
    kafka = Kafka(prefix)
    db = fresh_postgres_url()
    w = WorkerProcess(tmp, prefix, db).start()
    try:
        w.wait_ready()
        kafka.tap()
        yield SimpleNamespace(prefix=prefix, db=db, kafka=kafka, worker=w)
    finally:
        w.stop()
        kafka.close()


def test_document_through_the_broker_becomes_facts_in_postgres_and_qdrant(shared: SimpleNamespace) -> None:
    k = shared.kafka
    _, _, ts = k.produce("crp.documents", "vendor_docs", doc("doc-ingest", "vendor_docs"))
    recs = k.wait_for(lambda rs: len(recorded(rs, "doc-ingest")) == 2, what="2 FactRecorded")
    facts = recorded(recs, "doc-ingest")
    for r in facts:
        assert r.key == r.json["fact_id"]
        assert r.crp_id and len(r.crp_id) == 32
        assert r.json["epoch"] == iso_ms(ts)
    ids = {r.json["fact_id"] for r in facts}
    rows = sql(shared.db, "SELECT fact_id, source, epoch_us FROM facts WHERE origin_event_id = 'doc-ingest'")
    assert {r[0] for r in rows} == ids and {r[2] for r in rows} == {ts * 1000}
    # the vectors are in the worker's embedded Qdrant: a window request retrieves the facts
    k.produce(
        "crp.window.requests",
        "s-ingest",
        {
            "request_id": "req-ingest-1",
            "session_id": "s-ingest",
            "window": 1,
            "query": {"text": "What is the etcd client port?"},
            "sub_queries": [{"id": "q1", "text": "etcd client port"}],
            "fact_budget": 5,
        },
    )
    env = k.wait_for(
        lambda rs: any(r.topic == "crp.envelopes" and r.key == "s-ingest" for r in rs), what="the envelope"
    )
    envelope = next(r.json for r in env if r.topic == "crp.envelopes" and r.key == "s-ingest")
    assert envelope["request_id"] == "req-ingest-1"
    assert {f["fact_id"] for f in envelope["facts"]} & ids


def test_the_epoch_is_the_brokers_log_append_time_not_the_producers(shared: SimpleNamespace) -> None:
    k = shared.kafka
    _, _, ts = k.produce(
        "crp.telemetry",
        "probe",
        {
            "event_id": "tele-epoch",
            "source": "probe",
            "observed_at": iso_ms(OLD_MS),
            "subject": "etcd",
            "attribute": "latency",
            "value": "12",
            "unit": "ms",
        },
        timestamp_ms=OLD_MS,
    )
    assert ts > OLD_MS + 10 * 365 * 86_400_000  # the broker overwrote the producer's timestamp
    recs = k.wait_for(lambda rs: len(recorded(rs, "tele-epoch")) == 1, what="the telemetry fact")
    fact = recorded(recs, "tele-epoch")[0].json
    assert fact["epoch"] == iso_ms(ts)
    assert fact["modified_at"] == iso_ms(OLD_MS)  # the producer's claim feeds recency only
    assert sql(shared.db, "SELECT epoch_us FROM facts WHERE origin_event_id = 'tele-epoch'") == [(ts * 1000,)]


def test_malformed_record_is_dead_lettered_and_the_next_one_processed(shared: SimpleNamespace) -> None:
    k = shared.kafka
    p1, _, _ = k.produce("crp.documents", "flaky_source", b"\xff{not json")
    p2, _, _ = k.produce("crp.documents", "flaky_source", doc("doc-after-bad", "flaky_source", "4001"))
    assert p1 == p2  # same key, same partition: the bad record must not stall it
    recs = k.wait_for(lambda rs: len(recorded(rs, "doc-after-bad")) == 2, what="facts after the bad record")
    dead = [r.json for r in recs if r.topic == "crp.deadletter" and r.key == "flaky_source"]
    assert len(dead) == 1 and dead[0]["topic"] == "crp.documents" and dead[0]["reason"]
    assert any(r.topic == "crp.audit" and r.json["audit_type"] == "EVENT_REJECTED" for r in recs)
    assert shared.worker.health()["status"] == "ok"
    assert shared.worker.metric("crp_records_deadlettered_total", topic="crp.documents") >= 1


def test_redelivery_changes_nothing_duplicate_publish_and_group_offset_reset(env: SimpleNamespace) -> None:
    w = env.worker("first")
    w.wait_ready()
    k = env.kafka
    k.tap()
    k.produce("crp.documents", "vendor_docs", doc("doc-r1", "vendor_docs"))
    k.produce("crp.documents", "legacy_wiki", doc("doc-r2", "legacy_wiki", "4001"))
    k.wait_for(lambda rs: len(recorded(rs, "doc-r1")) == 2 and len(recorded(rs, "doc-r2")) == 2, what="facts")
    k.produce("crp.documents", "vendor_docs", doc("doc-r1", "vendor_docs"))  # the same event, published twice
    wait_quiescent(k, env.db)
    assert len(recorded(k.snapshot(), "doc-r1")) == 2
    outputs_before = len(k.snapshot())
    assert not [r for r in k.snapshot() if r.topic == "crp.deadletter"]
    assert w.stop() == 0
    before = fabric_state(env.db)

    _reset_group_offsets(
        k, "worker", ("documents", "telemetry", "facts", "window.requests", "window.reports", "operator.commands")
    )
    w2 = env.worker("second")
    w2.wait_ready()
    inputs = 3 + len([r for r in k.snapshot() if r.topic == "crp.facts"])
    wait_until(
        f"{inputs} redelivered records skipped",
        lambda: w2.metric("crp_records_redelivered_skipped_total") >= inputs,
        60.0,
        0.3,
    )
    wait_quiescent(k, env.db)
    assert fabric_state(env.db) == before
    assert len(k.snapshot()) == outputs_before  # not one output record more
    assert w2.metric("crp_records_processed_total") == 0


def test_crash_between_commit_and_produce_loses_no_output(env: SimpleNamespace) -> None:
    w = env.worker("dies", exit_after_commit=1)
    w.wait_ready()
    k = env.kafka
    k.tap()
    k.produce("crp.documents", "vendor_docs", doc("doc-crash", "vendor_docs"))
    w.proc.wait(60)
    assert w.proc.returncode == 99, w.log_tail()
    # the effects are committed, the outputs are not on the topic yet
    assert len(sql(env.db, "SELECT 1 FROM facts WHERE origin_event_id = 'doc-crash'")) == 2
    assert not recorded(k.snapshot(), "doc-crash")
    w2 = env.worker("recovers")
    w2.wait_ready()
    recs = k.wait_for(lambda rs: len(recorded(rs, "doc-crash")) == 2, what="FactRecorded from the outbox")
    assert all(r.crp_id for r in recorded(recs, "doc-crash"))
    wait_quiescent(k, env.db)
    assert w2.metric("crp_records_processed_total", topic="crp.documents") == 0  # skipped, not re-applied
    assert len(sql(env.db, "SELECT 1 FROM facts WHERE origin_event_id = 'doc-crash'")) == 2


def test_worker_killed_mid_stream_then_restarted_applies_everything_once(env: SimpleNamespace) -> None:
    w = env.worker("killed")
    w.wait_ready()
    k = env.kafka
    k.tap()
    n = 40
    for i in range(n):
        k.produce("crp.documents", f"src{i % 7}", doc(f"doc-k{i}", f"src{i % 7}", str(3000 + i), subject=f"svc{i}"))
    k.wait_for(lambda rs: sum(1 for r in rs if r.topic == "crp.facts") >= 10, what="some facts")
    w.kill()
    w2 = env.worker("restarted")
    w2.wait_ready()
    wait_quiescent(k, env.db)
    rows = sql(env.db, "SELECT fact_id FROM facts WHERE origin_event_id LIKE 'doc-k%'")
    assert len(rows) == 2 * n
    recs = [r for r in k.snapshot() if r.topic == "crp.facts" and r.json.get("type") == "FactRecorded"]
    by_fact: dict[str, set[str | None]] = {}
    for r in recs:
        by_fact.setdefault(r.json["fact_id"], set()).add(r.crp_id)
    assert set(by_fact) == {r[0] for r in rows}
    assert all(len(ids) == 1 for ids in by_fact.values())  # a duplicate, if any, carries the same crp-id
    per_event = sql(
        env.db,
        "SELECT consumer, event_id, COUNT(*) FROM processed_events GROUP BY consumer, event_id HAVING COUNT(*) > 1",
    )
    assert per_event == []


def test_two_workers_in_one_consumer_group_split_the_partitions(env: SimpleNamespace) -> None:
    a = env.worker("a", groups="ingest")
    b = env.worker("b", groups="ingest")
    a.wait_ready()
    b.wait_ready()
    every = {f"{env.prefix}{t}[{p}]" for t in ("documents", "telemetry") for p in range(4)}
    deadline = 60
    for _ in range(deadline * 4):
        ha, hb = a.health(), b.health()
        sa, sb = set(ha["assigned"]), set(hb["assigned"])
        if sa and sb and not sa & sb and sa | sb == every:
            break
        time.sleep(0.25)
    else:
        pytest.fail(f"partitions not split: a={sorted(sa)} b={sorted(sb)}")
    assert ha["consumer_group"] == hb["consumer_group"]
    k = env.kafka
    k.tap(("crp.facts",))
    n = 24
    for i in range(n):
        k.produce("crp.documents", f"source-{i}", doc(f"doc-s{i}", f"source-{i}", str(5000 + i), n=1))
    k.wait_for(lambda rs: len({r.json["fact_id"] for r in rs}) == n, what="every fact")
    assert len(sql(env.db, "SELECT 1 FROM facts")) == n
    pa = a.metric("crp_records_processed_total", topic="crp.documents")
    pb = b.metric("crp_records_processed_total", topic="crp.documents")
    assert pa > 0 and pb > 0 and pa + pb == n


def _reset_group_offsets(k: Kafka, suffix: str, topics: tuple[str, ...]) -> None:
    async def go() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=servers(), group_id=f"{k.prefix}{suffix}", enable_auto_commit=False)
        await c.start()
        try:
            parts = await partitions(c, [k.prefix + t for t in topics])
            c.assign(parts)
            await c.commit({tp: OffsetAndMetadata(0, "") for tp in parts})
        finally:
            await c.stop()

    k._run(go())


def test_worker_serves_metrics_and_health_and_logs_json(shared: SimpleNamespace) -> None:
    k = shared.kafka
    k.produce("crp.telemetry", "metrics_probe", b"[]")
    k.wait_for(
        lambda rs: any(r.topic == "crp.deadletter" and r.key == "metrics_probe" for r in rs), what="the dead letter"
    )
    wait_until("crp_verdicts_total >= 1", lambda: shared.worker.metric("crp_verdicts_total") >= 1, 60.0, 0.3)
    text_ = shared.worker.metrics()
    for name in (
        "crp_envelope_assembly_seconds_bucket",
        "crp_records_processed_total",
        "crp_consumer_lag",
        "crp_verdicts_total",
    ):
        assert name in text_
    lines = [ln for ln in shared.worker.log_path.read_text().splitlines() if ln.startswith("{")]
    assert lines and all(isinstance(json.loads(ln)["msg"], str) for ln in lines)
