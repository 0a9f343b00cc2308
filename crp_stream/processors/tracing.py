"""OpenTelemetry, an optional extra (``pip install crp-stream[otel]``): a span per handler batch, and the
W3C trace context carried from each input record to every record it causes.

``tracing`` (setting ``CRP_TRACING``): ``off`` (the default) adds nothing; ``on`` needs the extra;
``auto`` is on when it is installed. With it on, every output carries a ``traceparent`` with its
input's trace id (and ``tracestate``) and the id of the span of the batch that handled the input
(``core.trace_context``). An input without a valid ``traceparent`` gets a trace id derived from its
content, never a random one. The span is named after the handler's group, a child of the batch's first
input and linked to every input of the batch. Spans go to the process's tracer provider (the SDK's,
set by the application or ``install_provider``; without one the API records nothing and the input's
parent span id is passed on).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from crp_stream.config import ConfigError, Settings
from crp_stream.core import trace_context as tc
from crp_stream.processors.base import Output, Record

_provider: Any = None  # a TracerProvider set by ``use_provider`` (tests, an embedding application)


@functools.cache
def available() -> bool:
    """Whether the ``otel`` extra (opentelemetry-api) is installed."""
    return importlib.util.find_spec("opentelemetry") is not None


def enabled(settings: Settings) -> bool:
    """Tracing is on for these settings; ``on`` without the extra is a configuration error."""
    mode = settings.tracing
    if mode == "off":
        return False
    if not available():
        if mode == "on":
            raise ConfigError("tracing: on needs the otel extra (pip install 'crp-stream[otel]')")
        return False
    return True


def use_provider(provider: Any) -> None:
    """Send spans to ``provider`` (an ``opentelemetry.sdk.trace.TracerProvider``) instead of the global one."""
    global _provider
    _provider = provider


def install_provider(service: str = "crp-stream") -> None:
    """A process that starts tracing with no provider of its own gets the SDK's (if installed): spans
    then have ids, and an exporter configured by OTEL_* variables (``opentelemetry-instrument``) or by
    the application receives them."""
    from opentelemetry import trace

    if type(trace.get_tracer_provider()).__name__ != "ProxyTracerProvider":
        return  # the application set one
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        return
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider(resource=Resource.create({"service.name": service})))


def _span_context(parent: tc.TraceParent, state: str | None) -> Any:
    from opentelemetry.trace import SpanContext, TraceFlags, TraceState

    return SpanContext(
        int(parent.trace_id, 16),
        int(parent.span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(int(parent.flags, 16)),
        trace_state=TraceState.from_header([state]) if state else None,
    )


def _parents(records: Sequence[Record]) -> list[tuple[tc.TraceParent, str | None]]:
    out = []
    for r in records:
        parent, state = tc.record_trace(r.headers)
        out.append((parent, state) if parent is not None else (tc.derived_trace_parent(r.topic, r.key, r.value), None))
    return out


@contextmanager
def batch_span(name: str, records: Sequence[Record]) -> Iterator[str | None]:
    """One span for a handler's batch of ``records``: yields its span id (hex), or None when the
    tracer records nothing."""
    from opentelemetry import trace
    from opentelemetry.trace import Link, NonRecordingSpan, SpanKind

    contexts = [_span_context(p, s) for p, s in _parents(records)]
    parent_ctx = trace.set_span_in_context(NonRecordingSpan(contexts[0]))
    tracer = trace.get_tracer("crp_stream", tracer_provider=_provider)
    links = [Link(c) for c in contexts]
    attrs: dict[str, Any] = {
        "messaging.batch.message_count": len(records),
        "messaging.destination.name": records[0].topic,
    }
    with tracer.start_as_current_span(
        name, context=parent_ctx, kind=SpanKind.CONSUMER, links=links, attributes=attrs
    ) as span:
        ctx = span.get_span_context()
        yield f"{ctx.span_id:016x}" if ctx.is_valid else None


def stamp(outputs: list[list[Output]], records: Sequence[Record], span_id: str | None) -> list[list[Output]]:
    """Each record's outputs with the trace headers of that record (``core.trace_context``)."""
    stamped = []
    for outs, (parent, state) in zip(outputs, _parents(records), strict=False):
        headers = tc.output_trace_headers(parent, span_id, state)
        stamped.append([o._replace(headers=tc.without_trace(o.headers) + headers) for o in outs])
    return stamped


def inject(headers: Sequence[tuple[str, bytes]] = ()) -> tuple[tuple[str, bytes], ...]:
    """``headers`` with the current span's trace context (a producer's side; no-op without the extra)."""
    if not available():
        return tuple(headers)
    from opentelemetry.propagate import get_global_textmap

    carrier: dict[str, str] = {}
    get_global_textmap().inject(carrier)
    extra = tuple((k, v.encode()) for k, v in sorted(carrier.items()) if k in (tc.TRACEPARENT, tc.TRACESTATE))
    return (*tc.without_trace(headers), *extra) if extra else tuple(headers)


def extract(headers: Sequence[tuple[str, bytes]]) -> Any:
    """The OpenTelemetry context of a record's trace headers (a consumer's side), or None."""
    if not available():
        return None
    from opentelemetry.propagate import get_global_textmap

    carrier = {k: v.decode("utf-8", "replace") for k, v in headers if k in (tc.TRACEPARENT, tc.TRACESTATE)}
    return get_global_textmap().extract(carrier)


__all__ = ["available", "batch_span", "enabled", "extract", "inject", "install_provider", "stamp", "use_provider"]
