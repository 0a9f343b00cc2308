"""``decode_input``'s msgspec path on the changelog's own records (events/codec_fast.decode_fast):
for any bytes on ``crp.facts`` it gives the pydantic path's event, or the pydantic path's reason."""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream import events
from crp_stream.events.codec import parse_json, validate_value
from crp_stream.events.codec_fast import decode_fast
from crp_stream.events.common import format_time
from crp_stream.events.topics import topic_spec

TOPIC = "crp.facts"
MODEL = topic_spec(TOPIC).models[0]  # type: ignore[union-attr]

RECORDED: dict[str, Any] = {
    "type": "FactRecorded",
    "fact_id": "f1",
    "source": "field_telemetry",
    "source_type": "telemetry",
    "trust": 0.4,
    "epoch": "2026-01-01T00:00:05.000000Z",
    "modified_at": "2026-01-01T00:00:05.000000Z",
    "ttl": "none",
    "text": "The api 3 limit is 250 rps.",
    "importance": 1.0,
    "subject": "api 3",
    "attribute": "limit",
    "value": "250",
    "unit": "rps",
    "status": "active",
    "origin_event_id": "f1",
}
CHANGED: dict[str, Any] = {
    "type": "FactStatusChanged",
    "fact_id": "f1",
    "status": "stale",
    "reason": "STALE_HIGH_TRUST: '250 rps' is fresher",
    "at": "2026-01-01T00:00:05.000000Z",
    "cause_id": "c1",
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**62, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            "none",
            "P30D",
            "-P1D",
            "active",
            "stale",
            "telemetry",
            "FactRecorded",
            "FactStatusChanged",
            "2026-02-31T00:00:00.000000Z",
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00.000000+01:00",
            "2026-01-01T00:00:00",
            "x" * 300,
            "y" * 5000,
            "\x00",
            "\ud800",
            "a\\u0000",
            "{[",
            '"type":"FactRecorded"',
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


def outcome(raw: bytes, fast_first: bool) -> tuple[str, Any]:
    """("event", its type, bytes, fields set) or ("rejected", reason)."""
    try:
        event = events.decode_input(TOPIC, raw) if fast_first else validate_value(TOPIC, parse_json(raw))
    except events.Rejected as exc:
        return ("rejected", exc.reason)
    return ("event", (type(event).__name__, events.encode(event), event.model_fields_set, event.model_dump()))


def serialise(data: dict[str, Any], style: int) -> bytes:
    if style == 0:  # the canonical encoder's form (the fast path's)
        text = json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    elif style == 1:  # unsorted, NaN and Infinity literals and all
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    elif style == 2:  # escapes
        text = json.dumps(data, separators=(",", ":"))
    else:  # spaces: no marker
        text = json.dumps(data)
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=600, deadline=None)
@given(
    base=st.sampled_from([RECORDED, CHANGED]),
    drop=st.sets(st.sampled_from(sorted({*RECORDED, *CHANGED}))),
    changes=st.dictionaries(st.sampled_from(sorted({*RECORDED, *CHANGED, "extra", "x"})), values, max_size=4),
    style=st.integers(0, 3),
    splice=st.one_of(st.none(), st.tuples(st.integers(0, 10_000), st.binary(max_size=3), st.integers(0, 3))),
)
def test_fast_path_gives_the_full_paths_event_or_reason(
    base: dict[str, Any],
    drop: set[str],
    changes: dict[str, Any],
    style: int,
    splice: tuple[int, bytes, int] | None,
) -> None:
    data = {k: v for k, v in base.items() if k not in drop}
    data.update(changes)
    raw = serialise(data, style)
    if splice is not None:  # a few bytes replaced: broken syntax, broken UTF-8, a stray bracket
        at, insert, cut = splice
        at %= len(raw) + 1
        raw = raw[:at] + insert + raw[at + cut :]
    assert outcome(raw, fast_first=True) == outcome(raw, fast_first=False)


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps(RECORDED, separators=(",", ":")).encode(),
        json.dumps(CHANGED, separators=(",", ":")).encode(),
        json.dumps({**RECORDED, "trust": 1}, separators=(",", ":")).encode(),  # an int for a float
        json.dumps(RECORDED, separators=(",", ":"))
        .replace('"status":"active"', '"status":"active","status":"stale"')
        .encode(),
        # more brackets than the nesting limit, in strings only: one level deep
        json.dumps({**RECORDED, "text": "{[" * 40}, separators=(",", ":")).encode(),
        json.dumps({**RECORDED, "text": "caf\u00e9 \ud83d\ude00"}, separators=(",", ":")).encode(),  # escapes
    ],
)
def test_canonical_records_take_the_fast_path(raw: bytes) -> None:
    fast = decode_fast(MODEL, raw, 1 << 20, 1000)
    assert fast is not None
    full = validate_value(TOPIC, parse_json(raw))
    assert fast == full and events.encode(fast) == events.encode(full)
    assert fast.model_fields_set == full.model_fields_set


@pytest.mark.parametrize(
    "raw",
    [
        # unknown fields: the models keep them, the Structs refuse them
        json.dumps({**RECORDED, "x": {"a": [1, 2.5, None]}}, separators=(",", ":")).encode(),
        # a repeated key whose first value is of the wrong type (the last one counts)
        json.dumps(RECORDED, separators=(",", ":"))
        .replace('"status":"active"', '"status":' + "[" * 40 + "]" * 40 + ',"status":"active"')
        .encode(),
    ],
)
def test_valid_records_left_to_the_pydantic_path(raw: bytes) -> None:
    assert decode_fast(MODEL, raw, 1 << 20, 1000) is None
    assert outcome(raw, fast_first=True) == outcome(raw, fast_first=False)
    assert outcome(raw, fast_first=True)[0] == "event"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (json.dumps({**RECORDED, "x": float("nan")}, separators=(",", ":")).encode(), "x: value is NaN"),
        (json.dumps({**RECORDED, "x": 1e999}, separators=(",", ":")).encode(), "x: value is infinite"),
        (
            json.dumps({**RECORDED, "x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}).encode(),
            "nesting",
        ),
        (json.dumps({k: v for k, v in RECORDED.items() if k != "type"}, separators=(",", ":")).encode(), "type"),
        (json.dumps({**RECORDED, "text": "a\ud800"}, separators=(",", ":")).encode(), "surrogate"),
        (json.dumps({**RECORDED, "value": True}, separators=(",", ":")).encode(), "value"),
    ],
)
def test_what_the_fast_path_leaves_to_the_full_path(raw: bytes, reason: str) -> None:
    assert decode_fast(MODEL, raw, 1 << 20, 1000) is None
    with pytest.raises(events.Rejected, match=reason):
        events.decode_input(TOPIC, raw)
    assert decode_fast(MODEL, json.dumps(RECORDED, separators=(",", ":")).encode(), 10, 1000) is None  # over the size


times = st.datetimes(timezones=st.just(UTC)).map(format_time)
labels = st.text(min_size=1, max_size=20)
extras = st.dictionaries(st.text(min_size=1, max_size=5).filter(lambda k: k not in RECORDED), values, max_size=2)


@settings(max_examples=400, deadline=None)
@given(
    recorded=st.fixed_dictionaries(
        {
            "fact_id": labels,
            "source": labels,
            "source_type": st.sampled_from(["official", "telemetry", "community", "news"]),
            "trust": st.floats(0.0, 1.0) | st.integers(0, 1),
            "epoch": times,
            "modified_at": times,
            "ttl": st.sampled_from(["none", "P30D", "PT6H", "P1Y2M"]),
            "text": st.text(min_size=1, max_size=40),
            "importance": st.floats(0.0, 1.0),
            "status": st.sampled_from(["active", "stale", "quarantined", "superseded", "expired"]),
            "origin_event_id": labels,
        },
        optional={
            "subject": labels,
            "attribute": labels,
            "value": st.text(max_size=10) | st.integers(-(2**63) + 1, 2**63 - 1) | st.floats(allow_nan=False),
            "unit": labels | st.none(),
        },
    ),
    changed=st.fixed_dictionaries(
        {
            "fact_id": labels,
            "status": st.sampled_from(["active", "stale"]),
            "reason": st.text(max_size=30),
            "at": times,
        },
        optional={"cause_id": labels | st.none()},
    ),
    which=st.booleans(),
    extra=extras,
)
def test_valid_changelog_records_give_the_full_paths_event(
    recorded: dict[str, Any], changed: dict[str, Any], which: bool, extra: dict[str, Any]
) -> None:
    data = {"type": "FactRecorded", **recorded} if which else {"type": "FactStatusChanged", **changed}
    data.update(extra)
    raw = serialise(data, 0)
    got, want = outcome(raw, fast_first=True), outcome(raw, fast_first=False)
    assert got == want
    if want[0] == "event" and not extra:
        assert decode_fast(MODEL, raw, 1 << 20, 1000) is not None  # taken, not merely agreeing
