"""events/envelope_bytes.py: an envelope written without the model gives exactly the model's bytes,
and the direct path is taken only for values the model keeps as they are."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream import events
from crp_stream.events.envelope_bytes import direct_bytes, envelope_bytes
from tests.support.envelopes import envelope

# one value the model may convert or refuse, put anywhere (or a key taken away)
odd = st.sampled_from(
    [
        ...,
        None,
        "",
        "x" * 257,
        "t" * 65537,
        "h" * 4097,
        "\ud800",
        "other",
        -1,
        0,
        2**63,
        True,
        1.0,
        0.5,
        1,
        float("nan"),
        float("inf"),
        datetime(2026, 1, 1),
        [],
        ["\ud800"],
        [1],
        {},
        {"k": True},
        {"k": None},
    ]
)


def mutated(env: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    """``env``, or a copy with one field (of the envelope, of a fact, or a header) made odd."""
    where = data.draw(st.sampled_from(["none", "envelope", "fact", "header"]))
    if where == "none":
        return env
    env = {**env, "facts": [dict(f) for f in env["facts"]], "headers": dict(env["headers"])}
    target = env
    if where == "fact" and env["facts"]:
        target = data.draw(st.sampled_from(env["facts"]))
    keys = [*sorted(target), "unknown"] if where != "header" else ["CRP-X", "\ud800"]
    key, value = data.draw(st.sampled_from(keys)), data.draw(odd)
    if where == "header":
        target = env["headers"]
    if value is ...:
        target.pop(key, None)
    else:
        target[key] = value
    return env


def outcome(build: Any) -> tuple[str, Any]:
    try:
        return ("ok", build())
    except Exception:  # the model's refusal, or the encoder's (NaN, a lone surrogate)
        return ("error", None)


def model_bytes(env: dict[str, Any]) -> bytes:
    return events.encode(events.EnvelopeAssembled(**env))


@settings(max_examples=600, deadline=None)
@given(valid=envelope, data=st.data())
def test_direct_bytes_are_the_models(valid: dict[str, Any], data: st.DataObject) -> None:
    env = mutated(valid, data)
    direct = direct_bytes(env)
    if direct is not None:  # taken only where the model keeps the values: the same bytes
        assert ("ok", direct) == outcome(lambda: model_bytes(env))
    assert outcome(lambda: envelope_bytes(env)) == outcome(lambda: model_bytes(env))
    if env is valid:  # every envelope of valid values is written without the model
        assert direct is not None


def _valid_fact(k: int, tz: Any = UTC) -> dict[str, Any]:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=7 * k)
    return {
        "fact_id": f"f{k}",
        "text": f'fact {k}: "quoted" é \u2028',
        "role": "connector" if k % 2 else "anchor",
        "score": 0.1 * k,
        "relevance": -0.0,
        "novelty": 1.0,
        "recency": 1e-7,
        "authority": 0.64,
        "source": "src",
        "source_type": "official",
        "epoch": at.astimezone(tz),
        "modified_at": at,
        "support": 1 + k,
        **({"bridges": ["a", "b"]} if k % 2 else {}),
        "via": "similarity",
        "rank": k + 1,
    }


def test_assembled_envelopes_take_the_direct_path() -> None:
    """What ``envelope.build`` assembles (with a branch, headers of every scalar kind, a note)."""
    env = {
        "request_id": "r1",
        "session_id": "s1",
        "window": 2,
        "status": "in-progress",
        "facts": [_valid_fact(k, timezone(timedelta(hours=-3)) if k == 2 else UTC) for k in range(5)],
        "notes": ["NOTE: a tie"],
        "residual_anchor": "Still open: area 1",
        "headers": {"CRP-Context-Coverage-Score": 0.25, "CRP-Context-Graph-Hops": 2, "CRP-Context-Mode": "cdr"},
        "branch": 1,
        "partition": ["sq0", "sq1"],
    }
    direct = direct_bytes(env)
    assert direct is not None
    assert direct == model_bytes(env)
    assert b'"epoch":"2026-01-01T00:00:00.000014Z"' in direct  # the offset zone written as UTC


def test_unknown_fields_are_left_to_the_model() -> None:
    env = {
        "request_id": "r1",
        "session_id": "s1",
        "window": 1,
        "status": "in-progress",
        "facts": [_valid_fact(0)],
        "residual_anchor": "",
        "headers": {},
        "assignments": [{"fact_id": "f0", "branch": 0}],
    }
    assert direct_bytes(env) is None
    assert envelope_bytes(env) == model_bytes(env)
    assert b'"assignments":[{"branch":0,"fact_id":"f0"}]' in envelope_bytes(env)


def test_the_direct_path_checks_exactly_the_models_fields() -> None:
    """A field added to a model must get its check here before the direct path may write it."""
    from crp_stream.events import envelope_bytes as eb
    from crp_stream.events.outputs import EnvelopeAssembled, EnvelopeFact

    fact, env = EnvelopeFact.model_fields, EnvelopeAssembled.model_fields
    assert set(fact) == eb._FACT_FIELDS and {k for k, f in fact.items() if f.is_required()} == eb._FACT_REQUIRED
    assert set(env) - {"type"} == eb._ENV_FIELDS
    assert {k for k, f in env.items() if f.is_required()} == eb._ENV_REQUIRED


@settings(max_examples=200, deadline=None)
@given(
    us=st.lists(st.integers(-(2**40), 2**52), min_size=1, max_size=20),
    offset=st.integers(-23 * 60, 23 * 60),
)
def test_remembered_times_are_the_times(us: list[int], offset: int) -> None:
    """``envelope._time`` and ``envelope_bytes._utc_iso`` remember results: the same datetimes and
    texts as ``us_to_dt`` and ``format_time``, whatever was asked before (the same instant in
    another zone, with ``fold`` set, or as a float) and however often."""
    from crp_stream.events import envelope_bytes as eb
    from crp_stream.events.common import format_time
    from crp_stream.processors import envelope
    from crp_stream.processors.base import us_to_dt

    zone = timezone(timedelta(minutes=offset))
    for u in us + us[::-1]:
        dt = envelope._time(u)
        assert dt == us_to_dt(u) and dt.tzinfo is UTC and envelope._time(float(u)) == dt
        other = dt.astimezone(zone)
        assert eb._utc_text(other) == format_time(other)  # not a key: another zone is formatted
        assert eb._utc_text(dt.replace(fold=1)) == eb._utc_text(dt) == format_time(dt)
