"""The nearest neighbours of a micro-batch's new facts, as record-by-record ingest finds them.

SPEC-025 §1.3 gives each new fact its K nearest facts with cosine >= the edge threshold, among the
facts recorded before it. Record by record that is one search per document, after the document's own
facts were added. For a batch it is the union of two exact parts:

- the fabric as it stood before the batch: one k-NN search for all the batch's facts;
- the batch itself: one matrix product, masked so that a fact sees the facts of its own document and
  of the documents before it in arrival order, never those after it.

The K best of the union (score rounded to the port's 6 decimals, then fact id: ``vectors.rank``) are
the K best of what the fact would have been offered record by record, every score computed the same
way whichever part found the pair. Edge writing keeps every fact's
K strongest of all edges ever proposed to it (``processors.similarity``), which is the top K of a
union and so independent of how the records were cut into batches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from crp_stream.fabric.vectors import SCORE_DECIMALS, VectorIndex, VectorItem, rank

# the engine's pool is taken a little wider than K and below the threshold: its own float32 scores
# may rank or cut a pair differently from the float64 cosine that decides
_MARGIN = 8
_SLACK = 1e-5


def batch_neighbours(
    index: VectorIndex, items: Sequence[VectorItem], owner: Sequence[int], k: int, threshold: float
) -> list[tuple[str, str, float]]:
    """``(new fact, neighbour, cosine)`` for every new fact of a batch (call before its upsert).
    ``owner[i]``: the place of item ``i``'s record in the batch (its document).

    Every cosine is the float64 dot product of the two unit vectors as stored (float32), one row at a
    time (``einsum``, no BLAS blocking): the same number whether the pair met within a batch or across
    two, so the graph does not depend on how the records were cut into batches."""
    n = len(items)
    if n == 0 or k <= 0:
        return []
    ids = [it.fact_id for it in items]
    m = np.stack([np.asarray(it.vector, dtype=np.float64) for it in items])
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    stored32 = m.astype(np.float32)  # what the index will hold
    unit = stored32.astype(np.float64)
    pool = index.neighbours_many(stored32, k + _MARGIN, threshold - _SLACK, ids)
    vectors = index.stored_vectors(sorted({f for found in pool for f, _w in found}))
    within = _within(unit, owner, k + _MARGIN, threshold - _SLACK)
    edges: list[tuple[str, str, float]] = []
    for a in range(n):
        names = [f for f, _w in pool[a] if f in vectors]
        rows = [np.asarray(vectors[f], dtype=np.float64) for f in names]
        mine = within[a]
        if mine.shape[0]:
            names += [ids[b] for b in mine.tolist()]
            rows.append(unit[mine])
        if not names:
            continue
        cos = np.round(np.einsum("ij,j->i", np.vstack(rows), unit[a]), SCORE_DECIMALS)
        found = rank([(f, w) for f, w in zip(names, cos.tolist(), strict=True) if w >= threshold])[:k]
        edges.extend((ids[a], other, w) for other, w in found)
    return edges


def _within(unit: np.ndarray, owner: Sequence[int], k: int, floor: float) -> list[np.ndarray]:
    """Per new fact, its at most ``k`` best candidates (a screen, ties at the k-th kept) among the
    batch's facts it may see: those of its own document and of the documents before it."""
    n = unit.shape[0]
    if n < 2:
        return [np.zeros(0, dtype=np.int64) for _ in range(n)]
    sims = unit @ unit.T
    doc = np.asarray(owner, dtype=np.int64)
    seen = doc[None, :] <= doc[:, None]
    np.fill_diagonal(seen, False)
    sims[~seen | (sims < floor)] = -np.inf
    out: list[np.ndarray] = []
    for a in range(n):
        row = sims[a]
        cand = np.flatnonzero(row > -np.inf)
        if cand.shape[0] > k:
            kth = np.partition(row[cand], cand.shape[0] - k)[cand.shape[0] - k]
            cand = cand[row[cand] >= kth]
        out.append(cand)
    return out


__all__ = ["batch_neighbours"]
