"""The msgspec codec accepts and rejects exactly what the pydantic models do, with the same reasons
and equal events, and encodes to the same bytes: on a corpus of valid and hostile records
(tests/support/codec_corpus.py), on the fuzzing recipes of tests/integration/test_fuzz.py, and on
floats of every magnitude."""

from __future__ import annotations

import json
import math
import struct
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream import events
from crp_stream.events.codec import decode_pydantic, encode_pydantic
from crp_stream.events.codec_fast import _ENCODER, _float_ok, decode_fast, encode_fast
from crp_stream.events.topics import topic_spec
from tests.integration.test_fuzz import RECIPE, Fuzz
from tests.support.codec_corpus import BASES, corpus, dumps


def outcome(decode: Any, topic: str, raw: bytes, max_facts: int, max_bytes: int = 1 << 20) -> tuple[str, Any]:
    try:
        event = decode(topic, raw, max_bytes, max_facts=max_facts)
    except events.Rejected as exc:
        return ("rejected", exc.reason)
    return ("event", event)


def assert_same(topic: str, raw: bytes, max_facts: int = 1000, max_bytes: int = 1 << 20) -> str:
    """Both decoders agree on ``raw``; returns "fast", "pydantic" (an event left to the models) or
    "rejected"."""
    new = outcome(events.decode_input, topic, raw, max_facts, max_bytes)
    old = outcome(decode_pydantic, topic, raw, max_facts, max_bytes)
    assert new[0] == old[0], (raw[:300], new, old)
    if new[0] == "rejected":
        assert new[1] == old[1], raw[:300]
        return "rejected"
    a, b = new[1], old[1]
    assert type(a) is type(b) and a == b, raw[:300]
    assert a.model_fields_set == b.model_fields_set
    assert a.model_dump() == b.model_dump()
    assert events.encode(a) == encode_pydantic(b)
    model = topic_spec(topic).models[0]  # type: ignore[union-attr]
    return "fast" if decode_fast(model, raw, max_bytes, max_facts) is not None else "pydantic"


def test_corpus_is_accepted_and_rejected_alike() -> None:
    seen: Counter[str] = Counter()
    for topic, raw, max_facts in corpus():
        seen[assert_same(topic, raw, max_facts)] += 1
    assert seen["rejected"] > 3000 and seen["fast"] > 1000, seen  # the corpus exercises both sides
    # every valid base record without unknown fields is decoded by msgspec, not merely agreed with
    for topic, base in BASES:
        if topic == "crp.documents" and "request_id" in base:
            continue  # the one with unknown fields: the models keep them
        model = topic_spec(topic).models[0]  # type: ignore[union-attr]
        assert decode_fast(model, dumps(base), 1 << 20, 1000) is not None, base


def test_record_size_limit_is_the_same() -> None:
    topic, base = BASES[0]
    raw = dumps(base)
    for limit in (len(raw) - 1, len(raw), len(raw) + 1):
        assert_same(topic, raw, max_bytes=limit)


@settings(max_examples=400, deadline=None)
@given(recipe=RECIPE)
def test_fuzzing_recipes_are_rejected_alike(recipe: tuple[Any, ...]) -> None:
    fuzz = Fuzz(rt=None, log=None, fabric=None)  # type: ignore[arg-type]  # only its records
    topic, raw = fuzz.materialize(recipe)
    assert_same(topic, raw, max_bytes=128 * 1024)
    for u in range(1, 3):
        for value, topic in ((fuzz.valid_doc(u), "crp.documents"), (fuzz.valid_req(u), "crp.window.requests")):
            assert assert_same(topic, json.dumps(value, ensure_ascii=False).encode()) == "fast"


@settings(max_examples=2000, deadline=None)
@given(
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(0, 2**64 - 1).map(lambda b: struct.unpack("d", struct.pack("Q", b))[0])
)
def test_floats_msgspec_writes_are_written_as_python_does(x: float) -> None:
    if _float_ok(x):
        assert _ENCODER.encode(x) == json.dumps(x).encode()
    else:
        assert not math.isfinite(x) or (x != 0.0 and not 1e-4 <= abs(x) < 1e16)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(details=st.dictionaries(st.text(max_size=6), json_values, max_size=4), score=st.floats())
def test_python_built_outputs_encode_alike(details: dict[str, Any], score: float) -> None:
    """Output events built in code (free-form details, any float): the same bytes, or the same error."""
    audit = events.AuditRecorded(event_id="a", audit_type="FACTS_FORGOTTEN", at="2026-01-01T00:00:00Z", details=details)
    built: list[Any] = [audit, events.decode_input("crp.facts", dumps(BASES[8][1]))]
    try:
        fact = {"fact_id": "f", "text": "t", "role": "anchor", "score": score, "relevance": 0.5, "novelty": 1e-9}
        fact |= {"recency": 1e20, "authority": 0, "source": "s", "source_type": "news", "support": 1}
        fact |= {"epoch": "2026-01-01T00:00:00+01:00", "modified_at": "2026-01-01T00:00:00Z"}
        built.append(
            events.EnvelopeAssembled(
                request_id="r",
                session_id="s",
                window=1,
                status="in-progress",
                facts=[fact],
                residual_anchor="",
                headers={"h": score, "n": 2**70 if score > 0 else 1},
            )
        )
    except ValueError:
        pass  # a NaN score: the model refuses it
    for event in built:
        try:
            want: Any = encode_pydantic(event)
        except ValueError as exc:  # NaN in details, a lone surrogate
            want = type(exc)
        try:
            got: Any = events.encode(event)
        except ValueError as exc:
            got = type(exc)
        assert got == want
        fast = encode_fast(event)
        assert fast is None or fast == want
