"""The candidate neighbours of many new facts as arrays, from the ANN cache (ingest's edge search).

``VectorIndex.neighbours_many`` turns every hit into a Python pair, ranks each query's list in Python
and the caller maps the ids back to rows of stored vectors: at 100k facts most of a batch's k-NN time.
``neighbour_pool`` gives the same pool (the same ranking: scores rounded by ``round`` to the port's 6
decimals, then fact id; the same tie rule, settled by ``neighbours`` one query at a time) as arrays:
per pair the query and the neighbour, and the neighbours' stored float32 vectors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from crp_stream.fabric.vectors.ann import EXPANSION_EDGES
from crp_stream.fabric.vectors.checks import Vector, normalise
from crp_stream.fabric.vectors.payload import Constraint, scope
from crp_stream.fabric.vectors.port import SCORE_DECIMALS, TIE_MARGIN, VectorIndex

Ints = npt.NDArray[np.int64]


def neighbour_pool(
    index: VectorIndex,
    queries: Vector,
    k: int,
    min_score: float,
    exclude_ids: Sequence[str],
    tenant: str | None = None,
) -> tuple[list[str], Vector, Ints, Ints] | None:
    """``neighbours_many(queries, k, min_score, exclude_ids, tenant)`` as ``(ids, vectors, qa, nb)``:
    pair ``p`` is query ``qa[p]`` and neighbour ``ids[nb[p]]`` (stored vector ``vectors[nb[p]]``), each
    query's pairs best first. None when the ANN cache cannot answer (the caller asks ``neighbours_many``)."""
    dim, n = index.dim, queries.shape[0]
    where = Constraint(exclude_statuses=("quarantined",), tenant=scope(tenant))
    if k <= 0 or dim is None or n == 0 or where.tenant is not None or index.has_tenants():
        return None
    ann = index.ann()
    if ann is None:
        return None
    matrix = np.stack([normalise(q, dim) for q in queries])  # row by row, as ``neighbours_many``
    limit = k + 1 + TIE_MARGIN
    found = ann.search_slots(matrix, limit, where.exclude_statuses, where.alive_at, min_score, None, EXPANSION_EDGES)
    if found is None:
        return None
    sizes = np.fromiter((s.shape[0] for s, _w in found), dtype=np.int64, count=n)
    slots = np.concatenate([np.zeros(0, dtype=np.int64), *(s for s, _w in found)])
    # ``round`` as ``vectors.rank`` rounds: numpy's rounding may differ in the last place
    scores = np.asarray(
        [round(w, SCORE_DECIMALS) for w in np.concatenate([np.zeros(0), *(w for _s, w in found)]).tolist()]
    )
    query = np.repeat(np.arange(n, dtype=np.int64), sizes)
    uniq, at = np.unique(slots, return_inverse=True)
    names = ann.ids_of(uniq.tolist())
    code = np.empty(len(names), dtype=np.int64)
    code[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names), dtype=np.int64)
    own = ann.slots(exclude_ids)
    keep = (slots != own[query]) & (scores >= min_score)
    query, at, scores = query[keep], at[keep], scores[keep]
    order = np.lexsort((code[at], -scores, query))
    query, at, scores = query[order], at[order], scores[order]
    counts = np.bincount(query, minlength=n)
    start = np.cumsum(counts) - counts
    kth = scores[np.minimum(start + k - 1, max(scores.shape[0] - 1, 0))] if scores.shape[0] else np.zeros(n)
    last = scores[np.maximum(start + counts - 1, 0)] if scores.shape[0] else np.zeros(n)
    settled = (sizes < limit) | ((counts > k) & (last < kth))
    rank = np.arange(query.shape[0], dtype=np.int64) - start[query]
    take = (rank < k) & settled[query]
    qa, nb = query[take], at[take]
    ids = list(names)
    place = {f: i for i, f in enumerate(ids)}
    vectors = ann.stored()[uniq]
    extra_a: list[int] = []
    extra_b: list[int] = []
    unsettled = np.flatnonzero(~settled).tolist()
    for a in unsettled:  # a tie reaches past the fetched hits: settled one query at a time
        for f, _w in index.neighbours(queries[a], k, min_score, exclude_ids[a], tenant):
            if f not in place:
                place[f] = len(ids)
                ids.append(f)
            extra_a.append(a)
            extra_b.append(place[f])
    if len(ids) > len(names):
        more, rows = index.stored_matrix(ids[len(names) :])
        row_of = dict(zip(more, rows.reshape(-1, dim), strict=True))
        if len(row_of) != len(ids) - len(names):
            return None  # a vector the index cannot give back: the caller's path decides
        vectors = np.concatenate([vectors, np.stack([row_of[f] for f in ids[len(names) :]])])
    return (
        ids,
        vectors,
        np.concatenate([qa, np.asarray(extra_a, dtype=np.int64)]),
        np.concatenate([nb, np.asarray(extra_b, dtype=np.int64)]),
    )


__all__ = ["neighbour_pool"]
