"""Coverage-Differential Graph Retrieval (SPEC-025 §2, connector recency from SPEC-027 §3.3).

The CKF similarity graph is an adjacency mapping ``{fact_id: {neighbour_id: weight}}``, symmetric,
weight = cosine of the two facts (edges: cos >= 0.60 among the K=20 nearest, SPEC-025 §1.3). Only
``adjacency[a]`` is consulted for the neighbours of ``a``; a node absent from the mapping has none.
Every set-valued result is iterated in sorted id order, so results never depend on hash order.

API
---
- ``DEFAULT_MAX_HOPS = 2``; ``DEFAULT_CONNECTOR_BUDGET = 0.30``; ``MIN_CONNECTOR_RELEVANCE = 0.30``.
- ``anchor_seed_count(fact_budget, connector_budget=0.30) -> int`` (§2.2): ``floor((1 - cb) × budget)``.
- ``connector_slot_count(fact_budget, connector_budget=0.30) -> int`` (§2.2): the rest of the budget.
- ``expand_connectors(anchor_ids, adjacency, max_hops=2) -> set[str]`` (§2.3).
- ``bridge_value(connector_id, anchor_ids, adjacency) -> tuple[float, list[str]]`` (§2.4): the value
  and the sorted ids of the anchors it bridges.
- ``bridge_values(connector_ids, anchor_ids, adjacency) -> tuple[NDArray, list[list[str]]]``: the same
  for many connectors, in the given order.
- ``bridge_values_edges(connectors, anchors, src, dst, weight, direct=None) -> (values, bridged)``:
  the same rule with facts as ints and the graph as an edge list (``src -> dst``), vectorised, the
  anchors each connector bridges as a boolean matrix (a row per connector, a column per anchor); what
  envelope assembly runs on its graph cache. ``direct`` marks the edges of SPEC-025 §1.3's CKF graph
  (similarity edges): only they make two anchors "directly connected"; every edge is a path.
  (The walk on an edge list is ``graph_rank.walk_levels``.)
- ``typed_bridge_values(connectors, anchors, src, dst, weight, similarity) -> (values, bridged, extra)``:
  §2.4 over the similarity edges; structure edges as extra paths for a connector with no bridge there.
- ``structure_bridge_values(connectors, anchors, src, dst, weight, similarity, values) -> (at, values, bridged)``:
  the extra paths alone, for the connectors the similarity values (``values``) leave at zero.
- ``connector_score(bridge, novelty, recency, relevance, min_connector_relevance=0.30) -> NDArray``
  (§2.5 with SPEC-027 §3.3): ``bridge × novelty × recency × max(relevance, 0.30)``.
- ``admit_connectors(scores, slots, extra=None) -> list[int]`` (§2.5/§2.6): the top ``slots``
  connectors by score, those bridging only through structure edges last; zero stays out.
- ``refill_anchors(cdr_order, seeds, admitted, budget) -> list[int]`` (§2.2/§6): the seeds, then the
  slots no connector filled go back to the next CDR anchors (graceful degradation to CDR).
- ``connectors_included_header(connectors, total) -> str`` (§5.2): ``"c/t"``.
- ``bridge_score_header(included_bridge_values) -> float`` (§5.3): their mean, 0.0 if none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from crp_stream.core import graph_kernels

DEFAULT_MAX_HOPS = 2
DEFAULT_CONNECTOR_BUDGET = 0.30
MAX_CONNECTOR_BUDGET = 0.5
MIN_CONNECTOR_RELEVANCE = 0.30

Adjacency = Mapping[str, Mapping[str, float]]


def _neighbours(adjacency: Adjacency, node: str) -> Mapping[str, float]:
    return adjacency.get(node, {})


def anchor_seed_count(fact_budget: int, connector_budget: float = DEFAULT_CONNECTOR_BUDGET) -> int:
    """SPEC-025 §2.2: take the top ``S = floor((1 - connector_budget) × envelope_fact_budget)`` CDR facts.

    ``connector_budget`` is the Safety-Policy directive, 0.0–0.5 (§6); the epsilon keeps
    ``0.7 × 10`` from flooring to 6 through float rounding.
    """
    if fact_budget < 0:
        raise ValueError("fact_budget must be >= 0")
    if not 0.0 <= connector_budget <= MAX_CONNECTOR_BUDGET:
        raise ValueError("connector_budget must be within 0.0..0.5")
    return math.floor((1.0 - connector_budget) * fact_budget + 1e-9)


def connector_slot_count(fact_budget: int, connector_budget: float = DEFAULT_CONNECTOR_BUDGET) -> int:
    """SPEC-025 §2.2: the remainder of the fact budget (~30%) is reserved for Phase B connectors."""
    return fact_budget - anchor_seed_count(fact_budget, connector_budget)


def expand_connectors(anchor_ids: Iterable[str], adjacency: Adjacency, max_hops: int = DEFAULT_MAX_HOPS) -> set[str]:
    """SPEC-025 §2.3: every fact within ``max_hops`` similarity edges of an anchor that is not an anchor.

    The walk may pass through other anchors (as in the seed's loop); anchors are never candidates.
    """
    if max_hops < 0:
        raise ValueError("max_hops must be >= 0")
    anchors = set(anchor_ids)
    seen = set(anchors)
    frontier = sorted(anchors)
    for _ in range(max_hops):
        nxt: list[str] = []
        for fid in frontier:
            for nb in sorted(_neighbours(adjacency, fid)):
                if nb not in seen:
                    seen.add(nb)
                    nxt.append(nb)
        frontier = nxt
    return seen - anchors


def _edge(adjacency: Adjacency, a: str, b: str) -> float | None:
    w = _neighbours(adjacency, a).get(b)
    return None if w is None else float(w)


def _path_strength(adjacency: Adjacency, src: str, dst: str) -> float | None:
    """Strongest path of <= 2 edges: a direct edge's weight, a 2-hop path's weaker edge (bottleneck)."""
    best = _edge(adjacency, src, dst)
    for mid, w1 in sorted(_neighbours(adjacency, src).items()):
        if mid == dst:
            continue
        w2 = _edge(adjacency, mid, dst)
        if w2 is not None:
            via = min(float(w1), w2)
            best = via if best is None else max(best, via)
    return best


def bridge_value(
    connector_id: str, anchor_ids: Iterable[str], adjacency: Adjacency, direct: Adjacency | None = None
) -> tuple[float, list[str]]:
    """SPEC-025 §2.4: how many otherwise-unlinked anchor pairs the connector links, times edge strength.

    Touched anchors: those with a direct edge to the connector or a path of length <= 2 from it. Fewer
    than two touched -> 0.0. ``bridge_count`` = touched pairs with NO direct edge between them in
    ``direct`` (§1.3's CKF graph: the similarity edges; ``adjacency`` itself when not given). Paths run
    over ``adjacency``, which may hold more edges (the fabric's structure edges): an extra path can make
    a connector touch an anchor, never make two anchors directly connected.
    ``mean_edge_weight_through`` (left open by the seed) is, here, the mean over touched anchors of the
    strongest connector->anchor path of <= 2 edges, a 2-hop path counting its weaker edge. Returns
    ``(bridge_count × mean strength, sorted ids of anchors in at least one bridged pair)``.
    """
    linking = adjacency if direct is None else direct
    strengths: dict[str, float] = {}
    for a in sorted(set(anchor_ids)):
        if a == connector_id:
            continue
        s = _path_strength(adjacency, connector_id, a)
        if s is not None:
            strengths[a] = s
    touched = sorted(strengths)
    if len(touched) < 2:
        return 0.0, []
    bridge_count = 0
    bridged: set[str] = set()
    for i, a1 in enumerate(touched):
        for a2 in touched[i + 1 :]:
            if _edge(linking, a1, a2) is None and _edge(linking, a2, a1) is None:
                bridge_count += 1
                bridged.update((a1, a2))
    if bridge_count == 0:
        return 0.0, []
    mean_strength = float(np.mean([strengths[a] for a in touched]))
    return bridge_count * mean_strength, sorted(bridged)


def bridge_values(
    connector_ids: Sequence[str],
    anchor_ids: Iterable[str],
    adjacency: Adjacency,
    chunk: int = 1024,
    direct: Adjacency | None = None,
) -> tuple[NDArray[np.float64], list[list[str]]]:
    """SPEC-025 §2.4 for a batch: ``bridge_value`` of each connector, in the order given.

    The same rule as ``bridge_value``, vectorised: strongest <= 2-edge paths as a max-min product over
    each connector's neighbours, touched-pair counts as ``T · (no direct edge) · T``. A 2-hop walk
    from 35 anchors reaches thousands of candidates; one Python loop per pair would take seconds.
    """
    anchors = sorted(set(anchor_ids))
    n = len(connector_ids)
    values = np.zeros(n, dtype=np.float64)
    bridged: list[list[str]] = [[] for _ in range(n)]
    m = len(anchors)
    if m < 2 or n == 0:
        return values, bridged
    col = {a: j for j, a in enumerate(anchors)}
    linked = np.zeros((m, m), dtype=bool)
    for a in anchors:
        for nb in _neighbours(adjacency if direct is None else direct, a):
            j = col.get(nb)
            if j is not None:
                linked[col[a], j] = linked[j, col[a]] = True
    unlinked = (~linked).astype(np.float64)
    np.fill_diagonal(unlinked, 0.0)
    mids: dict[str, int] = {}
    rows: list[NDArray[np.float64]] = []

    def mid_row(node: str) -> int:
        r = mids.get(node)
        if r is None:
            vec = np.zeros(m, dtype=np.float64)
            for nb, w in _neighbours(adjacency, node).items():
                j = col.get(nb)
                if j is not None:
                    vec[j] = float(w)
            r = mids[node] = len(rows)
            rows.append(vec)
        return r

    for start in range(0, n, chunk):
        ids = connector_ids[start : start + chunk]
        nbr_lists = [sorted(_neighbours(adjacency, c).items()) for c in ids]
        width = max((len(x) for x in nbr_lists), default=0)
        if width == 0:
            continue
        idx = np.full((len(ids), width), -1, dtype=np.int64)
        wts = np.zeros((len(ids), width), dtype=np.float64)
        one_edge = np.zeros((len(ids), m), dtype=np.float64)
        for i, (cid, nbrs) in enumerate(zip(ids, nbr_lists, strict=True)):
            for d, (nb, w) in enumerate(nbrs):
                if nb == cid:
                    continue
                idx[i, d] = mid_row(nb)
                wts[i, d] = float(w)
                j = col.get(nb)
                if j is not None:
                    one_edge[i, j] = float(w)
        table = np.vstack([np.stack(rows), np.zeros((1, m))]) if rows else np.zeros((1, m))
        via = np.minimum(wts[:, :, None], table[idx])  # idx -1 -> the zero row: no path
        strength = np.maximum(one_edge, via.max(axis=1))
        for i, cid in enumerate(ids):  # a connector is never its own anchor
            j = col.get(cid)
            if j is not None:
                strength[i, j] = 0.0
        touched = (strength > 0.0).astype(np.float64)
        partners = touched @ unlinked
        counts = (partners * touched).sum(axis=1) / 2.0
        n_touched = touched.sum(axis=1)
        ok = (n_touched >= 2) & (counts > 0)
        mean = np.divide((strength * touched).sum(axis=1), n_touched, out=np.zeros(len(ids)), where=ok)
        values[start : start + len(ids)] = np.where(ok, counts * mean, 0.0)
        for row in np.flatnonzero(ok).tolist():
            hit = np.flatnonzero((partners[row] > 0) & (touched[row] > 0)).tolist()
            bridged[start + row] = [anchors[j] for j in hit]
    return values, bridged


def bridge_values_edges(
    connectors: ArrayLike,
    anchors: ArrayLike,
    src: ArrayLike,
    dst: ArrayLike,
    weight: ArrayLike,
    chunk: int = 1024,
    direct: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """SPEC-025 §2.4 as ``bridge_values``, on an edge list of a symmetric graph; the same floats.

    ``direct`` (a boolean per edge; None: every edge) marks the edges of §1.3's CKF graph: only they
    make two anchors "directly connected" (``bridge_values``'s ``direct``). Every edge is a path; where
    one pair has edges of several kinds the strongest weight counts.

    ``anchors`` are the columns, in the order ``bridge_values`` uses (ids sorted); ``bridged[i, j]``
    says connector ``i`` bridges anchor ``j`` (a matrix: only the few admitted are ever named). The
    list must hold every edge of the anchors and of their neighbours: a connector's paths of <= 2
    edges to an anchor all end in such an edge. The path strengths (a max of mins, exact in any
    order) come from compiled loops (``graph_kernels.path_strengths``); the touched-pair arithmetic is
    ``bridge_values``'s numpy on the same shapes, so every value is bit-identical.
    """
    cons = np.asarray(connectors, dtype=np.int64).reshape(-1)
    cols = np.asarray(anchors, dtype=np.int64).reshape(-1)
    n, m = cons.shape[0], cols.shape[0]
    values = np.zeros(n, dtype=np.float64)
    bridged = np.zeros((n, m), dtype=bool)
    if m < 2 or n == 0:
        return values, bridged
    s, d = np.asarray(src, dtype=np.int64).reshape(-1), np.asarray(dst, dtype=np.int64).reshape(-1)
    w = np.asarray(weight, dtype=np.float64).reshape(-1)
    size = int(max(s.max(initial=-1), d.max(initial=-1), cons.max(), cols.max())) + 1
    mark = np.ones(s.shape[0], dtype=bool) if direct is None else np.asarray(direct, dtype=bool).reshape(-1)
    # path strengths (max of mins: the same floats in any order) in compiled loops; the sums below
    strength_all, linked = graph_kernels.path_strengths(cons, cols, s, d, w, mark, size)
    unlinked = (~linked).astype(np.float64)
    np.fill_diagonal(unlinked, 0.0)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        strength = strength_all[start:stop]
        touched = (strength > 0.0).astype(np.float64)
        partners = touched @ unlinked
        counts = (partners * touched).sum(axis=1) / 2.0
        n_touched = touched.sum(axis=1)
        ok = (n_touched >= 2) & (counts > 0)
        mean = np.divide((strength * touched).sum(axis=1), n_touched, out=np.zeros(stop - start), where=ok)
        values[start:stop] = np.where(ok, counts * mean, 0.0)
        bridged[start:stop] = (partners > 0) & (touched > 0) & ok[:, None]
    return values, bridged


def typed_bridge_values(
    connectors: ArrayLike,
    anchors: ArrayLike,
    src: ArrayLike,
    dst: ArrayLike,
    weight: ArrayLike,
    similarity: ArrayLike,
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
    """SPEC-025 §2.4 over §1.3's CKF graph, with the fabric's structure edges as extra paths.

    ``similarity`` marks the edges of §1.3's graph (a boolean per edge); the others (adjacency,
    mention) are structure edges. A connector's bridge value is §2.4's over the similarity edges
    alone. A connector with none there may still bridge through extra paths: its value is then §2.4's
    over every edge, where a path of one or two edges may use structure edges but two anchors are
    "directly connected" only by a similarity edge. So a structure edge never cancels a bridge, and
    a bridge that needs structure edges is marked ``extra`` (``admit_connectors`` admits those only
    into the slots the similarity graph's connectors leave). Returns (values, bridged anchor columns,
    extra), in the order of ``connectors``; the arguments are ``bridge_values_edges``'s.
    """
    sim = np.asarray(similarity, dtype=bool).reshape(-1)
    s, d, w = (np.asarray(x).reshape(-1) for x in (src, dst, weight))
    values, bridged = bridge_values_edges(connectors, anchors, s[sim], d[sim], w[sim])
    extra = np.zeros(values.shape[0], dtype=bool)
    at, typed, typed_bridged = structure_bridge_values(connectors, anchors, s, d, w, sim, values)
    extra[at] = True
    values[at] = typed
    bridged[at] = typed_bridged
    return values, bridged, extra


def structure_bridge_values(
    connectors: ArrayLike,
    anchors: ArrayLike,
    src: ArrayLike,
    dst: ArrayLike,
    weight: ArrayLike,
    similarity: ArrayLike,
    values: ArrayLike,
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.bool_]]:
    """SPEC-025 §2.4 through the structure edges (``typed_bridge_values``'s extra paths), for the
    connectors whose similarity-graph bridge value (``values``, in the order of ``connectors``) is
    zero. Returns the places in ``connectors`` that bridge so, with their values and bridged anchor
    columns: ``typed_bridge_values`` sets them and marks them ``extra``.

    A connector's row depends on its own edges only, so this can run after the similarity values, and
    only when they leave a connector slot free: extra bridges are admitted only into those.
    """
    sim = np.asarray(similarity, dtype=bool).reshape(-1)
    cols = np.asarray(anchors, dtype=np.int64).reshape(-1)
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if sim.all():
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, cols.shape[0]), dtype=bool)
    cons = np.asarray(connectors, dtype=np.int64).reshape(-1)
    rest = np.flatnonzero(v <= 0.0)
    typed, typed_bridged = bridge_values_edges(cons[rest], cols, src, dst, weight, direct=sim)
    hit = typed > 0.0
    return rest[hit], typed[hit], typed_bridged[hit]


def connector_score(
    bridge: ArrayLike,
    novelty: ArrayLike,
    recency: ArrayLike,
    relevance: ArrayLike,
    min_connector_relevance: float = MIN_CONNECTOR_RELEVANCE,
) -> NDArray[np.float64]:
    """SPEC-025 §2.5 with SPEC-027 §3.3: a connector's CDGR score,
    ``bridge_value × novelty × recency_factor × max(relevance, MIN_CONNECTOR_RELEVANCE)``.

    ``relevance`` is the fact's cosine to the query; the floor (0.30, or the model's calibrated
    counterpart) lets a connector in whatever its query relevance, but only through its bridge value:
    a fact with zero bridge value scores zero.
    """
    b = np.asarray(bridge, dtype=np.float64)
    rel = np.maximum(np.asarray(relevance, dtype=np.float64), min_connector_relevance)
    return np.asarray(b * np.asarray(novelty, dtype=np.float64) * np.asarray(recency, dtype=np.float64) * rel)


def admit_connectors(scores: ArrayLike, slots: int, extra: ArrayLike | None = None) -> list[int]:
    """SPEC-025 §2.5/§2.6: ``top_C_by_bridge_value(connectors)``, ranked by the §2.5 score.

    The positions of the (at most ``slots``) highest-scoring connectors, best first, ties by position
    (callers pass candidates in fact-id order). Scores are compared to 9 decimals: two connectors
    equal by the rule (a symmetric chain) tie however the last bits of their floats fell. A
    connector scoring zero (no bridge value) "still scores zero and stays out", however many slots
    are free. Connectors marked ``extra`` (they bridge
    only through structure edges, ``typed_bridge_values``) come after every other one.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    x = np.zeros(s.shape[0], dtype=bool) if extra is None else np.asarray(extra, dtype=bool).reshape(-1)
    live = np.flatnonzero(s > 0.0)
    order = live[np.lexsort((live, -np.round(s[live], _TIE_DECIMALS), x[live]))]
    return [int(i) for i in order[: max(slots, 0)]]


_TIE_DECIMALS = 9


def refill_anchors(cdr_order: Sequence[int], seeds: int, admitted: Iterable[int], budget: int) -> list[int]:
    """SPEC-025 §2.2 and §6: the anchors of an envelope of ``budget`` facts.

    The top ``seeds`` facts of the CDR order are the anchors; the connector slots (the rest of the
    budget) hold the ``admitted`` connectors, and the slots no bridging connector fills go back to the
    next facts of the CDR order that are not connectors already. With no connector admitted this is
    CDR's envelope: "CDGR degrades gracefully to pure CDR".
    """
    taken = set(admitted)
    head = list(cdr_order[: max(seeds, 0)])
    free = budget - len(head) - len(taken)
    rest = [i for i in cdr_order[len(head) :] if i not in taken]
    return head + rest[: max(free, 0)]


def connectors_included_header(connectors: int, total: int) -> str:
    """SPEC-025 §5.2: CRP-Context-Connectors-Included = ``connectors/total`` envelope facts."""
    return f"{connectors}/{total}"


def bridge_score_header(included_bridge_values: ArrayLike) -> float:
    """SPEC-025 §5.3: CRP-Context-Bridge-Score = mean bridge value of the included connectors (0.0: none)."""
    v = np.asarray(included_bridge_values, dtype=np.float64).reshape(-1)
    return float(v.mean()) if v.size else 0.0
