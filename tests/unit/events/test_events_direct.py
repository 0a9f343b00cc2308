"""events/direct.py: audit records and status changes written without a model give exactly the
model's bytes, and are used only for values the model keeps as they are."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream import events
from crp_stream.events import direct

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63, max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["", "é", "\u2028", '"', "\\", "\x00", "a\nb", "x" * 5000]),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
times = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC))
ids = st.text(min_size=1, max_size=40) | st.sampled_from(["x" * 256, "y" * 257, "", "0123456789abcdef" * 2])
audit_types = st.sampled_from(["STALE_HIGH_TRUST", "DRIFT_UNDETERMINED", "REFRESH_RESOLVED", "NOT_A_TYPE", ""])


def outcome(build: Any) -> tuple[str, Any]:
    try:
        return ("ok", build())
    except Exception as exc:  # the model's refusal, or the encoder's (NaN, a lone surrogate)
        return ("error", type(exc).__name__)


@settings(max_examples=500, deadline=None)
@given(event_id=ids, audit_type=audit_types, at=times, details=st.dictionaries(st.text(max_size=8), json_value))
def test_audit_bytes_are_the_models(event_id: str, audit_type: str, at: datetime, details: dict[str, Any]) -> None:
    def model() -> bytes:
        return events.encode(events.AuditRecorded(event_id=event_id, audit_type=audit_type, at=at, details=details))  # type: ignore[arg-type]

    if direct.audit_direct(event_id, audit_type, details):
        assert outcome(lambda: direct.audit_bytes(event_id, audit_type, at, details)) == outcome(model)
    else:  # only what the model refuses is left to it here
        assert outcome(model)[0] == "error"


@settings(max_examples=500, deadline=None)
@given(
    fact_id=ids,
    status=st.sampled_from(["active", "stale", "quarantined", "superseded", "expired", "gone"]),
    reason=st.text(max_size=30) | st.sampled_from(["r" * 4096, "r" * 4097, "\ud800"]),
    at=times,
    cause_id=st.none() | ids,
)
def test_status_change_bytes_are_the_models(
    fact_id: str, status: str, reason: str, at: datetime, cause_id: str | None
) -> None:
    def model() -> bytes:
        change = events.FactStatusChanged(fact_id=fact_id, status=status, reason=reason, at=at, cause_id=cause_id)  # type: ignore[arg-type]
        return events.encode(change)

    if direct.status_changed_direct(fact_id, status, reason, cause_id):
        assert outcome(lambda: direct.status_changed_bytes(fact_id, status, reason, at, cause_id)) == outcome(model)
    else:
        assert outcome(model)[0] == "error"


def test_direct_encodings_of_the_arbiters_records() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=5)
    details = {"claim": "api|limit", "partitions": [{"trust": 0.4, "value": "250 rps"}], "ids": ("f1", "f2")}
    assert direct.audit_direct("a1", "STALE_HIGH_TRUST", details)
    want = events.encode(events.AuditRecorded(event_id="a1", audit_type="STALE_HIGH_TRUST", at=at, details=details))
    assert direct.audit_bytes("a1", "STALE_HIGH_TRUST", at, details) == want
    assert not direct.audit_direct("a1", "STALE_HIGH_TRUST", {1: "x"})  # a key the model refuses
    for cause in (None, "c1"):
        change = events.FactStatusChanged(fact_id="f1", status="stale", reason="why", at=at, cause_id=cause)
        assert direct.status_changed_bytes("f1", "stale", "why", at, cause) == events.encode(change)
    with pytest.raises(ValueError):  # NaN is refused as ``encode`` refuses it
        direct.audit_bytes("a1", "STALE_HIGH_TRUST", at, {"x": float("nan")})
