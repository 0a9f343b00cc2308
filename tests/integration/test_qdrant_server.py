"""The pipeline on a live Qdrant server (``ops/qdrant``) through its failures.

- ``kill -9`` of the server in the middle of a run's vector writes, restarted on the same storage a
  moment later: the run retries (the vector guard makes every failure transient), puts back what an
  uncommitted batch wrote (``reconcile``) and redoes it, so its outputs, tables and vector points equal
  an uninterrupted run's on the same server: nothing lost, nothing doubled. Over REST and over gRPC.
- A Kafka worker started while the server is down waits, ``degraded`` on ``/health`` and waiting for
  ``qdrant``, starts when the server comes up, and rides out a ``kill -9`` of it while documents arrive.

Each test runs a server of its own (``private_qdrant``): the suite's server is never killed.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from crp_stream.config import Settings, parse_pairs
from crp_stream.fabric.sql.db import make_engine
from crp_stream.fabric.vectors.qdrant import QdrantVectorIndex
from crp_stream.replay_format import read_replay
from crp_stream.runtime.projections import differences, tables_snapshot, vectors_snapshot
from crp_stream.testing import Pipeline
from tests.support.congruence import HERE, TRUST
from tests.support.kafka import Kafka, WorkerProcess, unique_prefix
from tests.support.qdrant import TRANSPORTS, QdrantServer, with_collection
from tests.support.services import fresh_postgres_url, wait_until

pytestmark = [pytest.mark.qdrant]

SCENARIO = HERE / "scenarios" / "mixed_large.jsonl"


def pipeline(tmp: Path, spec: str) -> Pipeline:
    trust = {k: float(v) for k, v in parse_pairs("trust", TRUST).items()}
    return Pipeline(Settings(data_dir=tmp, embedder="hashing", qdrant=spec, trust=trust))


def picture(p: Pipeline, spec: str) -> dict[str, Any]:
    """Outputs, tables and the collection's points (count, which facts, each one's status)."""
    snap: dict[str, Any] = tables_snapshot(p.fabric.engine)
    with QdrantVectorIndex(url=spec) as index:
        snap["vectors"] = vectors_snapshot(index, [r["fact_id"] for r in snap["facts"]])
    snap["outputs"] = p.lines()
    return snap


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_killed_mid_write_then_restarted_loses_nothing_and_doubles_nothing(
    transport: str, tmp_path: Path, private_qdrant: QdrantServer, caplog: pytest.LogCaptureFixture
) -> None:
    records = read_replay(SCENARIO)
    private_qdrant.start()
    reference_spec = with_collection(private_qdrant.url(transport), "reference")
    with pipeline(tmp_path / "reference", reference_spec) as ref:
        ref.feed(records)
        expected = picture(ref, reference_spec)
    points = expected["vectors"]["count"]
    assert points == len(expected["facts"]) > 200  # the scenario writes enough to be cut in the middle

    spec = with_collection(private_qdrant.url(transport), "run")
    watch = QdrantVectorIndex(url=with_collection(private_qdrant.url("http"), "run"))
    caplog.set_level(logging.WARNING, logger="crp_stream.runtime.embedded.runtime")
    with pipeline(tmp_path / "run", spec) as run:
        failed: list[BaseException] = []

        def feed() -> None:
            try:
                run.feed(records)
            except BaseException as exc:  # surfaced below
                failed.append(exc)

        def written() -> int:
            try:
                return watch.count()
            except Exception:  # a collection just created answers 500 until its shard is loaded
                return 0

        feeder = threading.Thread(target=feed, name="feed", daemon=True)
        feeder.start()
        try:
            wait_until("a third of the points written", lambda: written() >= points // 3, 300.0, 0.005)
        except BaseException:
            feeder.join(600)  # never close the pipeline under a running feed
            raise
        private_qdrant.kill()
        at_kill = len(run.outputs)
        watch.close()
        time.sleep(1.5)  # the run meets the dead server and retries
        private_qdrant.start()
        feeder.join(600)
        assert not feeder.is_alive(), "the run did not finish after the server came back"
        assert not failed, failed
        actual = picture(run, spec)
    retried = [r for r in caplog.records if "transient error" in r.getMessage()]
    assert retried, "the run never met the dead server: the kill came too late to test anything"
    assert 0 < at_kill < len(actual["outputs"])  # killed in the middle of the run
    assert actual["vectors"]["count"] == len(actual["facts"]) == points  # one point per fact, none twice
    problems = differences(expected, actual)
    assert not problems, "\n".join(problems)


@pytest.mark.kafka
@pytest.mark.postgres
def test_kafka_worker_waits_for_a_down_server_then_rides_out_its_kill(
    tmp_path: Path, private_qdrant: QdrantServer
) -> None:
    prefix = unique_prefix("qd")
    database = fresh_postgres_url()
    spec = with_collection(private_qdrant.url("grpc"), "facts")
    kafka = Kafka(prefix)
    worker = WorkerProcess(tmp_path, prefix, database, qdrant=spec, name="qd").start()
    try:
        wait_until(
            "/health: degraded, waiting for qdrant only",
            lambda: set((worker.health() or {}).get("waiting_for", {})) == {"qdrant"},
            120.0,
            0.3,
        )
        assert worker.health()["status"] == "degraded"  # type: ignore[index]
        assert worker.alive()
        private_qdrant.start()
        worker.wait_ready(180.0)
        kafka.tap(("crp.facts",))
        docs = [_doc(i) for i in range(12)]
        for d in docs[:4]:
            kafka.produce("crp.documents", d["source"], d)
        _wait_facts(kafka, 8)

        private_qdrant.kill()  # documents arrive while the server is gone
        for d in docs[4:]:
            kafka.produce("crp.documents", d["source"], d)
        seen: list[dict[str, Any]] = []

        def degraded() -> bool:
            seen.append(worker.health() or {})
            return seen[-1].get("status") == "degraded"

        wait_until("/health: degraded by the failing vector writes", degraded, 120.0, 0.1)
        assert seen[-1]["broker"] == "reachable" and "VectorUnavailable" in str(seen[-1]["last_error"])
        time.sleep(1.0)
        private_qdrant.start()
        _wait_facts(kafka, 24)
        wait_until("/health: ok again", lambda: (worker.health() or {}).get("status") == "ok", 120.0, 0.3)
        assert worker.alive()
    finally:
        worker.stop()
        kafka.close()
    log = worker.log_path.read_text(errors="replace")
    assert "waiting before start" in log and "qdrant" in log and "transient error" in log
    engine = make_engine(database)
    try:
        with engine.connect() as conn:
            facts = [r[0] for r in conn.execute(text("SELECT fact_id FROM facts ORDER BY fact_id"))]
            twice = conn.execute(
                text("SELECT event_id FROM processed_events GROUP BY consumer, event_id HAVING COUNT(*) > 1")
            ).all()
    finally:
        engine.dispose()
    assert len(facts) == 24 and twice == []
    with QdrantVectorIndex(url=spec) as index:
        snap = vectors_snapshot(index, facts)
    assert snap["count"] == 24 and snap["present"] == facts  # every fact's point, once
    assert set(snap["status"]) == set(facts)


def _doc(i: int) -> dict[str, Any]:
    return {
        "event_id": f"qd-doc-{i}",
        "source": f"source-{i % 3}",
        "source_type": "official",
        "document_id": f"qd-doc-{i}",
        "facts": [
            {"text": f"Router {i} forwards {100 + i} packets per second on the edge network."},
            {"text": f"Switch {i} holds {20 + i} VLANs in the lab rack number {i}."},
        ],
    }


def _wait_facts(kafka: Kafka, n: int) -> None:
    kafka.wait_for(
        lambda rs: len({r.json["fact_id"] for r in rs if r.json.get("type") == "FactRecorded"}) >= n,
        timeout=180.0,
        what=f"{n} FactRecorded",
    )
