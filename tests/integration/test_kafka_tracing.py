"""Trace context on the real broker: a worker with ``CRP_TRACING=on`` carries an input's
``traceparent`` (a record header) to the facts, verdict records, audit events and envelope it
causes; a worker with tracing off adds no header."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from crp_stream.client import Client
from crp_stream.core import trace_context as tc
from tests.support.kafka import Consumed, Kafka, WorkerProcess, broker, unique_prefix
from tests.support.services import fresh_postgres_url

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

DOC_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
REQ_TRACE = "0af7651916cd43dd8448eb211c80319c"


def _tp(trace_id: str) -> list[tuple[str, bytes]]:
    return [("traceparent", f"00-{trace_id}-00f067aa0ba902b7-01".encode()), ("tracestate", b"congo=t61rcWkgMzE")]


def _doc(event_id: str, source: str, text: str) -> dict[str, str]:
    return {"event_id": event_id, "source": source, "source_type": "official", "text": text}


def _trace(r: Consumed) -> str | None:
    parent, _state = tc.record_trace(r.headers)
    return parent.trace_id if parent else None


def _run(tmp: Path, tracing: str) -> tuple[list[Consumed], list[Consumed]]:
    prefix = unique_prefix("tr")
    kafka = Kafka(prefix)
    w = WorkerProcess(tmp, prefix, fresh_postgres_url(), env={"CRP_TRACING": tracing}).start()
    try:
        w.wait_ready()
        kafka.tap()
        kafka.produce(
            "crp.documents",
            "vendor_a",
            _doc("d1", "vendor_a", "The API allows 1000 requests per second per tenant."),
            headers=_tp(DOC_TRACE),
        )
        kafka.produce(
            "crp.documents",
            "vendor_b",
            _doc("d2", "vendor_b", "The API allows 500 requests per second per tenant."),
            headers=_tp(DOC_TRACE),
        )
        kafka.produce("crp.documents", "vendor_a", b"{not json", headers=_tp(DOC_TRACE))
        kafka.wait_for(
            lambda rs: (
                any(r.topic == "crp.quarantine.candidates" for r in rs) and any(r.topic == "crp.deadletter" for r in rs)
            ),
            what="the arbiter's verdict and the dead letter",
        )
        kafka.produce(
            "crp.window.requests",
            "s1",
            {
                "request_id": "r1",
                "session_id": "s1",
                "window": 1,
                "query": {"text": "How many requests per second does the API allow?"},
                "sub_queries": [{"id": "a", "text": "API request rate"}],
                "fact_budget": 5,
            },
            headers=_tp(REQ_TRACE),
        )
        recs = kafka.wait_for(lambda rs: any(r.topic == "crp.envelopes" for r in rs), what="the envelope")
        docs = [r for r in recs if r.topic != "crp.envelopes"]
        return docs, [r for r in recs if r.topic == "crp.envelopes"]
    finally:
        w.stop()
        kafka.close()


def test_a_traced_worker_carries_the_trace_to_every_output(tmp_path: Path) -> None:
    docs, envelopes = _run(tmp_path, "on")
    topics = {r.topic for r in docs}
    assert {"crp.facts", "crp.quarantine.candidates", "crp.audit", "crp.deadletter"} <= topics, topics
    for r in docs:
        assert _trace(r) == DOC_TRACE, (r.topic, r.headers)
        assert dict(r.headers)["tracestate"] == b"congo=t61rcWkgMzE"
        assert r.crp_id  # beside the output's own id header
    (env,) = envelopes
    assert _trace(env) == REQ_TRACE
    # the parent is the worker's span (the SDK's provider, installed at start), not the producer's
    assert all(tc.record_trace(r.headers)[0].span_id != "00f067aa0ba902b7" for r in [*docs, env])  # type: ignore[union-attr]


def test_a_worker_with_tracing_off_adds_no_header(tmp_path: Path) -> None:
    docs, envelopes = _run(tmp_path, "off")
    assert docs and envelopes
    for r in [*docs, *envelopes]:
        assert _trace(r) is None and [k for k, _v in r.headers] == ["crp-id"], (r.topic, r.headers)


def test_the_client_injects_the_callers_span(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``crp_stream.client`` publishes inside the caller's span: the worker's outputs are in that trace."""
    prefix = unique_prefix("tc")
    kafka = Kafka(prefix)
    w = WorkerProcess(tmp_path, prefix, fresh_postgres_url(), env={"CRP_TRACING": "on"}).start()
    monkeypatch.setenv("CRP_BROKER", broker())
    monkeypatch.setenv("CRP_TOPIC_PREFIX", prefix)
    tracer = TracerProvider().get_tracer("test")
    try:
        w.wait_ready()
        kafka.tap()
        with Client() as crp, tracer.start_as_current_span("publisher") as span:
            crp.publish_document("vendor_a", "The API allows 1000 requests per second per tenant.")
            trace_id = f"{span.get_span_context().trace_id:032x}"
        recs = kafka.wait_for(lambda rs: any(r.topic == "crp.facts" for r in rs), what="the fact")
        facts = [r for r in recs if r.topic == "crp.facts"]
        assert facts and all(_trace(r) == trace_id for r in facts)
    finally:
        w.stop()
        kafka.close()
