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
from crp_stream.fabric.caches.graph import GraphCache
from crp_stream.fabric.fabric import UnitOfWork

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
    t_list = graph.index(touched)
    rows = graph.rows(repo, t_list)  # the stored edges, before this batch writes any
    n_facts = len(rows)
    sizes = np.fromiter((nb.shape[0] for nb, _w, _k in rows), dtype=np.int64, count=n_facts)
    s_fact = np.repeat(np.arange(n_facts, dtype=np.int64), sizes)  # a stored row's place in ``touched``
    s_dst = np.concatenate([np.zeros(0, dtype=np.int64), *(nb for nb, _w, _k in rows)])
    s_w = np.concatenate([np.zeros(0, dtype=np.float64), *(w for _nb, w, _k in rows)])
    s_kind = np.concatenate([np.zeros(0, dtype=np.int8), *(kd for _nb, _w, kd in rows)])
    pairs = list(new)
    n_src = np.asarray(graph.index([a for a, _b in pairs]), dtype=np.int64)
    n_dst = np.asarray(graph.index([b for _a, b in pairs]), dtype=np.int64)
    n_w = np.fromiter(new.values(), dtype=np.float64, count=len(pairs))
    # every int seen here coded by its id's byte order (ids sorted once); ``touched`` is sorted, so a
    # fact's place in it is such a code too
    code, width = _codes(graph, (np.asarray(t_list, dtype=np.int64), s_dst, n_dst))
    n_fact = np.searchsorted(code[np.asarray(t_list, dtype=np.int64)], code[n_src])
    sim = np.flatnonzero(s_kind == _SIMILARITY)
    st_fact, st_code, st_w = s_fact[sim], code[s_dst[sim]], s_w[sim]
    fresh = ~_member(n_fact * width + code[n_dst], st_fact * width + st_code)  # a stored row stays as it is
    n_dst, n_w, n_fact = n_dst[fresh], n_w[fresh], n_fact[fresh]
    drop_st, drop_n = _past_k(st_fact, st_code, st_w, n_fact, code[n_dst], n_w, n_facts, k)
    names = graph.names
    keep = ~drop_n
    put = np.flatnonzero(keep)
    put = put[np.argsort(n_fact[put] * width + code[n_dst[put]])]  # key order: SQLite's index pages in turn
    repo.add_directed_edges(
        [
            (touched[f], names[b], w)
            for f, b, w in zip(n_fact[put].tolist(), n_dst[put].tolist(), n_w[put].tolist(), strict=True)
        ]
    )
    gone = sim[drop_st]  # stored rows are in key order: these come out sorted by (src, dst)
    repo.delete_similarity(
        [(touched[f], names[b]) for f, b in zip(s_fact[gone].tolist(), s_dst[gone].tolist(), strict=True)]
    )
    # the cache keeps what was written: the entries of facts that gained or lost a row rebuilt in the
    # store's key order (neighbour id, then kind), the others installed as they were
    changed = np.zeros(n_facts, dtype=bool)
    changed[n_fact[keep]] = True
    changed[s_fact[gone]] = True
    stays = np.ones(s_fact.shape[0], dtype=bool)
    stays[gone] = False
    stays &= changed[s_fact]
    e_fact = np.concatenate([s_fact[stays], n_fact[keep]])
    e_dst = np.concatenate([s_dst[stays], n_dst[keep]])
    e_w = np.concatenate([s_w[stays], n_w[keep]])
    e_kind = np.concatenate([s_kind[stays], np.full(int(keep.sum()), _SIMILARITY, dtype=np.int8)])
    e_key = (e_fact * width + code[e_dst]) * len(EDGE_KINDS) + _KIND_NAME_RANK[e_kind]
    order = np.argsort(e_key, kind="stable")  # the stored part is one sorted run already
    e_fact, e_dst, e_w, e_kind = e_fact[order], e_dst[order], e_w[order], e_kind[order]
    which = np.flatnonzero(changed)
    lo = np.searchsorted(e_fact, which, side="left").tolist()
    hi = np.searchsorted(e_fact, which, side="right").tolist()
    entries = list(rows)
    for f, a, b in zip(which.tolist(), lo, hi, strict=True):
        entries[f] = (e_dst[a:b].copy(), e_w[a:b].copy(), e_kind[a:b].copy())
    graph.install(touched, entries)
    return set(touched)


# kinds in the order of their names (the store orders a fact's rows by neighbour id, then kind)
_KIND_NAME_RANK = np.argsort(np.argsort(np.asarray(EDGE_KINDS))).astype(np.int64)


def _codes(graph: GraphCache, parts: Sequence[npt.NDArray[np.int64]]) -> tuple[npt.NDArray[np.int64], int]:
    """Order-preserving codes of the fact ids behind the cache ints in ``parts`` (their ids' byte
    order), as a table indexed by int (other ints' entries are undefined), and how many there are."""
    seen = np.zeros(len(graph.names), dtype=bool)
    for p in parts:
        seen[p] = True
    uniq = np.flatnonzero(seen)
    by_name = np.argsort(graph.name_array()[uniq], kind="stable")
    code = np.empty(seen.shape[0], dtype=np.int64)
    code[uniq[by_name]] = np.arange(uniq.shape[0], dtype=np.int64)
    return code, max(int(uniq.shape[0]), 1)


def _member(keys: npt.NDArray[np.int64], table: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """``np.isin(keys, table)``, by binary search when ``table`` ascends strictly (no sort of it)."""
    if table.shape[0] == 0:
        return np.zeros(keys.shape[0], dtype=bool)
    if not bool((table[1:] > table[:-1]).all()):
        return np.isin(keys, table)
    pos = np.minimum(np.searchsorted(table, keys), table.shape[0] - 1)
    return np.asarray(table[pos] == keys)


def _past_k(
    st_fact: npt.NDArray[np.int64],
    st_dst: npt.NDArray[np.int64],
    st_w: npt.NDArray[np.float64],
    n_fact: npt.NDArray[np.int64],
    n_dst: npt.NDArray[np.int64],
    n_w: npt.NDArray[np.float64],
    n_facts: int,
    k: int,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """``edges_past_k_ranked`` over a batch's stored (grouped by fact) and new similarity rows, as
    (stored dropped, new dropped). Only facts whose list can change are ranked: one with room for
    every new row drops nothing, and one at K whose weakest stored edge outweighs every new one
    drops exactly its new rows (SPEC-025 §1.3 ranks by weight first). Most touched facts are one of
    these, and the sort is the cost."""
    stored = np.bincount(st_fact, minlength=n_facts)
    added = np.bincount(n_fact, minlength=n_facts)
    weakest = np.full(n_facts, np.inf)
    have = np.flatnonzero(stored)
    if have.shape[0]:
        weakest[have] = np.minimum.reduceat(st_w, (np.cumsum(stored) - stored)[have])
    strongest = np.full(n_facts, -np.inf)
    np.maximum.at(strongest, n_fact, n_w)
    beaten = (stored == k) & (strongest < weakest)  # NaN compares False: ranked
    ranked = (stored + added > k) & ~beaten
    fact = np.concatenate([st_fact, n_fact])
    drop = np.zeros(fact.shape[0], dtype=bool)
    drop[st_fact.shape[0] :] = beaten[n_fact]
    pick = np.flatnonzero(ranked[fact])
    if pick.shape[0]:
        dst = np.concatenate([st_dst, n_dst])[pick]
        w = np.concatenate([st_w, n_w])[pick]
        drop[pick[edges_past_k_ranked(fact[pick], dst, w, k)]] = True
    return drop[: st_fact.shape[0]], drop[st_fact.shape[0] :]


__all__ = ["write_similarity_edges"]
