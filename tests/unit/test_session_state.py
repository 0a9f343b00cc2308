"""Session state embeddings: base64 float32, the same values as the float lists older states hold."""

from __future__ import annotations

import json

import numpy as np

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
