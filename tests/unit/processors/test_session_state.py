"""Session state embeddings: base64 float32, the same values as the float lists older states hold."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream.core import memo
from crp_stream.processors.session import SessionState, SubQueryState, vec_from_json, vec_to_json


def test_base64_embeddings_round_trip_exactly_and_float_lists_still_load() -> None:
    v = np.random.default_rng(3).standard_normal(384).astype(np.float32)
    v /= np.linalg.norm(v)
    text = vec_to_json(v)
    assert isinstance(text, str) and len(text) == 2048
    assert vec_from_json(text).dtype == np.float32 and vec_from_json(text).tobytes() == v.tobytes()
    old = [float(x) for x in v]  # how states were written before
    assert vec_from_json(json.loads(json.dumps(old))).tobytes() == v.tobytes()


def test_state_with_either_format_loads_and_saves_base64() -> None:
    v = np.asarray([0.6, 0.8], dtype=np.float32)
    old = SessionState("s", "m", 5, [SubQueryState("q", "t", "t", [float(x) for x in v])], ["q"]).to_json()
    row = {"session_id": "s", "embedding_model": "m", "max_windows": 5, "window_count": 0, "state": old}
    state = SessionState.from_row(json.loads(json.dumps(row)))
    assert vec_from_json(state.sub_queries[0].embedding).tobytes() == v.tobytes()
    state.sub_queries[0].embedding = vec_to_json(vec_from_json(state.sub_queries[0].embedding))
    assert state.to_json()["sub_queries"][0]["embedding"] == vec_to_json(v)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=64))
def test_remembered_decode_equals_the_plain_one(xs: list[float]) -> None:
    v = np.asarray(xs, dtype=np.float32)
    text = vec_to_json(v)
    plain = np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)
    for _ in range(2):  # the second call is the memo's
        got = vec_from_json(text)
        assert got.dtype == np.float32 and got.tobytes() == plain.tobytes()
    assert vec_from_json(xs).tobytes() == plain.tobytes()  # a float list (older states) decodes alike


def test_remembered_decode_is_shared_read_only_and_follows_configure() -> None:
    text = vec_to_json(np.asarray([0.6, 0.8], dtype=np.float32))
    a, b = vec_from_json(text), vec_from_json(text)
    assert a is b and not a.flags.writeable  # shared: a caller cannot change another's vector
    with pytest.raises(ValueError):
        a[0] = 1.0
    size = memo.DEFAULT_TEXTS
    try:
        memo.configure(size * 2)
        assert memo.stats()["crp_stream.processors.session._decoded"][1] == int(size * 2 * 0.02)
        assert vec_from_json(text).tobytes() == a.tobytes()
    finally:
        memo.configure(size)
