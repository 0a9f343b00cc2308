"""A corpus of records for the codec: valid ones of every topic the msgspec path reads, and variants
of each (a field dropped, of a wrong type, out of range, over a limit; unknown fields; NaN and
infinity literals; bad vectors; deep nesting; bad UTF-8; bad times; too many facts), plus raw-byte
damage. ``corpus()`` yields ``(topic, raw bytes, max_facts)``."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

from tests.unit.events.test_events import doc, request
from tests.unit.events.test_events_fast import CHANGED, RECORDED

DOC, TEL, REQ, REP, CMD, FACTS = (
    "crp.documents",
    "crp.telemetry",
    "crp.window.requests",
    "crp.window.reports",
    "crp.operator.commands",
    "crp.facts",
)

TELEMETRY: dict[str, Any] = {
    "event_id": "t-1",
    "tenant": "acme",
    "source": "field_telemetry",
    "trust": 0.4,
    "observed_at": "2026-01-01T00:00:05.5+02:00",
    "subject": "billing API",
    "attribute": "rate limit",
    "value": 250,
    "unit": "rps",
    "text": "The billing API serves 250 rps.",
    "embedding": [0.5, -0.25, 1],
    "embedding_model": "m",
}
REQUEST = request(
    tenant="acme",
    query={"text": "billing API limit", "embedding": [0.1, 0.2, 0.3]},
    sub_queries=[
        {"id": "q1", "text": "limit", "label": "L", "embedding": [1, 0, 0], "expected_words": 200},
        {"id": "q2", "text": "history", "expected_words": ["rps", "burst"]},
    ],
    fact_budget=10,
    max_windows=3,
    fanout=2,
    policy={"graph_retrieval": "off", "max_hops": 3, "connector_budget": 0.5, "min_relevance": 0.2},
    embedding_model="m",
)
REPORT: dict[str, Any] = {
    "session_id": "s-1",
    "window": 2,
    "branch": 1,
    "addressed": [{"id": "q1", "depth": 0.7}, {"id": "q2", "words": 120, "text": "t", "embedding": [0.0, 1.0]}],
    "output_text": "The limit is 250 rps.",
    "completeness": 0.6,
    "safety_budget": 1,
    "embedding_model": "m",
}
COMMAND: dict[str, Any] = {
    "command_id": "c-1",
    "tenant": "default",
    "command": "forget",
    "target_id": "vendor_docs",
    "actor": "ops",
    "reason": "asked to",
}
DOC_TEXT: dict[str, Any] = {
    "type": "DocumentPublished",
    "event_id": "d-2",
    "source": "vendor_docs",
    "source_type": "official",
    "title": "Billing",
    "section": "Limits",
    "text": "The billing API allows 1000 requests per second. Bursts are allowed.",
}
BASES: list[tuple[str, dict[str, Any]]] = [
    (DOC, doc()),
    (DOC, DOC_TEXT),
    (DOC, request() | doc()),  # an unknown field
    (TEL, TELEMETRY),
    (REQ, request()),
    (REQ, REQUEST),
    (REP, REPORT),
    (CMD, COMMAND),
    (FACTS, RECORDED),
    (FACTS, RECORDED | {"tenant": "acme", "sealed": "k1:bm9uY2U=:ZGF0YQ==", "text": None, "trust": 1}),
    (FACTS, CHANGED),
    (FACTS, CHANGED | {"status": "forgotten", "cause_id": None}),
]

LONG = {n: "x" * n for n in (64, 65, 256, 257, 1024, 1025, 4096, 4097, 65_536, 65_537)}
TIMES = [
    "2026-01-01T00:00:00Z",
    "2026-01-01t00:00:00z",
    "2026-01-01 00:00:00.123456789+05:30",
    "2026-01-01T00:00:00",
    "2026-02-31T00:00:00.000000Z",
    "2026-01-01T24:00:00Z",
    "yesterday",
    "9999-12-31T23:59:59.999999-23:59",
]
SCALARS = [None, True, False, 0, -1, 1, 2, 1.5, -0.0, 0.5, 1e308, 2**63 - 1, 2**63, -(2**63), 2**64, 10**30]
STRINGS = ["", " ", "   ", "a", "\x00", "😀" * 257, "acme\n", "a b", "-acme", "P30D", "-P1D", "none", "PT", "P1W"]
WORDS = ["DocumentPublished", "FactRecorded", "official", "blog", "active", "forgotten", "on", "forget", "anchor"]
CONTAINERS: list[Any] = [[], {}, [1.0], [1, 2, 3], ["x"], [None], [[1.0]], {"text": "t"}, [{"id": "x", "text": "t"}]]
MUTANTS: list[Any] = [*SCALARS, *STRINGS, *WORDS, *TIMES, *LONG.values(), *CONTAINERS]
NUMBER_LITERALS = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e999", b"1" + b"0" * 400, b"1.0e-400", b"01"]


def paths(value: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every field and the first two items of every list, depth first."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*here, k)
            yield from paths(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:2]):
            yield (*here, i)
            yield from paths(v, (*here, i))


def patched(value: Any, path: tuple[Any, ...], new: Any, drop: bool = False) -> Any:
    out = copy.deepcopy(value)
    node = out
    for part in path[:-1]:
        node = node[part]
    if drop:
        del node[path[-1]]
    else:
        node[path[-1]] = new
    return out


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def field_variants(topic: str, base: dict[str, Any]) -> Iterator[bytes]:
    for path in paths(base):
        if isinstance(path[-1], str):
            yield dumps(patched(base, path, None, drop=True))
            for extra in ({"x": 1}, {"x": None}):  # an unknown field beside this one
                parent = patched(base, path, None, drop=True)
                node = parent
                for part in path[:-1]:
                    node = node[part]
                if isinstance(node, dict):
                    yield dumps(patched(base, (*path[:-1], "x"), extra["x"]))
        for new in MUTANTS:
            yield dumps(patched(base, path, new))
        marker = dumps(patched(base, path, "@N@"))
        for literal in NUMBER_LITERALS:
            yield marker.replace(b'"@N@"', literal)


def record_variants(topic: str, base: dict[str, Any]) -> Iterator[bytes]:
    raw = dumps(base)
    yield raw
    yield json.dumps(base).encode()  # \u escapes
    yield json.dumps(base, indent=2, sort_keys=True).encode()
    yield json.dumps(base, separators=(",", ":"), sort_keys=True).encode()
    yield b"\xef\xbb\xbf" + raw  # a byte-order mark
    yield raw + b" x"
    yield raw[:-1]
    yield raw.replace(b"{", b'{"type":null,', 1)
    yield raw.replace(b"{", b'{"type":5,', 1)
    yield raw.replace(b"{", b'{"type":"WindowRequested",', 1)
    yield raw.replace(b"{", b'{"x":"\\ud800",', 1)
    yield raw.replace(b"{", b'{"x":"\\udc00\\ud800",', 1)
    yield raw.replace(b"{", b'{"x":"\\ud83d\\ude00\\u0000",', 1)
    yield raw.replace(b"{", b'{"x":' + b"[" * 33 + b"]" * 33 + b",", 1)
    yield raw.replace(b"{", b'{"x":' + b'{"a":' * 40 + b"1" + b"}" * 40 + b",", 1)
    yield raw.replace(b"{", b'{"x":' + b"[" * 5000 + b"]" * 5000 + b",", 1)
    yield raw.replace(b"{", b'{"x":{"y":[1,{"z":NaN}]},', 1)
    for at in (1, len(raw) // 2, len(raw) - 2):
        yield raw[:at] + b"\xff" + raw[at:]
        yield raw[:at] + b"\xed\xa0\x80" + raw[at:]  # a surrogate written as UTF-8
        yield raw[:at] + b"\xc3" + raw[at + 1 :]
    for key in base:  # a repeated key: the last one counts
        name = json.dumps(key).encode()
        yield raw.replace(b"{", b"{" + name + b":[1],", 1)
        yield raw[:-1] + b"," + name + b':"again"}'


def corpus() -> Iterator[tuple[str, bytes, int]]:
    for topic, base in BASES:
        for raw in record_variants(topic, base):
            yield topic, raw, 1000
        for raw in field_variants(topic, base):
            yield topic, raw, 1000
    for value in (1, "x", None, [], [{}], True):  # not an object
        yield DOC, json.dumps(value).encode(), 1000
    many = doc(facts=[{"text": f"fact {i}"} for i in range(1001)])
    yield DOC, dumps(many), 1000
    yield DOC, dumps(doc(facts=[{"text": f"fact {i}"} for i in range(5)])), 4  # ``max_facts`` per decode
    yield DOC, dumps(doc(facts=[{"text": f"fact {i}"} for i in range(4)])), 4
    for n in (0, 1, 4096, 4097):  # vector dimensions
        yield TEL, dumps(TELEMETRY | {"embedding": [0.5] * n}), 1000
    yield REQ, dumps(REQUEST | {"sub_queries": [{"id": f"q{i}", "text": "t"} for i in range(257)]}), 1000
    yield REQ, dumps(REQUEST | {"sub_queries": [{"id": "q", "text": "t"}, {"id": "q", "text": "u"}]}), 1000
    yield REQ, dumps(REQUEST | {"window": 1, "sub_queries": []}), 1000
    yield REQ, dumps(REQUEST | {"window": 2, "sub_queries": None}), 1000
    yield REQ, dumps(REQUEST | {"embedding_model": None}), 1000
    yield REP, dumps(REPORT | {"addressed": [{"id": f"a{i}"} for i in range(1001)]}), 1000
    yield DOC, dumps(doc(embedding_model=None)), 1000
    yield DOC, dumps(doc(text="   ")), 1000
    yield DOC, dumps(doc(facts=None, text=None)), 1000
