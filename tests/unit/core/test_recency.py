"""SPEC-027 §3: recency decay and TTL defaults."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crp_stream.core.recency import (
    DEFAULT_TTL_SECONDS,
    SECONDS_PER_DAY,
    SECONDS_PER_YEAR,
    STALE_FLOOR,
    default_ttl_seconds,
    recency_factor,
    recency_penalised_count,
    ttl_or_inf,
)

DAY = SECONDS_PER_DAY


def test_default_ttls_follow_spec_027_3_5() -> None:
    assert default_ttl_seconds("regulatory") == 5 * 365 * DAY
    assert default_ttl_seconds("official") == 365 * DAY
    assert default_ttl_seconds("version_specific") == 182.5 * DAY
    assert default_ttl_seconds("news") == 30 * DAY
    assert default_ttl_seconds("user") is None
    assert SECONDS_PER_YEAR == 365 * DAY


def test_crp_stream_default_ttls_for_other_source_types() -> None:
    assert default_ttl_seconds("telemetry") == 30 * DAY
    assert default_ttl_seconds("community") == 90 * DAY
    assert default_ttl_seconds("unverified") == 30 * DAY
    assert set(DEFAULT_TTL_SECONDS) == {
        "regulatory",
        "official",
        "version_specific",
        "news",
        "user",
        "telemetry",
        "community",
        "unverified",
    }


def test_unknown_source_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown source_type"):
        default_ttl_seconds("blog")


def test_default_ttl_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        DEFAULT_TTL_SECONDS["news"] = 1.0  # type: ignore[index]


def test_ttl_or_inf() -> None:
    assert ttl_or_inf(None) == math.inf
    assert ttl_or_inf(10) == 10.0


def test_fresh_until_half_ttl() -> None:
    ttl = 100.0
    got = recency_factor([0.0, 25.0, 50.0], ttl)
    assert got.tolist() == [1.0, 1.0, 1.0]


def test_linear_decay_in_second_half() -> None:
    ttl = 100.0
    got = recency_factor([60.0, 75.0, 90.0], ttl)
    # 1 - 0.7 * (age - 50) / 50
    np.testing.assert_allclose(got, [0.86, 0.65, 0.44])


def test_floor_at_and_after_ttl() -> None:
    got = recency_factor([100.0, 101.0, 1e9], 100.0)
    assert got.tolist() == [STALE_FLOOR] * 3
    assert STALE_FLOOR == 0.30


def test_just_before_ttl_is_just_above_floor() -> None:
    got = float(recency_factor(99.999, 100.0))
    assert STALE_FLOOR < got < STALE_FLOOR + 1e-3


def test_never_expires_inf_and_nan_ttl() -> None:
    got = recency_factor([0.0, 1e12, 1e12], [math.inf, math.inf, math.nan])
    assert got.tolist() == [1.0, 1.0, 1.0]


def test_negative_age_is_fresh() -> None:
    assert float(recency_factor(-5 * DAY, 30 * DAY)) == 1.0


def test_zero_ttl_expires_immediately() -> None:
    assert recency_factor([0.0, 1.0], 0.0).tolist() == [1.0, STALE_FLOOR]


def test_vectorised_per_fact_ttls_and_shape() -> None:
    ages = np.array([10 * DAY, 10 * DAY, 400 * DAY, 400 * DAY])
    ttls = np.array([30 * DAY, 365 * DAY, 365 * DAY, math.inf])
    got = recency_factor(ages, ttls)
    assert got.shape == (4,)
    assert got.dtype == np.float64
    assert got[0] == 1.0 and got[1] == 1.0 and got[2] == STALE_FLOOR and got[3] == 1.0


def test_stale_news_vs_fresh_official() -> None:
    news = float(recency_factor(25 * DAY, default_ttl_seconds("news")))
    official = float(recency_factor(25 * DAY, default_ttl_seconds("official")))
    assert official == 1.0
    assert news == pytest.approx(1.0 - 0.7 * (25 - 15) / 15)


def test_nan_age_and_negative_ttl_rejected() -> None:
    with pytest.raises(ValueError):
        recency_factor([math.nan], 10.0)
    with pytest.raises(ValueError):
        recency_factor([1.0], -1.0)


def test_recency_penalised_count() -> None:
    assert recency_penalised_count([1.0, 0.99, 0.3, 1.0]) == 2
    assert recency_penalised_count([]) == 0


def test_hard_expired_at_or_after_the_expiry_time() -> None:
    from crp_stream.core.recency import hard_expired

    assert hard_expired([None, 99, 100, 101], 100).tolist() == [False, True, True, False]


def _reference(age: np.ndarray, ttl: np.ndarray) -> np.ndarray:
    """§3.2 term by term over every element (what the function computed before its fast path)."""
    age, ttl = np.broadcast_arrays(np.asarray(age, dtype=np.float64), np.asarray(ttl, dtype=np.float64))
    never = ~np.isfinite(ttl)
    half = 0.5 * np.where(never, 1.0, ttl)
    with np.errstate(all="ignore"):
        decay = 1.0 - 0.7 * (age - half) / half
    out = np.where(age <= half, 1.0, np.where(age >= np.where(never, np.inf, ttl), STALE_FLOOR, decay))
    return np.clip(np.where(never, 1.0, out), STALE_FLOOR, 1.0)


@given(
    st.lists(
        st.tuples(
            st.one_of(st.floats(-1e10, 1e10), st.sampled_from([0.0, 50.0, 100.0, math.inf, -math.inf])),
            st.one_of(st.floats(0.0, 1e10), st.sampled_from([0.0, 100.0, math.inf, math.nan])),
        ),
        max_size=40,
    )
)
def test_the_same_floats_as_the_rule_term_by_term(pairs: list[tuple[float, float]]) -> None:
    age = np.asarray([a for a, _ in pairs], dtype=np.float64)
    ttl = np.asarray([t for _, t in pairs], dtype=np.float64)
    got = recency_factor(age, ttl)
    assert got.dtype == np.float64 and got.shape == age.shape
    assert got.tobytes() == _reference(age, ttl).tobytes()


def test_broadcasts_one_ttl_over_many_ages() -> None:
    ages = np.array([[10.0, 60.0], [100.0, -1.0]])
    got = recency_factor(ages, 100.0)
    assert got.shape == (2, 2) and got.tobytes() == _reference(ages, np.float64(100.0)).tobytes()
