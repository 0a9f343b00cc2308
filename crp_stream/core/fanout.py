"""Parallel Coverage Isolation (SPEC-027 §1): disjoint coverage scopes for fan-out branches.

Deterministic: k-means with farthest-point initialisation from index 0, a fixed number of Lloyd
iterations, every tie broken by the lowest index; no randomness anywhere.

API
---
- ``KMEANS_ITERATIONS = 25``.
- ``partition_residual_for_fanout(embeddings, k, iterations=25) -> list[list[int]]`` (§1.4): row indices
  of the Residual Set sub-queries, grouped into at most ``k`` non-empty partitions; each partition sorted,
  partitions ordered by their first index. ``n <= k`` -> one sub-query per partition; ``n == 0`` -> [].
- ``assign_shared_facts(branch_scores) -> NDArray[int64]`` (§1.6): for a ``(branches, n)`` score matrix
  (``-inf`` = the branch did not retrieve the fact), the owning branch of each fact, ``-1`` if none.
- ``coverage_partitions_header(partitions) -> int`` (§1.7).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

KMEANS_ITERATIONS = 25


def _sq_dists(points: NDArray[np.float64], centres: NDArray[np.float64]) -> NDArray[np.float64]:
    d = (points**2).sum(axis=1)[:, None] - 2.0 * points @ centres.T + (centres**2).sum(axis=1)[None, :]
    return np.asarray(np.maximum(d, 0.0), dtype=np.float64)


def _farthest_point_init(points: NDArray[np.float64], k: int) -> list[int]:
    chosen = [0]
    nearest = _sq_dists(points, points[[0]])[:, 0]
    for _ in range(1, k):
        cand = nearest.copy()
        cand[chosen] = -1.0  # never pick a chosen point twice, even among duplicates
        nxt = int(np.argmax(cand))  # argmax returns the first (lowest) index on ties
        chosen.append(nxt)
        nearest = np.minimum(nearest, _sq_dists(points, points[[nxt]])[:, 0])
    return chosen


def _fill_empty(labels: NDArray[np.int64], dists: NDArray[np.float64], k: int) -> NDArray[np.int64]:
    """Give every empty cluster the point farthest from its centre among clusters of size > 1."""
    labels = labels.copy()
    for c in range(k):
        if np.any(labels == c):
            continue
        counts = np.bincount(labels, minlength=k)
        own = dists[np.arange(labels.shape[0]), labels]
        donor_ok = counts[labels] > 1
        own = np.where(donor_ok, own, -1.0)
        labels[int(np.argmax(own))] = c
    return labels


def partition_residual_for_fanout(
    embeddings: ArrayLike, k: int, iterations: int = KMEANS_ITERATIONS
) -> list[list[int]]:
    """SPEC-027 §1.4: cluster the Residual Set sub-queries into ``k`` disjoint, coherent partitions.

    Fewer sub-queries than branches -> one each (so fewer than ``k`` partitions). Otherwise k-means on
    the embeddings (squared Euclidean; on L2-normalised vectors that ranks like cosine), seeded by
    farthest-point from index 0, ``iterations`` Lloyd steps; no partition is ever empty.
    """
    if k < 1:
        raise ValueError("k (fan-out width) must be >= 1")
    pts = np.asarray(embeddings, dtype=np.float64)
    n = 0 if pts.size == 0 else pts.shape[0]
    if n == 0:
        return []
    if pts.ndim != 2:
        raise ValueError("embeddings must be (n, dim)")
    if n <= k:
        return [[i] for i in range(n)]
    centres = pts[_farthest_point_init(pts, k)]
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(max(iterations, 1)):
        dists = _sq_dists(pts, centres)
        labels = _fill_empty(np.argmin(dists, axis=1).astype(np.int64), dists, k)
        new = np.stack([pts[labels == c].mean(axis=0) for c in range(k)])
        if np.array_equal(new, centres):
            break
        centres = new
    groups = [sorted(int(i) for i in np.flatnonzero(labels == c)) for c in range(k)]
    return sorted(groups)


def assign_shared_facts(branch_scores: ArrayLike) -> NDArray[np.int64]:
    """SPEC-027 §1.6: a fact two branches both want goes to one owner, so fan-in has no duplicate.

    The owner is the branch with the highest score for the fact; equal scores go to the lowest branch
    index. ``-inf`` (or ``nan``) marks a branch that did not retrieve the fact; no branch -> ``-1``.
    """
    s = np.asarray(branch_scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError("branch_scores must be (branches, facts)")
    if s.shape[0] == 0:
        return np.full(s.shape[1], -1, dtype=np.int64)
    s = np.where(np.isnan(s), -np.inf, s)
    owner = np.argmax(s, axis=0).astype(np.int64)
    return np.where(np.isneginf(s.max(axis=0)), -1, owner).astype(np.int64)


def coverage_partitions_header(partitions: Sequence[Sequence[int]]) -> int:
    """SPEC-027 §1.7: CRP-Context-Coverage-Partitions = the number of disjoint partitions created."""
    return len(partitions)
