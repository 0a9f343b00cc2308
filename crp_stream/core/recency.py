"""Recency weighting (SPEC-027 §3): the decay factor shared by CDR scoring and fact authority.

Pure numpy; ages and TTLs are seconds supplied by the caller (``age = now - modified_at``), so no
clock is read here.

API
---
- ``STALE_FLOOR = 0.30``; ``FRESH_FRACTION = 0.5``; ``SECONDS_PER_DAY``; ``SECONDS_PER_YEAR`` (365 d).
- ``DEFAULT_TTL_SECONDS: Mapping[str, float | None]`` by ``source_type`` (``None`` = never expires).
- ``default_ttl_seconds(source_type) -> float | None`` (§3.5; unknown source type -> ``ValueError``).
- ``ttl_or_inf(ttl) -> float``: ``None`` (never expires) as ``inf``, for building ttl arrays.
- ``recency_factor(age_seconds, ttl_seconds) -> NDArray[float64]`` (§3.2), broadcasting.
- ``recency_penalised_count(factors) -> int`` (§3.6, header CRP-Context-Recency-Penalised).
- ``hard_expired(expires_at_us, now_us) -> NDArray[bool]``: the optional hard expiry, for every fact path.

>>> float(recency_factor(0.75 * 86400.0, 86400.0))
0.65
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike, NDArray

STALE_FLOOR = 0.30
FRESH_FRACTION = 0.5
SECONDS_PER_DAY = 86_400.0
# A year is 365 days, so "6 months" is exactly half a year (182.5 d).
SECONDS_PER_YEAR = 365.0 * SECONDS_PER_DAY

DEFAULT_TTL_SECONDS: Mapping[str, float | None] = MappingProxyType(
    {
        # SPEC-027 §3.5
        "regulatory": 5.0 * SECONDS_PER_YEAR,
        "official": SECONDS_PER_YEAR,
        "version_specific": 182.5 * SECONDS_PER_DAY,
        "news": 30.0 * SECONDS_PER_DAY,
        "user": None,
        # crp-stream choice: the seed names no TTL for these source types.
        "telemetry": 30.0 * SECONDS_PER_DAY,
        "community": 90.0 * SECONDS_PER_DAY,
        "unverified": 30.0 * SECONDS_PER_DAY,
    }
)


def default_ttl_seconds(source_type: str) -> float | None:
    """SPEC-027 §3.5: a fact without its own TTL gets the default of its source type.

    Regulatory 5 years, official 1 year, version-specific 6 months, news 30 days, user-provided never
    (``None``). Telemetry 30 d, community 90 d and unverified 30 d are crp-stream choices.
    """
    try:
        return DEFAULT_TTL_SECONDS[source_type]
    except KeyError:
        raise ValueError(f"unknown source_type {source_type!r}") from None


def ttl_or_inf(ttl: float | None) -> float:
    """SPEC-027 §3.5: ``ttl=none`` means never expires; encoded as ``inf`` in ttl arrays."""
    return math.inf if ttl is None else float(ttl)


def recency_factor(age_seconds: ArrayLike, ttl_seconds: ArrayLike) -> NDArray[np.float64]:
    """SPEC-027 §3.2: 1.0 until half the TTL, linear down to STALE_FLOOR at the TTL, the floor after.

    ``linear_decay = 1.0 - 0.7 * (age - 0.5*ttl) / (0.5*ttl)``. A TTL of ``inf`` or ``nan`` never
    expires (factor 1.0, §3.5). A negative age (``modified_at`` in the future: clock skew) counts as
    fresh. A TTL <= 0 expires at once: 1.0 at age 0, the floor after. ``nan`` ages and negative TTLs
    are rejected: a missing timestamp must not silently look fresh or stale.
    """
    age = np.asarray(age_seconds, dtype=np.float64)
    ttl = np.asarray(ttl_seconds, dtype=np.float64)
    if np.isnan(age).any():
        raise ValueError("age_seconds contains nan")
    if (ttl < 0).any():
        raise ValueError("ttl_seconds must be >= 0 (use inf for never expires)")
    if age.shape != ttl.shape:
        age, ttl = np.broadcast_arrays(age, ttl)
    # past half its TTL: a finite TTL (half of inf is inf, and nan compares false)
    stale = age > FRESH_FRACTION * ttl
    out = np.ones(age.shape, dtype=np.float64)
    if not stale.any():  # the usual case, every fact fresh
        return out
    a, t = age[stale], ttl[stale]
    vals = np.full(a.shape, STALE_FLOOR)
    mid = a < t  # then t > 0: the linear decay; at the TTL and after, the floor
    am, half = a[mid], FRESH_FRACTION * t[mid]
    vals[mid] = np.clip(1.0 - (1.0 - STALE_FLOOR) * (am - half) / half, STALE_FLOOR, 1.0)
    out[stale] = vals
    return out


def recency_penalised_count(factors: ArrayLike) -> int:
    """SPEC-027 §3.6: CRP-Context-Recency-Penalised = candidates whose recency factor is below 1.0."""
    return int(np.count_nonzero(np.asarray(factors, dtype=np.float64) < 1.0))


def hard_expired(expires_at_us: Sequence[int | None], now_us: int) -> NDArray[np.bool_]:
    """Hard expiry (``CRP_EXPIRE_AFTER_TTLS``, our option beyond SPEC-027 §3.2's decay): a fact whose
    expiry time has passed is excluded from every envelope, as anchor and as connector alike.

    ``None`` = never expires. Expired at ``expires_at_us <= now_us``, the vector index's filter.
    """
    return np.asarray([e is not None and e <= now_us for e in expires_at_us], dtype=np.bool_)
