"""``envelope_bytes.direct_bytes`` writes with msgspec where its output is the stdlib encoder's
(``codec._CANONICAL``), byte for byte: every envelope here is written both ways and compared."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream.events import envelope_bytes as eb
from crp_stream.events.codec import _CANONICAL
from tests.support.envelopes import envelope


def _valid_fact(k: int) -> dict[str, Any]:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=7 * k)
    return {
        "fact_id": f"f{k}",
        "text": f'fact {k}: "quoted" é',
        "role": "anchor",
        "score": 0.1 * k,
        "relevance": -0.0,
        "novelty": 1.0,
        "recency": 0.5,
        "authority": 0.64,
        "source": "src",
        "source_type": "official",
        "epoch": at,
        "modified_at": at,
        "support": 1 + k,
    }


# magnitudes on both sides of where Python and msgspec write floats alike (1e-4 and 1e16)
edge_floats = st.sampled_from(
    [0.0, -0.0, 1e-4, 9.999999999999999e-05, 1e-5, 5e-324, 1e16, 9999999999999998.0, 1e22, -1e300, 0.1, 1 / 3]
)


def _stdlib(env: dict[str, Any]) -> bytes | None:
    """``direct_bytes`` as the stdlib encoder alone writes it."""
    with mock.patch.object(eb, "_floats_ok", lambda _floats: False):
        return eb.direct_bytes(env)


def _check(env: dict[str, Any]) -> bytes | None:
    got = eb.direct_bytes(env)
    assert got == _stdlib(env)
    if got is not None:
        assert got == _CANONICAL.encode(json.loads(got)).encode("utf-8")
    return got


@settings(max_examples=1500, deadline=None)
@given(valid=envelope)
def test_generated_envelopes(valid: dict[str, Any]) -> None:
    assert _check(valid) is not None


@settings(max_examples=500, deadline=None)
@given(
    valid=envelope,
    values=st.lists(edge_floats, min_size=5, max_size=5),
    header=edge_floats,
    text=st.text(min_size=1, max_size=40),
)
def test_floats_and_texts_at_the_edges(valid: dict[str, Any], values: list[float], header: float, text: str) -> None:
    facts = [{**f, **dict(zip(eb._FACT_FLOATS, values, strict=True)), "text": text} for f in valid["facts"]]
    env = {**valid, "facts": facts, "headers": {**valid["headers"], "CRP-X": header, text: text}}
    _check(env)


def test_every_code_point_of_a_text() -> None:
    chars = "".join(chr(c) for c in range(0x3000) if not 0xD800 <= c < 0xE000) + "\U0001f600\U0010ffff"
    facts = [{**_valid_fact(k), "text": chars[k * 1000 : (k + 1) * 1000]} for k in range(13)]
    env = {
        "request_id": "r",
        "session_id": "s",
        "window": 1,
        "status": "in-progress",
        "facts": facts,
        "residual_anchor": chars[:500],
        "headers": {chars[k : k + 3]: chars[k + 3 : k + 6] for k in range(0, 600, 6)},
        "notes": [chars[:300]],
    }
    assert _check(env) is not None


def test_envelopes_with_a_float_msgspec_writes_otherwise_use_the_stdlib() -> None:
    env = {
        "request_id": "r",
        "session_id": "s",
        "window": 1,
        "status": "in-progress",
        "facts": [{**_valid_fact(0), "recency": 1e-7}],
        "residual_anchor": "",
        "headers": {"CRP-Context-Bridge-Score": 1e16},
    }
    got = _check(env)
    assert got is not None and b'"recency":1e-07' in got and b"1e+16" in got
