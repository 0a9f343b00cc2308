"""``crp-stream reembed`` beside a running Kafka worker (real broker, PostgreSQL, Qdrant server): the
worker takes up the switch at its next batch, without a restart; a session started before finishes
on the old model's collection, a new session uses the new one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from crp_stream import cli
from crp_stream.fabric.embedders.port import make_embedder
from crp_stream.fabric.fabric import open_vector_index
from crp_stream.fabric.models import collection_spec
from crp_stream.fabric.sql.db import make_engine
from tests.support.kafka import Kafka, WorkerProcess, unique_prefix
from tests.support.qdrant import drop, fresh_spec
from tests.support.services import fresh_postgres_url

pytestmark = [pytest.mark.kafka, pytest.mark.postgres, pytest.mark.qdrant]

QUERY = "How many requests per second does the API allow?"
TEXT = (
    "The API allows 1000 requests per second per tenant. Rate limits reset every minute. "
    "Tokens expire after thirty days without renewal."
)


def _request(session: str, window: int) -> dict[str, Any]:
    value: dict[str, Any] = {
        "request_id": f"{session}-w{window}",
        "session_id": session,
        "window": window,
        "query": {"text": QUERY},
        "fact_budget": 3,
        "policy": {"graph_retrieval": "off", "min_relevance": 0.05},
    }
    if window == 1:
        value["max_windows"] = 3
        value["sub_queries"] = [{"id": "a", "text": QUERY, "label": "A"}]
    return value


REPORT: dict[str, Any] = {"session_id": "old", "window": 1, "addressed": [], "output_text": "", "completeness": 0.2}


def _reported(args: list[str], session: str, window: int) -> bool:
    """The worker applied the report: the session row counts it (it emits no record of its own)."""
    engine = make_engine(args[1])
    try:
        with engine.connect() as conn:
            n = conn.execute(text("SELECT window_count FROM sessions WHERE session_id = :s"), {"s": session}).scalar()
    finally:
        engine.dispose()
    return n is not None and int(n) >= window


def _cosine(spec: str, text: str) -> float:
    q, f = make_embedder(spec).embed([QUERY, text])
    return float(np.dot(q, f) / (np.linalg.norm(q) * np.linalg.norm(f)))


def _envelope(k: Kafka, request_id: str) -> dict[str, Any]:
    recs = k.wait_for(
        lambda rs: any(r.topic == "crp.envelopes" and r.json.get("request_id") == request_id for r in rs),
        what=f"the envelope of {request_id}",
    )
    env: dict[str, Any] = next(
        r.json for r in recs if r.topic == "crp.envelopes" and r.json.get("request_id") == request_id
    )
    return env


def _searched(env: dict[str, Any], spec: str) -> None:
    assert env["facts"], env
    for f in env["facts"]:
        assert f["relevance"] == pytest.approx(_cosine(spec, f["text"]), abs=1e-5)


def test_a_running_worker_follows_the_switch(tmp_path: Path) -> None:
    prefix, db, qdrant = unique_prefix("re"), fresh_postgres_url(), fresh_spec(tag="reembed")
    kafka = Kafka(prefix)
    w = WorkerProcess(tmp_path, prefix, db, qdrant=qdrant, embedder="hashing").start()
    new_store = ""
    try:
        w.wait_ready()
        kafka.tap()
        kafka.produce(
            "crp.documents",
            "vendor_docs",
            {"event_id": "d1", "source": "vendor_docs", "source_type": "official", "text": TEXT},
        )
        kafka.produce("crp.window.requests", "old", _request("old", 1))
        _searched(_envelope(kafka, "old-w1"), "hashing")

        args = ["--database", db, "--qdrant", qdrant, "--data", str(tmp_path / "cli")]
        assert cli.main(["reembed", *args, "--embedder", "hashing:256", "--yes", "--from", "hashing"]) == 0

        # the worker, not restarted: the old session on the old collection, a new one on the new
        kafka.produce(
            "crp.window.reports",
            "old",
            {"session_id": "old", "window": 1, "addressed": [], "output_text": "", "completeness": 0.2},
        )
        kafka.produce("crp.window.requests", "old", _request("old", 2))
        _searched(_envelope(kafka, "old-w2"), "hashing")
        kafka.produce("crp.window.requests", "new", _request("new", 1))
        _searched(_envelope(kafka, "new-w1"), "hashing:256")
        kafka.produce(
            "crp.documents",
            "vendor_docs",
            {
                "event_id": "d2",
                "source": "vendor_docs",
                "source_type": "official",
                "text": "Webhooks retry five times with backoff.",
            },
        )
        kafka.wait_for(
            lambda rs: (
                any(r.topic == "crp.facts" and r.json.get("origin_event_id") == "d2" for r in rs)
                or any(r.topic == "crp.deadletter" for r in rs)
            ),
            what="the fact of d2",
        )
        assert not [r for r in kafka.snapshot("crp.deadletter")], w.log_tail()
        assert w.alive()
        new_store = collection_spec(qdrant, "hashing-256", "hashing-384")

        # retire the old model: its collection is dropped, and the worker rejects its session's next window
        kafka.produce("crp.window.reports", "old", {**REPORT, "window": 2})
        kafka.wait_for(lambda rs: _reported(args, "old", 2), what="the report of window 2")
        assert cli.main(["reembed", *args, "--finish", "--yes"]) == 0
        old_store = open_vector_index(qdrant)
        try:
            assert old_store.dim is None  # the collection is gone
        finally:
            old_store.close()
        kafka.produce("crp.window.requests", "old", _request("old", 3))
        recs = kafka.wait_for(lambda rs: any(r.topic == "crp.deadletter" for r in rs), what="the rejection")
        (dead,) = [r.json for r in recs if r.topic == "crp.deadletter"]
        assert "retired by a reembed" in dead["reason"]
        kafka.produce("crp.window.reports", "new", {**REPORT, "session_id": "new"})
        kafka.produce("crp.window.requests", "new", _request("new", 2))
        _searched(_envelope(kafka, "new-w2"), "hashing:256")
    finally:
        w.stop()
        kafka.close()
        drop(qdrant)
        if new_store:
            drop(new_store)
