"""The event-time barrier of the Kafka worker: a window request waits, bounded, for the
inputs appended before it; when the wait runs out the envelope says so.

The unpaced equality with the embedded runtime (a Java producer at full speed, the sample and a larger
mixed scenario) is ``tests/congruence``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.kafka import OUTPUT_TOPICS, Kafka, WorkerProcess, java_produce, unique_prefix, wait_quiescent
from tests.support.services import fresh_postgres_url

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


def _doc(event_id: str, value: str) -> dict[str, object]:
    return {
        "event_id": event_id,
        "source": "vendor_docs",
        "source_type": "official",
        "document_id": event_id,
        "facts": [
            {
                "text": f"The upstream api rate limit is {value} rps.",
                "subject": "upstream api",
                "attribute": "rate limit",
                "value": value,
                "unit": "rps",
            }
        ],
    }


def _request(window: int = 1) -> dict[str, object]:
    return {
        "request_id": f"r-{window}",
        "session_id": "s",
        "window": window,
        "query": {"text": "What is the upstream api rate limit?"},
        "sub_queries": [{"id": "q1", "text": "upstream api rate limit"}],
        "fact_budget": 5,
        "policy": {"min_relevance": 0.05},
    }


def test_a_request_whose_inputs_are_not_ingested_in_time_is_served_with_the_lag(tmp_path: Path) -> None:
    """A 1 ms barrier cannot be met by 40 documents published just before the request: the envelope is
    served anyway, with CRP-Context-Fabric-Lag, and the metric counts it."""
    prefix = unique_prefix("br")
    db = fresh_postgres_url()
    kafka = Kafka(prefix)
    w = WorkerProcess(tmp_path, prefix, db, env={"CRP_BARRIER_WAIT": "0.001"}).start()
    try:
        w.wait_ready()
        kafka.tap(OUTPUT_TOPICS)
        kafka.produce("crp.documents", "vendor_docs", _doc("d0", "1000"))  # the fabric's first fact
        wait_quiescent(kafka, db, groups=("ingest", "arbiter"))
        java_produce(
            [(kafka.physical("crp.documents"), str(d["source"]), _json(d)) for d in _fillers(40)]
            + [(kafka.physical("crp.window.requests"), "s", _json(_request()))]
        )
        [env] = [
            r.json
            for r in kafka.wait_for(lambda rs: any(r.topic == "crp.envelopes" for r in rs), what="the envelope")
            if r.topic == "crp.envelopes"
        ]
        lag = env["headers"]["CRP-Context-Fabric-Lag"]
        assert isinstance(lag, int) and lag >= 0
        assert env["facts"]  # served, with what the fabric had
        assert w.metric("crp_barrier_timeouts_total") >= 1
    finally:
        w.stop()
        kafka.close()


def _fillers(n: int) -> list[dict[str, object]]:
    return [
        {
            "event_id": f"f{i}",
            "source": f"notes_{i}",
            "source_type": "community",
            "document_id": f"f{i}",
            "facts": [{"text": f"Backup note {i}: volume snapshots of shard {i} rotate weekly."}],
        }
        for i in range(n)
    ]


def test_a_request_waits_for_the_document_published_just_before_it(tmp_path: Path) -> None:
    """Produced together at full speed: the envelope holds the document appended before the request, and
    no timeout was needed (the header is absent)."""
    prefix = unique_prefix("bw")
    db = fresh_postgres_url()
    kafka = Kafka(prefix)
    w = WorkerProcess(tmp_path, prefix, db, env={"CRP_BARRIER_WAIT": "60"}).start()
    try:
        w.wait_ready()
        kafka.tap(("crp.envelopes",))
        java_produce(
            [(kafka.physical("crp.documents"), str(d["source"]), _json(d)) for d in _fillers(40)]
            + [
                (kafka.physical("crp.documents"), "vendor_docs", _json(_doc("d1", "1000"))),
                (kafka.physical("crp.window.requests"), "s", _json(_request())),
            ]
        )
        [env] = [
            r.json
            for r in kafka.wait_for(lambda rs: any(r.topic == "crp.envelopes" for r in rs), what="the envelope")
            if r.topic == "crp.envelopes"
        ]
        assert "CRP-Context-Fabric-Lag" not in env["headers"]
        texts = {f["text"] for f in env["facts"]}
        assert "The upstream api rate limit is 1000 rps." in texts  # the last document before the request
        assert w.metric("crp_barrier_timeouts_total") == 0
    finally:
        w.stop()
        kafka.close()


def test_the_sample_produced_with_no_gap_gives_the_embedded_envelope(tmp_path: Path) -> None:
    """The race the barrier closes, as a test: the 21 records of ops/sample/sample.jsonl produced at once by
    the Java producer (no gap at all); the envelope equals the embedded runtime's for the same input."""
    from crp_stream.replay_format import read_replay
    from tests.support.congruence import REPO, TRUST, normalise, run_embedded

    records = read_replay(REPO / "ops" / "sample" / "sample.jsonl")
    prefix = unique_prefix("bs")
    db = fresh_postgres_url()
    kafka = Kafka(prefix)
    # the default embedder, as the sample runs (the hashing one passes no fact through the gate)
    w = WorkerProcess(
        tmp_path, prefix, db, embedder="default", env={"CRP_TRUST": TRUST, "CRP_BARRIER_WAIT": "60"}
    ).start()
    try:
        w.wait_ready(timeout=180.0)
        kafka.tap(("crp.envelopes",))
        sent = java_produce([(kafka.physical(t), k, raw) for t, k, _ts, raw in records])
        stamps = [ts * 1000 for _p, _o, ts in sent]
        [env] = [
            r
            for r in kafka.wait_for(lambda rs: any(r.topic == "crp.envelopes" for r in rs), what="the envelope")
            if r.topic == "crp.envelopes"
        ]
        assert w.metric("crp_barrier_timeouts_total") == 0
    finally:
        w.stop()
        kafka.close()
    embedded = [o for o in run_embedded(records, stamps, tmp_path, embedder="default") if o[1] == "crp.envelopes"]
    assert [normalise((0, "crp.envelopes", env.key, env.value), stamps)] == [normalise(o, stamps) for o in embedded]
    assert env.json["facts"]


def _json(value: dict[str, object]) -> bytes:
    import json

    return json.dumps(value, separators=(",", ":")).encode()


def test_requests_of_many_sessions_released_together_share_one_transaction(tmp_path: Path) -> None:
    """Thirty sessions' requests queued behind forty documents are released as the barrier is met:
    each gets its own envelope, and they are applied in fewer fabric transactions than requests."""
    prefix = unique_prefix("bb")
    db = fresh_postgres_url()
    kafka = Kafka(prefix)
    w = WorkerProcess(tmp_path, prefix, db, env={"CRP_BARRIER_WAIT": "60"}).start()
    try:
        w.wait_ready()
        kafka.tap(("crp.envelopes",))
        sessions = [f"s{i:02d}" for i in range(30)]
        requests = [{**_request(), "request_id": f"r-{s}", "session_id": s} for s in sessions]
        java_produce(
            [(kafka.physical("crp.documents"), str(d["source"]), _json(d)) for d in _fillers(40)]
            + [(kafka.physical("crp.documents"), "vendor_docs", _json(_doc("d1", "1000")))]
            + [(kafka.physical("crp.window.requests"), str(r["session_id"]), _json(r)) for r in requests]
        )
        got = [
            r.json
            for r in kafka.wait_for(
                lambda rs: sum(r.topic == "crp.envelopes" for r in rs) >= len(sessions), what="30 envelopes"
            )
            if r.topic == "crp.envelopes"
        ]
        assert sorted(e["request_id"] for e in got) == sorted(f"r-{s}" for s in sessions)
        for env in got:
            assert "The upstream api rate limit is 1000 rps." in {f["text"] for f in env["facts"]}
        transactions = w.metric("crp_fabric_thread_seconds_count", group="retrieval")
        assert 1 <= transactions < len(sessions)
    finally:
        w.stop()
        kafka.close()
