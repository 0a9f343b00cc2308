"""W3C Trace Context headers (``core.trace_context``) and the OpenTelemetry glue (``processors.tracing``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from crp_stream.config import ConfigError, Settings, load_settings
from crp_stream.core import trace_context as tc
from crp_stream.processors import tracing
from crp_stream.processors.base import Output, Record

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_parse_and_format_round_trip() -> None:
    parsed = tc.parse_traceparent(TP.encode())
    assert parsed == tc.TraceParent("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "01")
    assert tc.format_traceparent(parsed) == TP


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  # no flags
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero span id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  # version 00 has no more fields
        "\udcff",
    ],
)
def test_invalid_traceparents_are_ignored(bad: str) -> None:
    assert tc.parse_traceparent(bad) is None


def test_a_future_version_keeps_its_known_fields() -> None:
    assert tc.parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more") is not None


def test_tracestate_travels_only_beside_a_valid_parent() -> None:
    assert tc.record_trace([("tracestate", b"vendor=1"), ("traceparent", TP.encode())]) == (
        tc.parse_traceparent(TP),
        "vendor=1",
    )
    assert tc.record_trace([("tracestate", b"vendor=1"), ("traceparent", b"junk")]) == (None, None)


def test_derived_trace_ids_are_deterministic_and_differ_by_content() -> None:
    a = tc.derived_trace_parent("crp.documents", "k", b"v1")
    assert a == tc.derived_trace_parent("crp.documents", "k", b"v1")
    assert a.trace_id != tc.derived_trace_parent("crp.documents", "k", b"v2").trace_id
    assert tc.parse_traceparent(tc.format_traceparent(a)) == a


def test_output_headers_keep_the_trace_and_name_the_span() -> None:
    parent = tc.parse_traceparent(TP)
    assert parent is not None
    headers = dict(tc.output_trace_headers(parent, "1111111111111111", "v=1"))
    assert headers == {"traceparent": b"00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01", "tracestate": b"v=1"}
    assert dict(tc.output_trace_headers(parent, None, None)) == {"traceparent": TP.encode()}


def test_settings_switch() -> None:
    assert load_settings(env={}).tracing == "off"
    assert load_settings(env={"CRP_TRACING": "On"}).tracing == "on"
    with pytest.raises(ConfigError, match="CRP_TRACING"):
        load_settings(env={"CRP_TRACING": "maybe"})
    assert not tracing.enabled(Settings())
    assert tracing.enabled(Settings(tracing="auto"))  # the extra is installed in the test environment


def test_on_without_the_extra_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "available", lambda: False)
    with pytest.raises(ConfigError, match="otel extra"):
        tracing.enabled(Settings(tracing="on"))
    assert not tracing.enabled(Settings(tracing="auto"))
    assert tracing.inject((("a", b"1"),)) == (("a", b"1"),)  # no header added
    assert tracing.extract([("traceparent", TP.encode())]) is None


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


def test_inject_extract_round_trip(spans: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("test", tracer_provider=tracing._provider)
    with tracer.start_as_current_span("producer") as span:
        headers = tracing.inject((("crp-signature", b"s"),))
        sent = span.get_span_context()
    assert headers[0] == ("crp-signature", b"s")
    parent = tc.parse_traceparent(dict(headers)["traceparent"])
    assert parent is not None
    assert (int(parent.trace_id, 16), int(parent.span_id, 16)) == (sent.trace_id, sent.span_id)
    got = trace.get_current_span(tracing.extract(headers)).get_span_context()
    assert (got.trace_id, got.span_id, got.is_remote) == (sent.trace_id, sent.span_id, True)


def test_one_span_per_batch_linked_to_each_record(spans: InMemorySpanExporter) -> None:
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    records = [
        Record("crp.documents", 0, 0, "k", b"a", 1, (("traceparent", TP.encode()),)),
        Record("crp.documents", 0, 1, "k", b"b", 2, (("traceparent", other.encode()), ("tracestate", b"x=1"))),
        Record("crp.documents", 0, 2, "k", b"c", 3),
    ]
    with tracing.batch_span("ingest", records) as span_id:
        pass
    (span,) = spans.get_finished_spans()
    assert span.name == "ingest" and span_id == f"{span.context.span_id:016x}"
    assert f"{span.context.trace_id:032x}" == TP.split("-")[1]  # a child of the batch's first input
    assert [f"{link.context.trace_id:032x}" for link in span.links] == [
        TP.split("-")[1],
        other.split("-")[1],
        tc.derived_trace_parent("crp.documents", "k", b"c").trace_id,
    ]
    outs = [[Output("crp.facts", "f", b"{}", "r1")], [Output("crp.facts", "f", b"{}", "r2")], []]
    stamped = tracing.stamp(outs, records, span_id)
    assert dict(stamped[0][0].headers)["traceparent"] == f"00-{TP.split('-')[1]}-{span_id}-01".encode()
    assert dict(stamped[1][0].headers) == {
        "traceparent": f"00-{other.split('-')[1]}-{span_id}-01".encode(),
        "tracestate": b"x=1",
    }
