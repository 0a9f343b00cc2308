"""Trace context through the embedded runtime: an input's ``traceparent`` reaches every record it
causes (facts, the arbiter's verdict records and audit events, the envelope), one span per handler batch;
with tracing off no header is added. The same on the real broker: ``test_kafka_tracing.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from crp_stream.core import trace_context as tc
from crp_stream.processors import tracing
from crp_stream.runtime.embedded.log import LogRecord
from crp_stream.testing import Pipeline

T0 = 1_767_225_600_000_000
DOC_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
REQ_TRACE = "0af7651916cd43dd8448eb211c80319c"
TEXTS = [
    "The API allows 1000 requests per second per tenant.",
    "The API allows 500 requests per second per tenant.",
    "Tokens expire after thirty days without renewal.",
]


def _tp(trace_id: str, span: str = "00f067aa0ba902b7") -> tuple[tuple[str, bytes], ...]:
    return (("traceparent", f"00-{trace_id}-{span}-01".encode()), ("tracestate", b"congo=t61rcWkgMzE"))


def doc(event_id: str, source: str, text: str) -> dict[str, Any]:
    return {"event_id": event_id, "source": source, "source_type": "official", "text": text}


REQUEST = {
    "request_id": "r1",
    "session_id": "s1",
    "window": 1,
    "query": {"text": "How many requests per second does the API allow?"},
    "sub_queries": [{"id": "a", "text": "API request rate"}],
    "fact_budget": 5,
}


def _trace_of(rec: LogRecord) -> tuple[str | None, str | None]:
    parent, state = tc.record_trace(rec.headers)
    return (parent.trace_id if parent else None), state


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield exporter
    finally:
        tracing.use_provider(None)


def test_an_inputs_trace_reaches_every_output_it_causes(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    with Pipeline.fresh(tmp_path, embedder="hashing", tracing="on") as p:
        caused = p.publish(
            "crp.documents", "vendor_a", doc("d1", "vendor_a", TEXTS[0]), ts_us=T0, headers=_tp(DOC_TRACE)
        )
        caused += p.publish(
            "crp.documents", "vendor_b", doc("d2", "vendor_b", TEXTS[1]), ts_us=T0 + 1, headers=_tp(DOC_TRACE)
        )
        topics = {r.topic for r in caused}
        # the facts (ingest), the arbiter's verdict on the conflict: a candidate and its audit event
        assert {"crp.facts", "crp.quarantine.candidates", "crp.audit"} <= topics, topics
        for r in caused:
            assert _trace_of(r) == (DOC_TRACE, "congo=t61rcWkgMzE"), (r.topic, r.headers)
        served = p.publish("crp.window.requests", "s1", REQUEST, ts_us=T0 + 2, headers=_tp(REQ_TRACE))
        assert "crp.envelopes" in {r.topic for r in served}
        for r in served:
            assert _trace_of(r)[0] == REQ_TRACE, (r.topic, r.headers)
        # a malformed input: its dead letter and its audit event too
        bad = p.publish("crp.documents", "vendor_a", b"{not json", ts_us=T0 + 3, headers=_tp(DOC_TRACE))
        assert {r.topic for r in bad} == {"crp.deadletter", "crp.audit"}
        assert all(_trace_of(r)[0] == DOC_TRACE for r in bad)
        # the stored log keeps the headers: a reader of the log sees them too
        stored = list(p.log.iter_topic(p.settings.topic("crp.envelopes")))
        assert stored and all(_trace_of(r)[0] == REQ_TRACE for r in stored)

    finished = spans.get_finished_spans()
    by_name: dict[str, list[Any]] = {}
    for s in finished:
        by_name.setdefault(s.name, []).append(s)
    assert set(by_name) >= {"ingest", "arbiter", "retrieval"}
    # one span per handler batch: a document's facts reach the arbiter as one run
    facts = [r for r in caused if r.topic == "crp.facts"]
    arbiter = by_name["arbiter"]
    assert sum(len(s.links) for s in arbiter) == len(facts)
    assert all(len(s.links) == s.attributes["messaging.batch.message_count"] for s in finished)
    (retrieval,) = by_name["retrieval"]
    assert f"{retrieval.context.trace_id:032x}" == REQ_TRACE
    (env,) = [r for r in served if r.topic == "crp.envelopes"]
    assert tc.record_trace(env.headers)[0].span_id == f"{retrieval.context.span_id:016x}"  # type: ignore[union-attr]
    # a fact's verdict descends from the ingest span: its parent is the span that emitted the fact
    ingest_ids = {f"{s.context.span_id:016x}" for s in by_name["ingest"]}
    assert {tc.record_trace(r.headers)[0].span_id for r in facts} <= ingest_ids  # type: ignore[union-attr]
    assert all(s.parent is not None and f"{s.parent.trace_id:032x}" == DOC_TRACE for s in arbiter)


def test_an_input_without_a_trace_gets_a_derived_one(tmp_path: Path) -> None:
    runs = []
    for n in range(2):
        with Pipeline.fresh(tmp_path / str(n), embedder="hashing", tracing="on") as p:
            caused = p.publish("crp.documents", "vendor_a", doc("d1", "vendor_a", TEXTS[2]), ts_us=T0)
            runs.append({_trace_of(r)[0] for r in caused})
    (trace_id,) = runs[0]
    assert runs[1] == {trace_id}  # the same input, the same trace id: derived, not random
    raw = b'{"event_id":"d1","source":"vendor_a","source_type":"official","text":"' + TEXTS[2].encode() + b'"}'
    assert trace_id == tc.derived_trace_parent("crp.documents", "vendor_a", raw).trace_id


def test_with_tracing_off_no_header_is_added(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    with Pipeline.fresh(tmp_path, embedder="hashing") as p:
        caused = p.publish(
            "crp.documents", "vendor_a", doc("d1", "vendor_a", TEXTS[0]), ts_us=T0, headers=_tp(DOC_TRACE)
        )
        caused += p.publish("crp.window.requests", "s1", REQUEST, ts_us=T0 + 1, headers=_tp(REQ_TRACE))
        assert caused
        assert all(_trace_of(r) == (None, None) for r in caused)
        assert all(not r.headers for r in caused)
    assert spans.get_finished_spans() == ()


@pytest.mark.parametrize("mode", ["on", "off"])
def test_an_internal_errors_dead_letter_carries_the_inputs_trace(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record its handler fails on every attempt is dead-lettered (``internal error in ingest``); with
    tracing on its dead letter and audit event carry the record's trace like any output, off: nothing."""
    with Pipeline.fresh(tmp_path, embedder="hashing", tracing=mode) as p:
        ingest = next(h for h in p.rt.handlers if h.group == "ingest")

        def fail(*_args: Any, **_kwargs: Any) -> None:
            raise RuntimeError("a bug this record triggers")

        for name in ("handle", "handle_batch"):
            if hasattr(ingest, name):
                monkeypatch.setattr(ingest, name, fail)
        dead = p.publish("crp.documents", "vendor_a", doc("d1", "vendor_a", TEXTS[0]), ts_us=T0, headers=_tp(DOC_TRACE))
        assert {r.topic for r in dead} == {"crp.deadletter", "crp.audit"}, [r.topic for r in dead]
        (letter,) = [r for r in dead if r.topic == "crp.deadletter"]
        assert "internal error in ingest: RuntimeError: a bug this record triggers" in letter.value.decode()
        wanted = (DOC_TRACE, "congo=t61rcWkgMzE") if mode == "on" else (None, None)
        assert all(_trace_of(r) == wanted for r in dead), [(r.topic, r.headers) for r in dead]
