"""The nearest neighbours of a micro-batch's new facts, as record-by-record ingest finds them.

SPEC-025 §1.3 gives each new fact its K nearest facts with cosine >= the edge threshold, among the
facts recorded before it. Record by record that is one search per document, after the document's own
facts were added. For a batch it is the union of two exact parts:

- the fabric as it stood before the batch: one k-NN search for all the batch's facts;
- the batch itself: one matrix product, masked so that a fact sees the facts of its own document and
  of the documents before it in arrival order, never those after it.

The K best of the union (score rounded to the port's 6 decimals, then fact id: ``vectors.port.rank``) are
the K best of what the fact would have been offered record by record, every score computed the same
way whichever part found the pair. Edge writing keeps every fact's
K strongest of all edges ever proposed to it (``processors.similarity``), which is the top K of a
union and so independent of how the records were cut into batches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from crp_stream.fabric.vectors.pool import neighbour_pool
from crp_stream.fabric.vectors.port import SCORE_DECIMALS, VectorIndex, VectorItem

# the engine's pool is taken a little wider than K and below the threshold: its own float32 scores
# may rank or cut a pair differently from the float64 cosine that decides
_MARGIN = 8
_SLACK = 1e-5


def tenant_neighbours(
    index: VectorIndex, items: Sequence[VectorItem], owner: Sequence[int], k: int, threshold: float
) -> list[tuple[str, str, float]]:
    """``batch_neighbours`` of a batch that may hold several tenants' facts: each tenant's facts meet
    only that tenant's, in the fabric and in the batch (no edge crosses tenants)."""
    tenants = sorted({it.tenant or "" for it in items})
    if len(tenants) <= 1:
        return batch_neighbours(index, items, owner, k, threshold, items[0].tenant if items else None)
    edges: list[tuple[str, str, float]] = []
    for tenant in tenants:
        at = [i for i, it in enumerate(items) if (it.tenant or "") == tenant]
        part = [items[i] for i in at]
        edges.extend(batch_neighbours(index, part, [owner[i] for i in at], k, threshold, part[0].tenant))
    return edges


def batch_neighbours(
    index: VectorIndex,
    items: Sequence[VectorItem],
    owner: Sequence[int],
    k: int,
    threshold: float,
    tenant: str | None = None,
) -> list[tuple[str, str, float]]:
    """``(new fact, neighbour, cosine)`` for every new fact of a batch (call before its upsert), each
    fact's neighbours best first. ``owner[i]``: the place of item ``i``'s record in the batch (its
    document).

    Every cosine is the float64 dot product of the two unit vectors as stored (float32), one pair at a
    time (``einsum`` over rows, no BLAS blocking): the same number whether the pair met within a batch
    or across two, so the graph does not depend on how the records were cut into batches."""
    n = len(items)
    if n == 0 or k <= 0:
        return []
    ids = [it.fact_id for it in items]
    m = np.stack([np.asarray(it.vector, dtype=np.float64) for it in items])
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    stored32 = m.astype(np.float32)  # what the index will hold
    unit = stored32.astype(np.float64)
    arrays = neighbour_pool(index, stored32, k + _MARGIN, threshold - _SLACK, ids, tenant)
    if arrays is not None:  # the ANN cache's hits as arrays: no Python pair per hit
        names, old, pa, pb = arrays
    else:
        pool = index.neighbours_many(stored32, k + _MARGIN, threshold - _SLACK, ids, tenant)
        names, stored = index.stored_matrix(sorted({f for found in pool for f, _w in found}))
        place = {f: i for i, f in enumerate(names)}
        old = stored.reshape(-1, unit.shape[1])  # float32: each chunk of pairs is widened below, not all rows
        # candidate pairs: (new fact, candidate row) with rows 0..len(names) the fabric's, then the batch's
        pa = np.asarray([a for a, found in enumerate(pool) for f, _w in found if f in place], dtype=np.int64)
        pb = np.asarray([place[f] for found in pool for f, _w in found if f in place], dtype=np.int64)
    wa, wb = _within(unit, owner, k + _MARGIN, threshold - _SLACK)
    a_idx = np.concatenate([pa, wa])
    b_idx = np.concatenate([pb, wb + len(names)])
    if a_idx.shape[0] == 0:
        return []
    rows = np.concatenate([old, stored32])
    cos = np.empty(a_idx.shape[0], dtype=np.float64)
    for lo in range(0, a_idx.shape[0], _CHUNK):
        hi = min(lo + _CHUNK, a_idx.shape[0])
        cos[lo:hi] = np.einsum("ij,ij->i", rows[b_idx[lo:hi]].astype(np.float64), unit[a_idx[lo:hi]])
    cos = np.round(cos, SCORE_DECIMALS)
    keep = cos >= threshold
    a_idx, b_idx, cos = a_idx[keep], b_idx[keep], cos[keep]
    # per new fact: by score descending, then neighbour id (``vectors.port.rank``), the first K
    every = names + ids
    order_of = np.empty(len(every), dtype=np.int64)
    order_of[sorted(range(len(every)), key=every.__getitem__)] = np.arange(len(every))
    order = np.lexsort((order_of[b_idx], -cos, a_idx))
    a_idx, b_idx, cos = a_idx[order], b_idx[order], cos[order]
    first = np.searchsorted(a_idx, a_idx, side="left")
    top = np.arange(a_idx.shape[0]) - first < k
    return [
        (ids[a], every[b], w)
        for a, b, w in zip(a_idx[top].tolist(), b_idx[top].tolist(), cos[top].tolist(), strict=True)
    ]


_CHUNK = 4096  # pairs scored at once (two float64 matrices of _CHUNK x dim)


def _within(unit: np.ndarray, owner: Sequence[int], k: int, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs ``(a, b)`` among the batch's facts: for each new fact ``a`` its at most ``k``
    best (a screen; ties at the k-th kept) among those it may see, the facts of its own document and
    of the documents before it. Owners ascend, so what a document's facts see is a prefix of the
    batch: each document's rows are screened against that prefix only (half the partitions of the
    whole square), and only rows with more than ``k`` candidates are partitioned. The products come
    from one matrix product of the batch (small products per document cost more than the square)."""
    n = unit.shape[0]
    empty = np.zeros(0, dtype=np.int64)
    if n < 2:
        return empty, empty
    doc = np.asarray(owner, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]])
    ends = np.r_[starts[1:], n]
    out_a: list[np.ndarray] = []
    out_b: list[np.ndarray] = []
    square = unit @ unit.T
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        if hi < 2:
            continue
        sims = square[lo:hi, :hi].copy()
        sims[np.arange(hi - lo), np.arange(lo, hi)] = -np.inf  # a fact is not its own neighbour
        sims[sims < floor] = -np.inf
        if hi > k:
            crowded = np.flatnonzero(np.count_nonzero(sims > -np.inf, axis=1) > k)
            if crowded.shape[0]:
                part = sims[crowded]
                kth = np.partition(part, hi - k, axis=1)[:, hi - k]
                part[part < kth[:, None]] = -np.inf
                sims[crowded] = part
        a, b = np.nonzero(sims > -np.inf)
        out_a.append(a.astype(np.int64) + lo)
        out_b.append(b.astype(np.int64))
    if not out_a:
        return empty, empty
    return np.concatenate(out_a), np.concatenate(out_b)


__all__ = ["batch_neighbours", "tenant_neighbours"]
