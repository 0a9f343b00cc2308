"""Coverage-Differential Retrieval scoring (SPEC-024 §2, §3.1, §7.1; final form SPEC-027 §3.3).

Everything is vectorised over the whole candidate set: ``fact_vecs`` is ``(n, d)``, float32
L2-normalised (cosine == dot); scores come back as ``(n,)`` float64 arrays, in candidate order.

API
---
- ``CDR_MIN_RELEVANCE = 0.55``; ``MIN_NOVELTY_FLOOR = 0.20``; ``COVERAGE_PENALTY_CAP = 0.80``.
- ``relevance(fact_vecs, query_vec) -> (n,)``: cosine to the query.
- ``coverage_score(fact_vecs, coverage_vecs, depth_weights) -> (n,)`` (§2.2/§2.3): depth-weighted
  MEAN cosine to the Coverage Set; zeros if the set is empty or its weights sum to 0.
- ``residual_pull(fact_vecs, residual_vecs) -> (n,)`` (§2.2): max cosine to the Residual Set; 0 if empty.
- ``window_one_residual_pull(pull, coverage_empty) -> (n,)`` (§2.7): zero pull while coverage is empty.
- ``coverage_penalty(coverage) -> (n,)`` (§2.2): clipped to [0, 0.80].
- ``novelty(coverage) -> (n,)`` (§2.2/§2.4): ``max(1 - coverage_penalty, 0.20)``, in [0.20, 1.0].
- ``relevance_gate(relevance, min_relevance=0.55) -> bool (n,)`` (§2.6): True = stays a candidate.
- ``effective_relevance(relevance, residual_pull) -> (n,)`` (§2.2): the max of the two.
- ``cdr_score(importance, relevance, residual_pull, novelty, recency, ngram_penalty) -> (n,)``
  (SPEC-027 §3.3): importance x max(relevance, pull) x novelty x recency x (1 - ngram_penalty).
- ``cdr_signals(fact_vecs, query_vec, coverage_vecs, depth_weights, residual_vecs) -> CdrSignals``:
  the per-candidate relevance, coverage, residual pull (with §2.7 applied) and novelty in one call.
- ``cdr_rank(scores, ids, eligible=None) -> list[int]`` (§7.1): candidate indices by score
  descending, ties by id ascending; ineligible candidates left out.
- ``update_residual_set(residual_ids, addressed_ids) -> list[str]`` (§3.1): order-preserving removal.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np
from numpy.typing import ArrayLike, NDArray

CDR_MIN_RELEVANCE = 0.55
MIN_NOVELTY_FLOOR = 0.20
COVERAGE_PENALTY_CAP = 0.80

FloatArray = NDArray[np.float64]


def _matrix(vecs: ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(vecs, dtype=np.float64)
    if arr.ndim == 1 and arr.size == 0:
        return arr.reshape(0, 0)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (rows, dim) array")
    return arr


def _sims(fact_vecs: ArrayLike, other_vecs: ArrayLike, other_name: str) -> tuple[FloatArray, int]:
    facts = _matrix(fact_vecs, "fact_vecs")
    other = _matrix(other_vecs, other_name)
    if other.shape[0] == 0 or facts.shape[0] == 0:
        return np.zeros((facts.shape[0], other.shape[0])), facts.shape[0]
    if facts.shape[1] != other.shape[1]:
        raise ValueError(f"fact_vecs dim {facts.shape[1]} != {other_name} dim {other.shape[1]}")
    return facts @ other.T, facts.shape[0]


def relevance(fact_vecs: ArrayLike, query_vec: ArrayLike) -> FloatArray:
    """SPEC-024 §7.1: ``relevance = cosine_similarity(fact.embedding, query_embedding)`` (dot product)."""
    q = np.asarray(query_vec, dtype=np.float64).reshape(1, -1)
    sims, _ = _sims(fact_vecs, q, "query_vec")
    return sims[:, 0] if sims.shape[1] else np.zeros(sims.shape[0])


def coverage_score(fact_vecs: ArrayLike, coverage_vecs: ArrayLike, depth_weights: ArrayLike) -> FloatArray:
    """SPEC-024 §2.2/§2.3: depth-weighted MEAN (not max) cosine of each fact to the Coverage Set entries.

    ``Σ(depth_i × cos(fact, entry_i)) / Σ depth_i``. Empty Coverage Set (window 1, §2.7) or weights
    summing to 0 -> 0.0 for every fact. Negative weights are rejected (depth is 0..1, §3.2).
    """
    sims, n = _sims(fact_vecs, coverage_vecs, "coverage_vecs")
    w = np.asarray(depth_weights, dtype=np.float64).reshape(-1)
    if w.shape[0] != sims.shape[1]:
        raise ValueError("depth_weights must have one weight per coverage entry")
    if (w < 0).any() or np.isnan(w).any():
        raise ValueError("depth_weights must be >= 0")
    total = float(w.sum())
    if sims.shape[1] == 0 or total <= 0.0:
        return np.zeros(n)
    return np.asarray(sims @ w / total, dtype=np.float64)


def residual_pull(fact_vecs: ArrayLike, residual_vecs: ArrayLike) -> FloatArray:
    """SPEC-024 §2.2: ``max(cos(fact, residual_j))`` over the Residual Set; 0.0 if it is empty."""
    sims, n = _sims(fact_vecs, residual_vecs, "residual_vecs")
    if sims.shape[1] == 0:
        return np.zeros(n)
    return np.asarray(sims.max(axis=1), dtype=np.float64)


def window_one_residual_pull(pull: ArrayLike, coverage_empty: bool) -> FloatArray:
    """SPEC-024 §2.7: with an empty Coverage Set the Residual Set is the whole task, so the pull is 0.0.

    This is what makes the window-1 CDR score equal the SPEC-003 Phase 2 score (importance x relevance).
    """
    p = np.asarray(pull, dtype=np.float64)
    return np.zeros_like(p) if coverage_empty else p


def coverage_penalty(coverage: ArrayLike) -> FloatArray:
    """SPEC-024 §2.2/§2.4: ``min(coverage_score, 0.80)``: capped, so no fact is ever fully excluded.

    Clipped below at 0: a fact anti-correlated with covered topics earns no bonus (novelty stays <= 1).
    """
    return np.clip(np.asarray(coverage, dtype=np.float64), 0.0, COVERAGE_PENALTY_CAP)


def novelty(coverage: ArrayLike) -> FloatArray:
    """SPEC-024 §2.4: ``novelty = max(1 - coverage_penalty, MIN_NOVELTY_FLOOR)``; never below 0.20."""
    return np.maximum(1.0 - coverage_penalty(coverage), MIN_NOVELTY_FLOOR)


def relevance_gate(relevance: ArrayLike, min_relevance: float = CDR_MIN_RELEVANCE) -> NDArray[np.bool_]:
    """SPEC-024 §2.6: facts with relevance < CDR_MIN_RELEVANCE leave the candidate set, whatever novelty."""
    return np.asarray(relevance, dtype=np.float64) >= min_relevance


def effective_relevance(relevance: ArrayLike, residual_pull: ArrayLike) -> FloatArray:
    """SPEC-024 §2.2: ``max(relevance(fact, query), residual_pull(fact))``."""
    return np.maximum(np.asarray(relevance, dtype=np.float64), np.asarray(residual_pull, dtype=np.float64))


def cdr_score(
    importance: ArrayLike,
    relevance: ArrayLike,
    residual_pull: ArrayLike,
    novelty: ArrayLike,
    recency: ArrayLike,
    ngram_penalty: ArrayLike,
) -> FloatArray:
    """SPEC-027 §3.3 (final form of SPEC-024 §2.2 + §5.2): the CDR score of each candidate.

    ``importance × max(relevance, residual_pull) × novelty × recency_factor × (1 - ngram_penalty)``.
    All arguments broadcast (scalars allowed).
    """
    imp = np.asarray(importance, dtype=np.float64)
    nov = np.asarray(novelty, dtype=np.float64)
    rec = np.asarray(recency, dtype=np.float64)
    pen = np.asarray(ngram_penalty, dtype=np.float64)
    out = imp * effective_relevance(relevance, residual_pull) * nov * rec * (1.0 - pen)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class CdrSignals:
    """Per-candidate CDR inputs, each ``(n,)``; ``residual_pull`` already has §2.7 applied."""

    relevance: FloatArray
    coverage: FloatArray
    residual_pull: FloatArray
    novelty: FloatArray


def cdr_signals(
    fact_vecs: ArrayLike,
    query_vec: ArrayLike,
    coverage_vecs: ArrayLike,
    depth_weights: ArrayLike,
    residual_vecs: ArrayLike,
) -> CdrSignals:
    """SPEC-024 §7.1: the embedding-derived signals of ``cdr_rank`` for every candidate at once."""
    cov_rows = _matrix(coverage_vecs, "coverage_vecs").shape[0]
    cov = coverage_score(fact_vecs, coverage_vecs, depth_weights)
    pull = window_one_residual_pull(residual_pull(fact_vecs, residual_vecs), coverage_empty=cov_rows == 0)
    return CdrSignals(relevance(fact_vecs, query_vec), cov, pull, novelty(cov))


def cdr_rank(scores: ArrayLike, ids: Sequence[str], eligible: ArrayLike | None = None) -> list[int]:
    """SPEC-024 §7.1: candidates sorted by score descending; equal scores by id, so replays agree.

    ``eligible`` (bool mask, e.g. ``relevance_gate``) drops candidates before ranking.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(ids) != s.shape[0]:
        raise ValueError("one id per score")
    keep = np.ones(s.shape[0], dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    idx = np.flatnonzero(keep)
    # lexsort: last key is primary; ids ranked as strings via their sorted position.
    if all(map(operator.le, ids, islice(ids, 1, None))):  # already in id order (a candidate set is): no sort
        id_rank = np.arange(len(ids), dtype=np.int64)
    else:
        id_rank = np.empty(len(ids), dtype=np.int64)
        id_rank[np.argsort(np.asarray(ids, dtype=object), kind="stable")] = np.arange(len(ids))
    order = np.lexsort((id_rank[idx], -s[idx]))
    return [int(i) for i in idx[order]]


def update_residual_set(residual_ids: Iterable[str], addressed_ids: Iterable[str]) -> list[str]:
    """SPEC-024 §3.1: after a window, the Residual Set loses the sub-queries that window addressed."""
    done = set(addressed_ids)
    return [r for r in residual_ids if r not in done]
