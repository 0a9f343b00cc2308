"""Similarity-threshold calibration: carry the seeds' cosine thresholds over to another embedding model.

The seeds' numbers (min relevance 0.55, SPEC-024 §2.6; similarity edges at cos >= 0.60 with K=20,
SPEC-025 §1.3 / SPEC-009 §5.2; contradiction pairs at cos > 0.85, SPEC-027 §2.2) presume a model
whose unrelated texts score near cosine 0. Many models are anisotropic: unrelated sentences already
score 0.3-0.6 (averaged word vectors especially), so 0.55 would admit nearly everything.

Method (crp-stream choice, no randomness). The *background* ``b`` is the median of a fabric's
pairwise fact-fact cosines, clipped to [0, 0.95]: in any fabric of more than a few topics most pairs
are unrelated, so the median is the "unrelated" level. Each seed threshold ``t`` is rescaled from
the seeds' range [0, 1] onto the observed informative range [b, 1]:

    t' = b + t × (1 - b)

so b = 0 leaves every seed value unchanged, the order of the thresholds is preserved, and all stay
below 1. ``min_relevance`` uses the median of ``query_relevances`` (probe-query cosines against a
sample of ALL facts, not a top-k) when given and non-empty, because short queries can sit in another
region of the space than facts; otherwise the fact-fact background. ``edge_k`` is structural and stays at 20.

API
---
- ``Thresholds`` (frozen): ``min_relevance=0.55, edge_threshold=0.60, edge_k=20,
  contradiction_threshold=0.85, min_connector_relevance=0.30`` (the seed defaults).
- ``background_similarity(cosines) -> float``: the clipped median (0.0 for no data).
- ``rescale_threshold(seed, background) -> float``: ``b + t × (1 - b)``.
- ``calibrate_thresholds(pairwise_cosines, query_relevances=None) -> Thresholds``; a square matrix
  is accepted too (its strict upper triangle is used). ``dataclasses.asdict`` gives the dict form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

MAX_BACKGROUND = 0.95


@dataclass(frozen=True)
class Thresholds:
    """The seeds' similarity thresholds (their defaults) or their calibrated counterparts."""

    min_relevance: float = 0.55
    edge_threshold: float = 0.60
    edge_k: int = 20
    contradiction_threshold: float = 0.85
    min_connector_relevance: float = 0.30


def _flat(cosines: ArrayLike) -> NDArray[np.float64]:
    c = np.asarray(cosines, dtype=np.float64)
    if c.ndim == 2 and c.shape[0] == c.shape[1]:
        c = c[np.triu_indices(c.shape[0], k=1)]
    c = c.reshape(-1)
    return c[np.isfinite(c)]


def background_similarity(cosines: ArrayLike) -> float:
    """Calibration (SPEC-024 §2.6 / SPEC-025 §1.3 for another model): the "unrelated" cosine level.

    The median of the sample, clipped to [0, 0.95]; an empty sample gives 0.0 (seed values as-is).
    """
    c = _flat(cosines)
    if c.size == 0:
        return 0.0
    return float(np.clip(np.median(c), 0.0, MAX_BACKGROUND))


def rescale_threshold(seed: float, background: float) -> float:
    """Calibration: map a seed cosine threshold from [0, 1] onto [background, 1]: ``b + t × (1 - b)``."""
    if not 0.0 <= background < 1.0:
        raise ValueError("background must be within [0, 1)")
    return background + seed * (1.0 - background)


def calibrate_thresholds(pairwise_cosines: ArrayLike, query_relevances: ArrayLike | None = None) -> Thresholds:
    """Calibration: the seeds' thresholds re-expressed on this fabric's own similarity distribution.

    See the module docstring for the method. Min-relevance, edge, contradiction and connector
    relevance thresholds are all rescaled; ``edge_k`` keeps the seed's 20.
    """
    seed = Thresholds()
    b_facts = background_similarity(pairwise_cosines)
    queries = _flat([] if query_relevances is None else query_relevances)
    b_query = background_similarity(queries) if queries.size else b_facts
    return Thresholds(
        min_relevance=rescale_threshold(seed.min_relevance, b_query),
        edge_threshold=rescale_threshold(seed.edge_threshold, b_facts),
        edge_k=seed.edge_k,
        contradiction_threshold=rescale_threshold(seed.contradiction_threshold, b_facts),
        min_connector_relevance=rescale_threshold(seed.min_connector_relevance, b_query),
    )
