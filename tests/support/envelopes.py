"""Hypothesis strategies of context envelopes (dicts of the fields ``WindowEnvelope`` holds), for the
tests of the envelope writers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import strategies as st

ids = st.text(min_size=1, max_size=12)
texts = st.text(min_size=1, max_size=30) | st.sampled_from(['"\\\n\u2028', "t" * 4096, "é"])
floats = st.floats(allow_nan=False, allow_infinity=False)
times = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5))]),
)
scalars = st.text(max_size=10) | st.integers(-(2**63) + 1, 2**63 - 1) | floats

fact = st.fixed_dictionaries(
    {
        "fact_id": ids,
        "text": texts,
        "role": st.sampled_from(["anchor", "connector"]),
        **{k: floats for k in ("score", "relevance", "novelty", "recency", "authority")},
        "source": ids,
        "source_type": st.sampled_from(["official", "news", "user"]),
        "epoch": times,
        "modified_at": times,
        "support": st.integers(1, 50),
    },
    optional={
        "bridges": st.none() | st.lists(ids, max_size=3),
        "via": st.none() | st.sampled_from(["similarity", "adjacency", "mention"]),
        "rank": st.none() | st.integers(1, 99),
    },
)
envelope = st.fixed_dictionaries(
    {
        "request_id": ids,
        "session_id": ids,
        "window": st.integers(1, 9),
        "status": st.sampled_from(["in-progress", "ckf-exhausted", "task-complete"]),
        "facts": st.lists(fact, max_size=4),
        "residual_anchor": st.just("") | texts,
        "headers": st.dictionaries(st.text(max_size=6), scalars, max_size=4),
    },
    optional={
        "notes": st.lists(st.text(max_size=20), max_size=2),
        "branch": st.none() | st.integers(0, 3),
        "partition": st.none() | st.lists(ids, max_size=2),
        "closing": st.none() | st.booleans(),
    },
)

__all__ = ["envelope", "fact", "floats", "ids", "scalars", "texts", "times"]
