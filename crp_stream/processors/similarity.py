"""The similarity edges of newly ingested facts, each fact held to its K strongest (SPEC-025 §1.3).

A batch's new facts link to their K nearest neighbours, in both directions; every fact that gained
an edge then keeps its K strongest similarity edges (``core.edges.edges_past_k``) and drops the rest,
in its own direction only. The touched facts' current edges come from the fabric's graph cache
(complete entries; misses loaded in one batched read, as the envelope's walk loads them), and the
cache is left holding what was written: the facts a batch touches are the ones the next batch, and
the next window requests, read again. Only the rows that survive the bound are inserted, and only
stored rows that fall out of it are deleted: the same table as inserting every row and pruning.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from crp_stream.core.edges import edges_past_k_ranked
from crp_stream.core.graph_rank import EDGE_KINDS
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.fabric.graph import GraphCache

_SIMILARITY = EDGE_KINDS.index("similarity")


def write_similarity_edges(uow: UnitOfWork, edges: Sequence[tuple[str, str, float]], k: int) -> set[str]:
    """Write ``(new fact, neighbour, cosine)`` edges under the K bound; returns every fact touched."""
    new: dict[tuple[str, str], float] = {}
    for a, b, w in edges:  # both directions; the first weight of a pair wins, as ON CONFLICT DO NOTHING
        if a != b:
            new.setdefault((a, b), float(w))
            new.setdefault((b, a), float(w))
    if not new:
        return set()
    repo, graph = uow.repo, uow.fabric.graph
    repo.sync_graph(graph)  # a cache behind another writer is dropped first
    touched = sorted({s for s, _d in new})
    t_ints = np.asarray(graph.index(touched), dtype=np.int64)
    rows = graph.rows(repo, t_ints.tolist())  # the stored edges, before this batch writes any
    sizes = [len(nb) for nb, _w, _k in rows]
    s_src = np.repeat(t_ints, sizes)
    s_dst = np.concatenate([np.zeros(0, dtype=np.int64), *(nb for nb, _w, _k in rows)])
    s_w = np.concatenate([np.zeros(0, dtype=np.float64), *(w for _nb, w, _k in rows)])
    s_kind = np.concatenate([np.zeros(0, dtype=np.int8), *(kd for _nb, _w, kd in rows)])
    pairs = list(new)
    n_src = np.asarray(graph.index([a for a, _b in pairs]), dtype=np.int64)
    n_dst = np.asarray(graph.index([b for _a, b in pairs]), dtype=np.int64)
    n_w = np.fromiter(new.values(), dtype=np.float64, count=len(pairs))
    sim = s_kind == _SIMILARITY
    fresh = ~np.isin((n_src << 32) | n_dst, (s_src[sim] << 32) | s_dst[sim])  # a stored row is kept as it is
    n_src, n_dst, n_w = n_src[fresh], n_dst[fresh], n_w[fresh]
    # rank every similarity row of the touched facts, stored and new (ints -> byte order of the ids)
    a_src = np.concatenate([s_src[sim], n_src])
    a_dst = np.concatenate([s_dst[sim], n_dst])
    a_w = np.concatenate([s_w[sim], n_w])
    drop = np.zeros(a_src.shape[0], dtype=bool)
    codes = _Ranks(graph, np.concatenate([a_src, a_dst, s_dst[~sim]]))  # every id ranked here, sorted once
    drop[edges_past_k_ranked(codes(a_src), codes(a_dst), a_w, k)] = True
    stored = int(sim.sum())
    names = graph.names
    keep_new = ~drop[stored:]
    repo.add_directed_edges(
        [
            (names[a], names[b], w)
            for a, b, w in zip(n_src[keep_new].tolist(), n_dst[keep_new].tolist(), n_w[keep_new].tolist(), strict=True)
        ]
    )
    gone = drop[:stored]
    repo.delete_similarity(
        sorted(
            (names[a], names[b])
            for a, b in zip(a_src[:stored][gone].tolist(), a_dst[:stored][gone].tolist(), strict=True)
        )
    )
    # the touched facts' entries as now stored: other kinds as they were, the similarity rows kept
    e_src = np.concatenate([s_src[~sim], a_src[~drop]])
    e_dst = np.concatenate([s_dst[~sim], a_dst[~drop]])
    e_w = np.concatenate([s_w[~sim], a_w[~drop]])
    e_kind = np.concatenate([s_kind[~sim], np.full(int((~drop).sum()), _SIMILARITY, dtype=np.int8)])
    order = np.lexsort((_KIND_NAME_RANK[e_kind], codes(e_dst), e_src))  # the store's key order
    e_src, e_dst, e_w, e_kind = e_src[order], e_dst[order], e_w[order], e_kind[order]
    lo = np.searchsorted(e_src, t_ints, side="left").tolist()
    hi = np.searchsorted(e_src, t_ints, side="right").tolist()
    graph.install(
        touched, [(e_dst[a:b].copy(), e_w[a:b].copy(), e_kind[a:b].copy()) for a, b in zip(lo, hi, strict=True)]
    )
    return set(touched)


# kinds in the order of their names (the store orders a fact's rows by neighbour id, then kind)
_KIND_NAME_RANK = np.argsort(np.argsort(np.asarray(EDGE_KINDS))).astype(np.int64)


class _Ranks:
    """Order-preserving codes of the fact ids behind cache ints (their ids' byte order), for every int
    in ``universe``: the ids are sorted once per batch, then any subset is coded by a lookup."""

    def __init__(self, graph: GraphCache, universe: npt.NDArray[np.int64]) -> None:
        self.uniq = np.unique(universe)
        names = graph.names
        by_name = np.argsort(np.asarray([names[i] for i in self.uniq.tolist()]), kind="stable")
        self.rank = np.empty_like(by_name)
        self.rank[by_name] = np.arange(by_name.shape[0])

    def __call__(self, ints: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        if ints.shape[0] == 0:
            return ints
        return self.rank[np.searchsorted(self.uniq, ints)].astype(np.int64)


__all__ = ["write_similarity_edges"]
