"""W3C Trace Context headers carried from an input record to the records it causes.

Pure: the header values are parsed and written here; spans are the tracing module's
(``processors/tracing.py``), and only when the ``otel`` extra is installed and tracing is on.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import NamedTuple

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_MAX_TRACESTATE = 512  # W3C §3.3.1.1: at least 512 characters must be propagated; longer may be dropped

Headers = Sequence[tuple[str, bytes]]


class TraceParent(NamedTuple):
    trace_id: str  # 32 lowercase hex digits, not all zero
    span_id: str  # 16 lowercase hex digits, not all zero: the parent span
    flags: str  # 2 hex digits; 01 = sampled


def parse_traceparent(value: bytes | str) -> TraceParent | None:
    """W3C Trace Context §3.2: a ``traceparent`` value, or None when it is not a valid one (version
    ff, an all-zero id, bad hex or length). A future version's extra fields are ignored (§3.2.4)."""
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    m = _TRACEPARENT.match(text.strip())
    if m is None:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return None
    return TraceParent(trace_id, span_id, flags)


def format_traceparent(tp: TraceParent) -> str:
    """W3C Trace Context §3.2: version 00."""
    return f"00-{tp.trace_id}-{tp.span_id}-{tp.flags}"


def derived_trace_parent(topic: str, key: str | None, value: bytes) -> TraceParent:
    """The trace context of an input that came without one: derived from the record's content, so the
    same input gives the same trace id on either runtime and on a replay (never random)."""
    digest = hashlib.sha256(b"\0".join([b"crp-trace", topic.encode(), (key or "").encode(), value])).hexdigest()
    trace_id, span_id = digest[:32], digest[32:48]
    if set(trace_id) == {"0"} or set(span_id) == {"0"}:  # a 2^-64 case: still a valid id
        trace_id, span_id = "1" + trace_id[1:], "1" + span_id[1:]
    return TraceParent(trace_id, span_id, "01")


def record_trace(headers: Headers) -> tuple[TraceParent | None, str | None]:
    """A record's valid ``traceparent`` and its ``tracestate`` (only beside a valid parent, §3.3)."""
    parent: TraceParent | None = None
    state: str | None = None
    for name, value in headers:
        if name == TRACEPARENT and parent is None:
            parent = parse_traceparent(value)
        elif name == TRACESTATE and state is None:
            state = value.decode("utf-8", "replace")[:_MAX_TRACESTATE]
    return parent, (state if parent is not None else None)


def output_trace_headers(parent: TraceParent, span_id: str | None, state: str | None) -> tuple[tuple[str, bytes], ...]:
    """The headers of a record caused by an input of trace ``parent``, processed in span ``span_id``
    (None: no span was recorded, the input's parent is passed on): the same trace id and flags."""
    tp = parent._replace(span_id=span_id) if span_id else parent
    out: tuple[tuple[str, bytes], ...] = ((TRACEPARENT, format_traceparent(tp).encode("ascii")),)
    if state:
        out += ((TRACESTATE, state.encode("utf-8")),)
    return out


def without_trace(headers: Headers) -> tuple[tuple[str, bytes], ...]:
    """``headers`` less any trace context (an output's own replaces its input's)."""
    return tuple((k, v) for k, v in headers if k not in (TRACEPARENT, TRACESTATE))


__all__ = [
    "TRACEPARENT",
    "TRACESTATE",
    "TraceParent",
    "derived_trace_parent",
    "format_traceparent",
    "output_trace_headers",
    "parse_traceparent",
    "record_trace",
    "without_trace",
]
