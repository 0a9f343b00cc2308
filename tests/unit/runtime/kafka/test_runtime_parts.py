"""The Kafka runtime's pure parts: routing, the outbox, topic names, groups, metrics (no broker)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.partitioner import DefaultPartitioner

from crp_stream.config import ConfigError, Settings
from crp_stream.core.claim_values import claim_key
from crp_stream.events.topics import ALL_TOPICS
from crp_stream.fabric.fabric import Fabric
from crp_stream.processors.base import Output
from crp_stream.runtime.kafka.delivery import Routed, load_outbox, outbox_key, partition_for, route, save_outbox
from crp_stream.runtime.kafka.groups import GROUPS, parse_groups
from crp_stream.runtime.kafka.metrics import Metrics
from crp_stream.runtime.kafka.topics import bootstrap_servers

PARTS = {t: 8 for t in ALL_TOPICS}


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[Fabric]:
    f = Fabric(Settings(data_dir=tmp_path, embedder="hashing:16", topic_prefix="app1."))
    yield f
    f.close()


def test_partition_for_matches_kafkas_default_partitioner() -> None:
    for key in ("vendor_docs", "session-42", "", "fact-123", "ünïcode"):
        expected = DefaultPartitioner()(key.encode(), list(range(12)), list(range(12)))
        assert partition_for(key, 12) == expected


def _fact_recorded(fid: str, subject: str | None, attribute: str | None) -> bytes:
    return json.dumps({"type": "FactRecorded", "fact_id": fid, "subject": subject, "attribute": attribute}).encode()


def test_facts_are_partitioned_by_claim_key_and_keyed_by_fact_id(fabric: Fabric) -> None:
    outs = [
        Output("crp.facts", f"f{i}", _fact_recorded(f"f{i}", "Upstream API", "rate limit"), f"id{i}") for i in range(20)
    ]
    with fabric.unit_of_work() as uow:
        routed = route(outs, uow, fabric.settings, PARTS)
    assert {r.partition for r in routed} == {partition_for(claim_key("Upstream API", "rate limit"), 8)}
    assert [r.key for r in routed] == [f"f{i}".encode() for i in range(20)]
    assert all(r.topic == "app1.facts" and r.headers == [("crp-id", r.record_id.encode())] for r in routed)


def test_status_change_follows_its_facts_claim_from_the_fabric(fabric: Fabric) -> None:
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts(
            [
                {
                    "fact_id": "f1",
                    "source": "s",
                    "source_type": "official",
                    "trust": 0.9,
                    "importance": 1.0,
                    "epoch_us": 1,
                    "modified_at_us": 1,
                    "ttl_s": None,
                    "expires_at_us": None,
                    "text": "t",
                    "subject": "etcd",
                    "attribute": "client port",
                    "value": "2379",
                    "unit": None,
                    "claim_key": claim_key("etcd", "client port"),
                    "status": "active",
                    "content_hash": "h",
                    "document_id": "d",
                    "position": 0,
                    "origin_event_id": "e",
                    "kind": "document",
                    "extra": None,
                }
            ]
        )
        change = json.dumps({"type": "FactStatusChanged", "fact_id": "f1", "status": "stale"}).encode()
        unknown = json.dumps({"type": "FactStatusChanged", "fact_id": "nope", "status": "stale"}).encode()
        routed = route(
            [
                Output("crp.facts", "f1", change, "a"),
                Output("crp.facts", "nope", unknown, "b"),
                Output("crp.envelopes", "sess", b"{}", "c"),
            ],
            uow,
            fabric.settings,
            PARTS,
        )
    assert routed[0].partition == partition_for(claim_key("etcd", "client port"), 8)
    assert routed[1].partition == partition_for("nope", 8)  # no claim known: by its key, the fact id
    assert routed[2].partition == partition_for("sess", 8) and routed[2].topic == "app1.envelopes"


def test_outbox_round_trip_and_clear(fabric: Fabric) -> None:
    key = outbox_key("retrieval", "crp.window.requests", 1023)
    assert len(key) <= 64  # the meta table's key column
    rows = [Routed("app1.envelopes", 3, b"sess", b"\x00\xffbytes", "rid1"), Routed("app1.audit", 0, b"k", b"{}", "r2")]
    with fabric.unit_of_work() as uow:
        save_outbox(uow, key, rows)
    with fabric.unit_of_work() as uow:
        assert load_outbox(uow, key) == rows
        save_outbox(uow, key, [])
    with fabric.unit_of_work() as uow:
        assert load_outbox(uow, key) == []
        assert load_outbox(uow, outbox_key("ingest", "crp.documents", 0)) == []


def test_groups_and_broker_addresses() -> None:
    assert parse_groups(None) == GROUPS
    assert parse_groups("retrieval, ingest") == ("ingest", "retrieval")  # canonical order
    with pytest.raises(ConfigError, match="nope"):
        parse_groups("ingest,nope")
    with pytest.raises(ConfigError):
        parse_groups("")
    assert bootstrap_servers("kafka://a:9092,b:9093") == "a:9092,b:9093"
    for bad in (None, "", "kafka://", "kafka://host", "http://a:1"):
        with pytest.raises(ConfigError):
            bootstrap_servers(bad)


def test_metrics_count_dead_letters_verdicts_and_assembly() -> None:
    m = Metrics("kafka")
    audit = json.dumps({"audit_type": "STALE_HIGH_TRUST"}).encode()
    m.record_outputs("crp.documents", [Output("crp.deadletter", "k", b"{}", "a"), Output("crp.audit", "k", audit, "b")])
    m.observe("retrieval", "crp.window.requests", 0.012)
    m.observe("ingest", "crp.documents", 0.5)
    text = m.render().decode()
    assert 'crp_records_deadlettered_total{topic="crp.documents"} 1.0' in text
    assert 'crp_verdicts_total{audit_type="STALE_HIGH_TRUST"} 1.0' in text
    assert "crp_envelope_assembly_seconds_count 1.0" in text  # only window requests are assemblies
    assert 'crp_records_processed_total{group="ingest",topic="crp.documents"} 1.0' in text


def test_worker_command_needs_a_broker_and_known_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from crp_stream.cli import main

    monkeypatch.delenv("CRP_BROKER", raising=False)
    assert main(["worker", "--data", str(tmp_path)]) == 2
    assert "--broker" in capsys.readouterr().err
    assert main(["worker", "--data", str(tmp_path), "--broker", "localhost:9092"]) == 2  # no kafka:// scheme
    assert main(["worker", "--data", str(tmp_path), "--broker", "kafka://127.0.0.1:1", "--groups", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_a_rollback_whose_vector_reset_failed_is_reconciled_before_the_next_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The third attempt fails after writing vectors and the reset fails too (the database blinked):
    the dead-letter attempt that follows must put those points back first, not leave them active."""
    import asyncio

    from sqlalchemy.exc import OperationalError

    from crp_stream.processors.base import Record
    from crp_stream.runtime.kafka import executor as fabric_thread
    from crp_stream.runtime.kafka import worker as kafka
    from crp_stream.runtime.kafka.worker import KafkaWorker

    worker = KafkaWorker(Settings(data_dir=tmp_path, embedder="hashing:16", broker="kafka://127.0.0.1:1"), ("ingest",))
    worker.partitions = dict(PARTS)  # as ensure_topics would find them
    real_route, real_reconcile = kafka.route, kafka.reconcile
    calls = []

    def route(outs: list[Output], *args: object) -> object:
        if any(o.topic == "crp.facts" for o in outs):
            raise ValueError("refused by the broker's side")  # not transient: retried, then dead-lettered
        return real_route(outs, *args)

    def reconcile(*args: object) -> int:
        calls.append(len(calls))
        if len(calls) == 3:
            raise OperationalError("SELECT", {}, ConnectionError("database down"))
        return real_reconcile(*args)

    monkeypatch.setattr(kafka, "route", route)
    monkeypatch.setattr(fabric_thread, "reconcile", reconcile)  # what a rollback and a retry call
    doc = {
        "event_id": "d1",
        "source": "vendor",
        "source_type": "official",
        "facts": [{"text": "The etcd client port is 2379."}, {"text": "The etcd peer port is 2380."}],
    }
    record = Record("crp.documents", 0, 0, "vendor", json.dumps(doc).encode(), 1_700_000_000_000_000)
    try:
        outs, _ = asyncio.run(worker._apply(worker.handlers[0], record))
        assert outs is not None and [o.topic for o in outs if o.topic == "crp.deadletter"]
        with worker.fabric.unit_of_work() as uow:
            assert uow.repo.offsets("ingest") == {("crp.documents", 0): 1}  # dead-lettered, moved on
        assert worker.fabric.vectors.count() == 2  # written by the failed attempts ...
        assert worker.fabric.vectors.search([1.0] * 16, 10, 0.0) == []  # ... and none is served
        assert len(calls) == 4  # after each failed attempt, and once more before the dead letter
    finally:
        asyncio.run(worker.stop())


def test_a_copy_of_our_own_changelog_record_is_not_applied_again(fabric: Fabric) -> None:
    """On Kafka a restarted worker produces its outbox again: the copy (same crp-id, later offset) must
    not reach the arbiter, which would act on a newer fabric under the copy's id."""
    from datetime import UTC, datetime

    from crp_stream import events
    from crp_stream.processors.base import Handler, Record
    from crp_stream.processors.dispatch import ID_HEADER, apply_record

    seen: list[int] = []

    class Arbiter(Handler):
        group, topics = "arbiter", ("crp.facts",)

        def handle(self, event: object, record: Record, uow: object, out: object) -> None:
            seen.append(record.offset)

    change = events.encode(
        events.FactStatusChanged(fact_id="f1", status="stale", reason="r", at=datetime(2030, 1, 1, tzinfo=UTC))
    )
    headers = ((ID_HEADER, b"5bcb188406c47fcf185d974d28193fab"),)
    with fabric.unit_of_work() as uow:
        for offset in (7, 12):  # the record, then its copy
            assert apply_record(Arbiter(), Record("crp.facts", 1, offset, "f1", change, 1, headers), uow) == []
        other = ((ID_HEADER, b"0" * 32),)  # another record, same content: applied
        apply_record(Arbiter(), Record("crp.facts", 1, 13, "f1", change, 1, other), uow)
    assert seen == [7, 13]
