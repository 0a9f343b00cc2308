"""Fact authority (SPEC-027 §2.3, §2.5): whose statement wins an arbitrated contradiction.
``core.conflicts`` detects the contradictions and re-exports these rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:  # annotations only: conflicts imports this module
    from crp_stream.core.conflicts import FactView

AUTHORITY_TIE_EPSILON = 1e-9
DEMOTED_STATUSES = frozenset({"stale", "superseded", "expired", "quarantined"})

# SPEC-027 §2.3: regulatory 0.90; official = baseline (0.80 here); community -0.05; unverified -0.10.
# crp-stream choices: version_specific and user at the baseline, news 0.75, telemetry 0.70.
SOURCE_AUTHORITY: dict[str, float] = {
    "regulatory": 0.90,
    "official": 0.80,
    "version_specific": 0.80,
    "news": 0.75,
    "user": 0.80,
    "community": 0.75,
    "unverified": 0.70,
    "telemetry": 0.70,
}


def source_authority(source_type: str, trust: float) -> float:
    """SPEC-027 §2.3 (SPEC-009 §4.4): ``source_authority_weight`` of a fact.

    The type weight (regulatory 0.90, official 0.80 baseline, community -0.05, unverified -0.10; the
    other types are crp-stream choices, see ``SOURCE_AUTHORITY``) times the partition's trust in
    [0, 1], so two partitions of one type are told apart by what the operator trusts.
    """
    if source_type not in SOURCE_AUTHORITY:
        raise ValueError(f"unknown source_type {source_type!r}")
    if not 0.0 <= trust <= 1.0:
        raise ValueError("trust must be within 0..1")
    return SOURCE_AUTHORITY[source_type] * trust


def authority(source_auth: ArrayLike, recency: ArrayLike, importance: ArrayLike) -> NDArray[np.float64]:
    """SPEC-027 §2.3/§3.4: ``authority = source_authority_weight × recency_factor × importance_weight``."""
    s, r, i = (np.asarray(x, dtype=np.float64) for x in (source_auth, recency, importance))
    return np.asarray(s * r * i, dtype=np.float64)


def fact_authority(fact: FactView) -> float:
    """SPEC-027 §2.3: ``authority`` of one fact from its own source type, trust, recency and importance."""
    return float(authority(source_authority(fact.source_type, fact.trust), fact.recency, fact.importance))


@dataclass(frozen=True)
class Resolution:
    """Outcome of one arbitration; on a tie both facts stay (``kept`` is then the lower fact_id)."""

    kept: FactView
    suppressed: FactView
    tie: bool
    authority_kept: float
    authority_suppressed: float
