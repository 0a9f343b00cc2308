"""CDGR's anchors and connectors for one branch (SPEC-025 §2, §5.1, §6), over the fabric's typed graph.

1. Seeds (§2.2): the top ``S = floor((1 - connector_budget) × budget)`` facts by CDR, plus the lead
   fact of every document whose title the query names (a mention of the query; half the weight of
   the best seed: a name is evidence, weaker than the dense match the best anchor is).
2. Walk (§2.3): breadth-first over every edge kind, ``max_hops`` (1-3) levels; the depth actually
   walked is ``CRP-Context-Graph-Hops`` (§5.1).
3. Estimate: personalised PageRank from the seeds over the walked ball, blended with the CDR score
   (``core.graph_rank.connector_estimate``), for anchors and connectors alike.
4. Admission (§6): the top ``S`` anchors stay; every other slot goes to the best estimate, so a
   connector displaces an anchor only when it is expected to be worth more
   (``core.graph_rank.admit_connectors``). Bridge values (§2.4) are still computed for the admitted
   connectors: the ``bridges`` list places them (§2.6) and their mean is the Bridge-Score header.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from crp_stream.core import cdgr, graph_rank
from crp_stream.fabric.fabric import UnitOfWork

NAMED_SEED_SHARE = 0.5
OUTSIDE_PER_SLOT = 4


@dataclass
class Walk:
    depth: int
    ppr: dict[str, float]  # every fact of the walked ball
    ids: list[str]  # the ball, in fact-id order (the local index)
    level: np.ndarray  # per local index
    rank: np.ndarray  # PageRank per local index
    edges: tuple[np.ndarray, np.ndarray, np.ndarray]  # (src, dst, kind) local, (src, dst) order
    named: frozenset[str]
    names: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=str))  # ``ids`` as a unicode array

    def positions(self, fact_ids: list[str]) -> np.ndarray:
        """The local index of each fact id in the ball, -1 for an id outside it: a binary search of
        the sorted names in C (no dict lookup per id, no pass over the ball's thousands)."""
        n = self.names.shape[0]
        if n == 0 or not fact_ids:
            return np.full(len(fact_ids), -1, dtype=np.int64)
        names, q = self.names, np.asarray(fact_ids, dtype=str)
        if q.dtype.itemsize > names.dtype.itemsize:  # compare at one width: no id is cut short
            names = names.astype(q.dtype)
        elif q.dtype.itemsize < names.dtype.itemsize:
            q = q.astype(names.dtype)
        at = np.minimum(np.searchsorted(names, q), n - 1)
        return np.where(names[at] == q, at, -1).astype(np.int64)

    def via(self, fact_id: str) -> str:
        """How a reached fact was reached: ``mention`` for a lead the query names; else the kind of
        the edge into it from the fact one level up with the most PageRank."""
        if fact_id in self.named:
            return "mention"
        i = self.ids.index(fact_id)
        es, ed, ek = self.edges
        into = np.flatnonzero((ed == i) & (self.level[es] == self.level[i] - 1)).tolist()
        if not into:
            return "similarity"
        best = max(into, key=lambda e: (self.rank[es[e]], -es[e]))
        return graph_rank.EDGE_KINDS[int(ek[best])]


def named_leads(uow: UnitOfWork, query_text: str) -> list[str]:
    """Lead facts of the documents whose title the query names (``core.graph_rank.title_key``)."""
    spans = graph_rank.mention_spans(query_text)
    if not spans:
        return []
    graph = uow.repo.sync_graph(uow.fabric.graph)  # its titles, as of this transaction's generation
    return sorted({lead for _k, _s, _d, lead in graph.titled_leads(spans, uow.repo.titled_leads)})


def walk(uow: UnitOfWork, c: Any, seed_idx: list[int], named: list[str], max_hops: int) -> Walk:
    """Walk the typed graph from the seeds and rank the ball by personalised PageRank."""
    g = c.graph
    g.bind(uow)
    seed_ids = [c.ids[i] for i in seed_idx]
    extra = [f for f in named if f not in set(seed_ids)]
    start = g.ints(seed_ids + extra)
    first = g.local(start)  # levels on the compact numbering: arrays as long as the facts met
    level, depth = np.zeros(0, dtype=np.int64), 0  # the loop runs at least once
    for _ in range(max_hops + 1):  # one more level's edges per pass; all levels < max_hops loaded
        level, depth = graph_rank.walk_levels(first, g.lsrc, g.ldst, max_hops)
        need = set(g.glob[np.flatnonzero((level >= 0) & (level < max_hops))].tolist()) - g.loaded
        if not need:
            break
        g.load(uow, need)
    ball = np.flatnonzero(level >= 0)
    names = g.cache.name_array()[g.glob[ball]]  # gathered in C, not string object by string object
    order = id_order(names)  # local index in fact-id order
    local = np.full(level.shape[0], -1, dtype=np.int64)
    local[ball[order]] = np.arange(ball.shape[0])
    ids = names[order].tolist()
    lv = level[ball[order]]
    n = len(ids)
    s_ok = np.zeros(len(g.lsrc), dtype=bool)
    inside = (g.lsrc < level.shape[0]) & (g.ldst < level.shape[0])
    s_ok[inside] = (level[g.lsrc[inside]] >= 0) & (level[g.lsrc[inside]] < max_hops) & (level[g.ldst[inside]] >= 0)
    es, ed = local[g.lsrc[s_ok]], local[g.ldst[s_ok]]
    ew, ek = g.weight[s_ok], g.kind[s_ok]
    e_order = edge_order(es, ed, ek, n)  # canonical: sums run in the same order on every store
    es, ed, ew, ek = es[e_order], ed[e_order], ew[e_order], ek[e_order]
    seed = np.zeros(n, dtype=np.float64)
    w = graph_rank.seed_weights(c.score[seed_idx]) if seed_idx else np.zeros(0)
    # each seed and each named lead once (distinct facts): set, as adding to 0.0 gives the same
    at = local[first]
    seed[at[: len(seed_ids)]] = w
    top = float(w.max(initial=0.0)) or 1.0
    seed[at[len(seed_ids) :]] = NAMED_SEED_SHARE * top
    r = graph_rank.personalized_pagerank(n, es, ed, ew, seed)
    return Walk(
        depth=depth,
        ppr=dict(zip(ids, r.tolist(), strict=True)),
        ids=ids,
        level=lv,
        rank=r,
        edges=(es, ed, ek),
        named=frozenset(extra),
        names=names[order],
    )


def id_order(names: list[str] | np.ndarray) -> np.ndarray:
    """The permutation that sorts fact ids as ``sorted`` does: a fixed-width unicode array orders
    code points, as ``str`` comparison does, and the sort runs in C (the ball has thousands)."""
    if len(names) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.argsort(np.asarray(names, dtype=str), kind="stable")


def edge_order(src: np.ndarray, dst: np.ndarray, kind: np.ndarray, n: int) -> np.ndarray:
    """``np.lexsort((kind, dst, src))``: edges by (src, dst, kind), ties in their order, as one stable
    sort of a combined int64 key (half the time of three keys on the ball's tens of thousands)."""
    kinds = int(kind.max(initial=0)) + 1
    key = (src.astype(np.int64) * max(n, 1) + dst) * kinds + kind
    return np.argsort(key, kind="stable")


def top_reached(ids: list[str], rank: np.ndarray, taken: Any, k: int) -> list[str]:
    """The ``k`` facts of the ball (``ids`` in fact-id order, ``rank`` their PageRank) not ``taken``,
    with the most PageRank (ties: lower fact id), in fact-id order."""
    return top_free(ids, rank, ~np.fromiter(map(taken, ids), dtype=bool, count=len(ids)), k)


def top_free(ids: list[str], rank: np.ndarray, free: np.ndarray, k: int) -> list[str]:
    """``top_reached`` with the ball's facts not taken given as a mask."""
    at = np.flatnonzero(free)
    top = at[np.lexsort((at, -rank[at]))[: max(k, 0)]]
    return [ids[i] for i in np.sort(top).tolist()]


def ball_connectors(w: Walk, pos: np.ndarray, ids: list[str], exclude: set[str], in_order: list[int]) -> list[int]:
    """The candidates (``ids``, ``pos`` their places in the ball, -1 outside it) in the ball, not
    excluded and not in ``in_order``, in the ball's (fact-id) order: ``[index[f] for f in ball if f in
    index and f not in exclude and index[f] not in in_order]`` from the candidates' few hundred."""
    ok = (pos >= 0) & ~np.fromiter(map(exclude.__contains__, ids), dtype=bool, count=len(ids))
    if in_order:
        ok[np.asarray(in_order, dtype=np.int64)] = False
    at = np.flatnonzero(ok)
    return at[np.argsort(pos[at], kind="stable")].tolist()  # type: ignore[no-any-return]


def choose(
    uow: UnitOfWork,
    c: Any,
    sel: Any,
    live: list[int],
    n_anchor: int,
    budget: int,
    policy: Any,
    exclude: set[str],
    append_outside: Any,
) -> None:
    """Fill ``sel`` (anchors, connectors, rank, via, hops) for the live CDR order ``live``."""
    seeds = live[:n_anchor]
    slots = budget - len(seeds)
    key = (tuple(c.ids[i] for i in seeds), policy.max_hops)
    if slots <= 0 or not seeds:
        sel.anchors, sel.connectors, sel.hops = live[:budget], [], 0
        sel.rank = {i: r + 1 for r, i in enumerate(sel.anchors)}
        return
    cached = c.walks.get(key)
    if cached is None:
        if c.named is None:
            c.named = named_leads(uow, c.ctx.query_text)
        cached = c.walks[key] = walk(uow, c, seeds, c.named, policy.max_hops)
    w = cached
    # Reached facts outside the candidate set join it, scored by CDR (below the gate too): those with
    # the most PageRank, OUTSIDE_PER_SLOT per connector slot. Outside the candidates a fact's CDR
    # score is low (below the gate, or past every probe's top K), so its graph term decides, and a
    # ball of thousands is not read row by row to rank its tail.
    # the candidates' and excluded facts' places in the ball: their few hundred searched, not the
    # ball's thousands looked up
    pos = w.positions(c.ids)
    taken = np.concatenate([pos, w.positions(list(exclude))])
    free = np.ones(len(w.ids), dtype=bool)
    free[taken[taken >= 0]] = False
    outside = top_free(w.ids, w.rank, free, OUTSIDE_PER_SLOT * slots)
    if outside:
        append_outside(uow, c, outside)
        pos = np.concatenate([pos, w.positions(c.ids[pos.shape[0] :])])
    # connectors: reached facts that are not in the CDR order (the order's own facts compete as
    # anchors; its suppressed ones stay out), nor excluded (duplicates, another branch's facts)
    conn = ball_connectors(w, pos, c.ids, exclude, [*live, *sel.suppressed, *c.order])  # id order
    ppr_live = np.fromiter(map(w.ppr.get, map(c.ids.__getitem__, live), repeat(0.0)), np.float64, len(live))
    ppr_conn = np.fromiter(map(w.ppr.__getitem__, map(c.ids.__getitem__, conn)), np.float64, len(conn))
    idx = live + conn
    factor = (
        c.importance[idx]  # the rows' importance, as floats
        * c.novelty[idx]
        * c.recency[idx]
        * (1.0 - c.penalty[idx])
    )
    both = graph_rank.connector_estimate(c.score[idx], np.concatenate([ppr_live, ppr_conn]), factor)
    est_live, est_conn = both[: len(live)], both[len(live) :]
    keep, admitted = graph_rank.admit_connectors(est_live, est_conn, len(seeds), slots)
    sel.anchors = [live[p] for p in keep]
    chosen_conn = [conn[p] for p in admitted]
    # rank: every fact by its estimate (a consumer that cuts the envelope short cuts by expected worth)
    ranked = sorted(
        [(-float(est_live[p]), 0, p, live[p]) for p in keep] + [(-float(est_conn[p]), 1, p, conn[p]) for p in admitted]
    )
    sel.rank = {i: r + 1 for r, (_e, _k, _p, i) in enumerate(ranked)}
    sel.hops = w.depth
    sel.via = {i: w.via(c.ids[i]) for i in chosen_conn}
    est = {conn[p]: float(est_conn[p]) for p in admitted}
    sel.connectors = _bridging(uow, c, sel.anchors, chosen_conn, est)


def _bridging(
    uow: UnitOfWork, c: Any, anchors: list[int], conns: list[int], est: dict[int, float]
) -> list[tuple[int, list[str], float, float]]:
    """SPEC-025 §2.4 for the admitted connectors: bridge value and the anchors each bridges (or, when
    it bridges no pair, the anchors it has an edge to), for packing (§2.6) and the headers (§5.3)."""
    if not conns:
        return []
    g = c.graph
    cols = sorted({c.ids[i] for i in anchors})
    values, bridged = cdgr.bridge_values_edges(g.ints(c.ids[i] for i in conns), g.ints(cols), g.src, g.dst, g.weight)
    col_ints = set(g.ints(cols))
    out = []
    for i, v, br in zip(conns, values.tolist(), bridged, strict=True):
        ci = g.ints([c.ids[i]])[0]
        linked = set(g.dst[g.src == ci].tolist()) | set(g.src[g.dst == ci].tolist())
        near = sorted(g.names(sorted(linked & col_ints)))
        out.append((i, [cols[j] for j in br] or near, float(v), est[i]))
    return out


__all__ = [
    "Walk",
    "ball_connectors",
    "choose",
    "edge_order",
    "id_order",
    "named_leads",
    "top_free",
    "top_reached",
    "walk",
]
