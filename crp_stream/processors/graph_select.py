"""CDGR's anchors and connectors for one branch (SPEC-025 §2, §5.1, §6), over the fabric's typed graph.

1. Seeds (§2.2): the top ``S = floor((1 - connector_budget) × budget)`` facts by CDR are the anchors;
   the other ``C = budget - S`` slots are reserved for connectors.
2. Walk (§2.3): breadth-first from the anchors over every edge kind, ``max_hops`` (1-3) levels; the
   depth actually walked is ``CRP-Context-Graph-Hops`` (§5.1). Every reached fact that is not an anchor
   is a connector candidate.
3. Bridge value (§2.4, ``core.cdgr.bridge_values_edges``): paths (an edge, or two) run over every edge
   kind; two anchors are "directly connected" only by a similarity edge (§1.3's CKF graph), so an
   adjacency or mention edge never cancels a bridge.
4. Score and admission (§2.5, §2.6): ``bridge × novelty × recency × max(relevance, floor)``
   (``core.cdgr.connector_score``); the top ``C`` with a score above zero enter
   (``core.cdgr.admit_connectors``); the slots no bridging connector fills go back to the next CDR
   anchors (``core.cdgr.refill_anchors``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from crp_stream.core import cdgr, graph_rank, recency
from crp_stream.events import Policy
from crp_stream.fabric.fabric import UnitOfWork

if TYPE_CHECKING:  # assembly imports this module
    from crp_stream.processors.assembly import Candidates, Selection

SIMILARITY = graph_rank.EDGE_KINDS.index("similarity")
# (src, dst, weight, kind) of the walk's edges, as local ints
Edges = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int8]]
FETCH_PER_SLOT = 4  # reached facts outside the candidates, read per connector slot and round
_TIE_MARGIN = 2e-9  # two scores further apart than this never round to one 9-decimal value
# a relevance from the ANN cache's float32 row, widened to bound the one from the fact's own row: unit
# float32 vectors that differ in the last place of every component differ in cosine by ~1e-6 at most
_REL_MARGIN = 1e-5


class Connector(NamedTuple):
    """A connector admitted to the selection (SPEC-025 §2.5, §2.6)."""

    candidate: int  # its index among the candidates
    bridged: list[str]  # the anchors it bridges (ids, sorted)
    bridge: float  # its bridge value
    score: float  # its connector score


@dataclass
class Walk:
    """The walk from one set of anchors and the bridge value of every fact it reached."""

    depth: int
    ids: list[str]  # the reached facts that are not anchors, in fact-id order
    bridge: npt.NDArray[np.float64]  # their bridge values (§2.4)
    bridged_cols: npt.NDArray[np.bool_]  # the anchors each bridges: a row per fact, a column per anchor
    anchors: list[str]  # the anchor ids (sorted): ``bridged`` names them for the connectors admitted
    extra: npt.NDArray[np.bool_]  # it bridges only through structure edges (``cdgr.typed_bridge_values``)
    level: npt.NDArray[np.int64]  # BFS level per local int of the walk's edge list
    local: npt.NDArray[np.int64]  # local int of each of ``ids``
    edges: Edges
    names: npt.NDArray[np.str_] = field(default_factory=lambda: np.zeros(0, dtype=str))  # ``ids`` as a unicode array
    anchor_local: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    structured: bool = True  # the bridges through structure edges are in ``bridge`` (``with_structure``)

    def with_structure(self) -> bool:
        """Add the bridges through structure edges (``cdgr.structure_bridge_values``) to ``bridge``,
        ``bridged_cols`` and ``extra``, once; False when they were there already. Only a selection
        whose similarity connectors leave a slot free needs them (extra bridges take only those)."""
        if self.structured:
            return False
        self.structured = True
        src, dst, weight, kind = self.edges
        at, values, bridged = cdgr.structure_bridge_values(
            self.local, self.anchor_local, src, dst, weight, kind == SIMILARITY, self.bridge
        )
        self.bridge[at], self.bridged_cols[at], self.extra[at] = values, bridged, True
        return True

    def bridged(self, at: int) -> list[str]:
        """The anchors the reached fact at ``at`` bridges (ids, sorted): where packing puts it (§2.6).
        Named only for the few admitted, not for every reached fact."""
        return [self.anchors[j] for j in np.flatnonzero(self.bridged_cols[at]).tolist()]

    def positions(self, fact_ids: list[str]) -> npt.NDArray[np.int64]:
        """The place of each fact id in ``ids``, -1 for an id outside it: a binary search of the sorted
        names in C (no dict lookup per id, no pass over the walk's thousands)."""
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
        """Why a connector is there: ``similarity`` when it bridges on the similarity graph; for one
        that bridges through structure edges, the kind of its strongest structure edge (ties:
        adjacency first), or of its strongest edge from the level above when none is its own."""
        at = int(self.positions([fact_id])[0])
        if at < 0 or not bool(self.extra[at]):
            return "similarity"
        i = int(self.local[at])
        es, ed, ew, ek = self.edges
        own = np.flatnonzero((ed == i) & (ek != SIMILARITY))
        if own.shape[0] == 0:
            own = np.flatnonzero((ed == i) & (self.level[es] == self.level[i] - 1))
        if own.shape[0] == 0:
            return "similarity"
        best = min(own.tolist(), key=lambda e: (-float(ew[e]), int(ek[e])))
        return graph_rank.EDGE_KINDS[int(ek[best])]


def walk(uow: UnitOfWork, c: Candidates, seed_idx: list[int], max_hops: int) -> Walk:
    """SPEC-025 §2.3-§2.4: walk the typed graph from the anchors and score every reached fact's bridge.

    Edges are loaded for every fact below ``max_hops`` (the walk) and for the anchors' neighbours (a
    path of two edges from a connector to an anchor runs through one: §2.4 needs their edges at any
    depth walked).
    """
    g = c.graph
    g.bind(uow)
    seed_ids = [c.ids[i] for i in seed_idx]
    first = g.local(g.ints(seed_ids))  # levels on the compact numbering: arrays as long as the facts met
    below = max(max_hops, 2)
    level, depth = np.zeros(0, dtype=np.int64), 0  # the loop runs at least once
    for _ in range(below + 1):  # one more level's edges per pass
        level, depth = graph_rank.walk_levels(first, g.lsrc, g.ldst, max_hops)
        loaded = (level >= 0) & (level < max_hops)
        if max_hops >= below - 1:  # breadth-first levels below a bound are the same walked further
            loaded |= (level >= 0) & (level <= below - 1)
        else:
            near, _d = graph_rank.walk_levels(first, g.lsrc, g.ldst, below - 1)
            loaded[: near.shape[0]] |= near >= 0
        if not g.load_local(uow, np.flatnonzero(loaded)):
            break
    reached = np.flatnonzero(level >= 1)
    names = g.graph.name_array()[g.glob[reached]].astype(str)  # gathered in C, not string by string
    order = id_order(names)
    local = reached[order]
    ids = names[order].tolist()
    cols = sorted(set(seed_ids))
    anchor_local = g.local(g.ints(cols))
    # §2.4 on the similarity graph now; the structure edges' extra bridges when a selection needs them
    sim = g.kind == SIMILARITY
    values, bridged = cdgr.bridge_values_edges(local, anchor_local, g.lsrc[sim], g.ldst[sim], g.weight[sim])
    return Walk(
        depth=depth,
        ids=ids,
        bridge=values,
        bridged_cols=bridged,
        anchors=cols,
        extra=np.zeros(values.shape[0], dtype=bool),
        level=level,
        local=local,
        edges=(g.lsrc, g.ldst, g.weight, g.kind),
        names=names[order],
        anchor_local=anchor_local,
        structured=False,
    )


def id_order(names: list[str] | npt.NDArray[np.str_]) -> npt.NDArray[np.int64]:
    """The permutation that sorts fact ids as ``sorted`` does: a fixed-width unicode array orders
    code points, as ``str`` comparison does, and the sort runs in C (the ball has thousands)."""
    if len(names) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.argsort(np.asarray(names, dtype=str), kind="stable")


def bridging_candidates(w: Walk, exclude: set[str], taken: set[str]) -> list[int]:
    """Places in ``w.ids`` of the reached facts with a bridge value, not excluded (duplicates, another
    branch's facts) nor ``taken`` (suppressed by arbitration), in admission order's bound: those
    bridging on the similarity graph first, then those bridging through structure edges, each by
    bridge value (ties: fact id)."""
    live = np.flatnonzero(w.bridge > 0.0)
    order = live[np.lexsort((live, -w.bridge[live], w.extra[live]))].tolist()
    return [k for k in order if w.ids[k] not in exclude and w.ids[k] not in taken]


def outside_bounds(uow: UnitOfWork, c: Candidates, w: Walk, places: list[int], floor: float) -> list[float]:
    """An upper bound of the §2.5 score of each reached fact outside the candidates (``places`` in
    ``w.ids``), without scoring its row: ``bridge × recency × max(relevance, floor)``, novelty being at
    most 1. The recency is the fact's own (SPEC-027 §3.2, from the fact cache's columns, as scoring
    computes it) where the cache holds the fact, else 1; the relevance is from the ANN cache's stored
    vector widened by a margin, else 1. On a fabric of old facts every recency sits near its floor:
    a bound without it reads every reached fact."""
    if not places:
        return []
    rel = np.ones(len(places), dtype=np.float64)
    rec = np.ones(len(places), dtype=np.float64)
    names = [w.ids[p] for p in places]
    held, modified_at_us, ttl_s = uow.facts.aging(names)
    rec[held] = recency.recency_factor(c.ctx.now_s - modified_at_us / 1e6, ttl_s)
    ann = uow.vectors.ann()
    if ann is not None:
        slots = ann.slots(names)
        found = np.flatnonzero(slots >= 0)
        if found.shape[0]:
            rows = ann.stored()[slots[found]]
            query = np.asarray(c.ctx.query_vec, dtype=np.float32)
            # in float32, as stored: a product of unit vectors of ``dim`` terms rounds by at most
            # dim x 2^-24, and the query's own rounding by as much again
            slack = _REL_MARGIN + 2.0 * rows.shape[1] * 2.0**-24
            rel[found] = (rows @ query).astype(np.float64) + slack
    bounds: list[float] = (w.bridge[places] * rec * np.maximum(rel, floor)).tolist()
    return bounds


def choose(
    uow: UnitOfWork,
    c: Candidates,
    sel: Selection,
    live: list[int],
    n_anchor: int,
    budget: int,
    policy: Policy,
    exclude: set[str],
    append_outside: Callable[[UnitOfWork, Candidates, list[str]], None],
    min_connector_relevance: float = cdgr.MIN_CONNECTOR_RELEVANCE,
) -> None:
    """Fill ``sel`` (anchors, connectors, rank, via, hops) for the live CDR order ``live``."""
    seeds = live[:n_anchor]
    slots = budget - len(seeds)
    if slots <= 0 or not seeds:
        sel.anchors, sel.connectors, sel.hops = live[:budget], [], 0
        sel.rank = {i: r + 1 for r, i in enumerate(sel.anchors)}
        return
    key = (tuple(c.ids[i] for i in seeds), policy.max_hops)
    w = c.walks.get(key)
    if w is None:
        w = c.walks[key] = walk(uow, c, seeds, policy.max_hops)
    taken = {c.ids[i] for i in sel.suppressed}
    order = bridging_candidates(w, exclude, taken)
    # §2.5's score is at most the bridge value (every other factor <= 1): the reached facts are read
    # in bridge order a few at a time, until no unread one can displace the C-th admitted so far; of
    # those outside the candidates, a round reads only the ones whose tighter bound (relevance from
    # the ANN cache, ``outside_bounds``) still can
    scored: dict[int, float] = {}
    bridge_of: dict[int, int] = {}

    def score(at: list[tuple[int, int]]) -> None:
        got = cdgr.connector_score(
            w.bridge[[p for p, _i in at]],
            c.novelty[[i for _p, i in at]],
            c.recency[[i for _p, i in at]],
            c.relevance[[i for _p, i in at]],
            min_connector_relevance,
        )
        for (p, i), s in zip(at, got.tolist(), strict=True):
            scored[i], bridge_of[i] = s, p

    def cth() -> tuple[bool, float] | None:
        """The C-th best ``(extra, -score)`` so far (None while fewer than C score above zero)."""
        keys = heapq.nsmallest(slots, ((bool(w.extra[bridge_of[i]]), -s) for i, s in scored.items() if s > 0.0))
        return keys[slots - 1] if len(keys) >= slots else None

    def beaten(kth: tuple[bool, float] | None, place: int, bound: float) -> bool:
        """``kth`` beats a fact of this score bound by more than admission's tie resolution (scores
        are compared to 9 decimals): the fact cannot take a slot."""
        return kth is not None and kth < (bool(w.extra[place]), -(bound + _TIE_MARGIN))

    k, width = 0, FETCH_PER_SLOT * slots
    while True:
        while k < len(order):
            kth = cth()
            if beaten(kth, order[k], float(w.bridge[order[k]])):  # the bridge value bounds every later one
                break
            batch = order[k : k + width]
            width *= 2  # each round reads as many again: few rounds, each with its fixed cost
            k += len(batch)
            outside = [p for p in batch if w.ids[p] not in c.index]
            if outside and kth is not None:
                bounds = outside_bounds(uow, c, w, outside, min_connector_relevance)
                outside = [p for p, b in zip(outside, bounds, strict=True) if not beaten(kth, p, b)]
            if outside:
                append_outside(uow, c, [w.ids[p] for p in outside])  # facts excluded from envelopes are not read
            at = [(p, c.index[w.ids[p]]) for p in batch if w.ids[p] in c.index]
            if at:
                score(at)
        # every similarity bridge was read or bounded out; a bridge through structure edges comes
        # after all of them, so it is looked for only when they leave a slot free (no C-th score yet)
        if k < len(order) or cth() is not None or not w.with_structure():
            break
        order = bridging_candidates(w, exclude, taken)  # the same facts first, then the extra bridges
    cands = sorted(scored, key=lambda i: c.ids[i])  # fact-id order: ties go to the smaller id
    extra = [bool(w.extra[bridge_of[i]]) for i in cands]
    admitted = [cands[p] for p in cdgr.admit_connectors([scored[i] for i in cands], slots, extra)]
    sel.anchors = cdgr.refill_anchors(live, len(seeds), admitted, budget)
    sel.connectors = [Connector(i, w.bridged(bridge_of[i]), float(w.bridge[bridge_of[i]]), scored[i]) for i in admitted]
    # rank: the seeds in CDR order, then the connectors by score, then the anchors that took the
    # connector slots no connector filled (a consumer that cuts the envelope short keeps the seeds)
    ranked = seeds + admitted + sel.anchors[len(seeds) :]
    sel.rank = {i: r + 1 for r, i in enumerate(ranked)}
    sel.hops = w.depth
    sel.via = {i: w.via(c.ids[i]) for i in admitted}


__all__ = ["Connector", "Walk", "bridging_candidates", "choose", "id_order", "walk"]
