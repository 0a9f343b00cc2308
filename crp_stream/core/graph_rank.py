"""Graph ranking for CDGR (SPEC-025 §2.3-§2.6, §6; the fabric's typed graph of SPEC-025 §7 / SPEC-009).

SPEC-025 §6 promises that CDGR never performs worse than CDR. Bridge value alone (§2.4) does not keep
that promise: a connector displaces an anchor whatever the anchor was worth. Here every fact of the
contest, anchor or connector, gets one estimate of its worth in the same unit, the CDR score plus a
graph term, and a connector enters only in place of an anchor whose estimate it beats
(``admit_connectors``). The graph term is personalised PageRank over the typed graph (similarity,
adjacency and mention edges) seeded by the anchors, as HippoRAG does; it is measured against CDR on
held-out questions in docs/benchmarks.md.

Facts are ints ``0..n-1`` of a local index that the caller builds in fact-id order, and edges are
given in (src, dst) order, so every sum runs in the same order on every replay.

API
---
- ``EDGE_KINDS``: ``similarity``, ``adjacency``, ``mention`` (the ``via`` of an envelope fact).
- ``title_key(title) -> str | None``: the name a text must contain to mention a document.
- ``mention_spans(text, max_words=8) -> list[str]``: every word n-gram of a text (title lookup keys).
- ``names_title(text, key) -> bool``: ``key`` occurs in ``text`` on word boundaries.
- ``walk_levels(seeds, src, dst, max_hops) -> (levels, depth)``: BFS level of every reached int
  (-1: not reached) and the depth actually walked (SPEC-025 §5.1).
- ``seed_weights(scores, temperature=0.05) -> NDArray``: softmax of the anchors' CDR scores.
- ``personalized_pagerank(n, src, dst, weight, seed, damping=0.5, iterations=30) -> NDArray``.
- ``connector_estimate(cdr_score, ppr, factor, graph_weight=0.6) -> NDArray``: CDR score + factor ×
  weight × PPR / max (``factor``: the CDR score's non-relevance terms).
- ``admit_connectors(anchor_estimates, connector_estimates, fixed, slots) -> (anchors kept, connectors)``.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.ma  # np.unique imports it on first use (numpy 2): here, not in a request's walk
from numpy.typing import ArrayLike, NDArray

EDGE_KINDS = ("similarity", "adjacency", "mention")
MIN_TITLE_CHARS = 4  # "It", "The": too short to name a document rather than to be a word
MAX_TITLE_WORDS = 8
DAMPING = 0.5  # HippoRAG's: half the mass restarts at the seeds at each step
ITERATIONS = 30  # 0.5^30 < 1e-9: converged far below the precision the estimates are compared at
GRAPH_WEIGHT = 0.6  # tuned on HotpotQA dev100 (0.4: -0.007 SP recall@10); see docs/benchmarks.md
SEED_TEMPERATURE = 0.05

_PAREN = re.compile(r"\s*\([^()]*\)\s*$")
_WORD = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*", re.UNICODE)


def title_key(title: str | None) -> str | None:
    """Issue 11 (documents keep their structure): the words a text must contain to name a document.

    A trailing disambiguation in parentheses is dropped ("Michael Jackson (writer)" is named as
    "michael jackson"); words are lowercased (queries and titles disagree on case: "I Can'T See
    Myself Leaving You"). None when nothing of at least MIN_TITLE_CHARS characters remains.
    """
    if not title:
        return None
    words = _WORD.findall(_PAREN.sub("", title))
    key = " ".join(words).lower()
    if len(key) < MIN_TITLE_CHARS or len(words) > MAX_TITLE_WORDS:
        return None
    return key


def mention_spans(text: str, max_words: int = MAX_TITLE_WORDS) -> list[str]:
    """Every run of 1..max_words consecutive words of ``text``, lowercased, joined by one space,
    sorted and unique: the keys under which the titles a text names are looked up (``title_key``).
    A one-word span counts only where the text capitalises it: "Bridge" may be a name, "bridge" is
    a word."""
    words = _WORD.findall(text)
    low = [w.lower() for w in words]
    spans = {" ".join(low[i : i + n]) for n in range(2, max_words + 1) for i in range(len(words) - n + 1)}
    spans |= {low[i] for i, w in enumerate(words) if w[:1].isupper() or w[:1].isdigit()}
    return sorted(s for s in spans if len(s) >= MIN_TITLE_CHARS)


def names_title(text: str, key: str) -> bool:
    """True when ``text`` names the title ``key`` (``title_key`` form), as ``mention_spans`` reads it."""
    return key in set(mention_spans(text, max(len(key.split()), 1)))


def walk_levels(seeds: ArrayLike, src: ArrayLike, dst: ArrayLike, max_hops: int) -> tuple[NDArray[np.int64], int]:
    """SPEC-025 §2.3/§5.1: breadth-first levels from the seeds over ``src -> dst`` edges, up to
    ``max_hops`` (1-3). Returns the level of every int (0 for seeds, -1 when not reached) and the
    depth actually walked: the deepest level that reached a new fact (0 when none did)."""
    if max_hops < 0:
        raise ValueError("max_hops must be >= 0")
    s, d = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    a = np.unique(np.asarray(seeds, dtype=np.int64))
    size = int(max(s.max(initial=-1), d.max(initial=-1), a.max(initial=-1))) + 1
    level = np.full(size, -1, dtype=np.int64)
    level[a] = 0
    frontier = np.zeros(size, dtype=bool)
    frontier[a] = True
    depth = 0
    for hop in range(1, max_hops + 1):
        reached = np.zeros(size, dtype=bool)
        reached[d[frontier[s]]] = True
        frontier = reached & (level < 0)
        if not frontier.any():
            break
        level[frontier] = hop
        depth = hop
    return level, depth


def seed_weights(scores: ArrayLike, temperature: float = SEED_TEMPERATURE) -> NDArray[np.float64]:
    """The personalisation of the walk: a softmax of the anchors' CDR scores. A temperature of 0.05
    (a twentieth of the cosine scale) lets an anchor 0.05 below the best seed count 1/e as much: the
    walk starts mostly from the strongest evidence without ignoring the rest."""
    x = np.asarray(scores, dtype=np.float64).reshape(-1)
    if x.size == 0:
        return x
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    w = np.exp((x - x.max()) / temperature)
    return np.asarray(w / w.sum(), dtype=np.float64)


def personalized_pagerank(
    n: int,
    src: ArrayLike,
    dst: ArrayLike,
    weight: ArrayLike,
    seed: ArrayLike,
    damping: float = DAMPING,
    iterations: int = ITERATIONS,
) -> NDArray[np.float64]:
    """Personalised PageRank over ``n`` nodes: ``r = (1 - damping) p + damping · r T``, ``T`` the
    edges' weights normalised per source, ``p`` the normalised seed. Mass that reaches a node with
    no out-edge (the edge of the walked ball) leaves; the result is not renormalised, so a fact's
    value is the share of walks from the seeds that visit it. Sums run in edge order (deterministic)."""
    s, d = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    w = np.asarray(weight, dtype=np.float64)
    p = np.asarray(seed, dtype=np.float64).reshape(-1)
    if p.shape[0] != n:
        raise ValueError("one seed value per node")
    total = float(p.sum())
    if n == 0 or total <= 0.0:
        return np.zeros(n, dtype=np.float64)
    p = p / total
    out_w = np.bincount(s, weights=w, minlength=n)
    share = np.divide(w, out_w[s], out=np.zeros_like(w), where=out_w[s] > 0)
    r = p.copy()
    for _ in range(iterations):
        r = (1.0 - damping) * p + damping * np.bincount(d, weights=r[s] * share, minlength=n)
    return np.asarray(r, dtype=np.float64)


def connector_estimate(
    cdr_score: ArrayLike, ppr: ArrayLike, factor: ArrayLike, graph_weight: float = GRAPH_WEIGHT
) -> NDArray[np.float64]:
    """The expected worth of a fact to the window, in CDR-score units: the graph adds to relevance.

    SPEC-027 §3.3 writes the CDR score as ``factor × max(relevance, pull)`` with ``factor =
    importance × novelty × recency × (1 − ngram_penalty)``; here the fact's PageRank relative to the
    best-visited fact, times ``graph_weight``, joins its relevance:
    ``cdr_score + factor × graph_weight × ppr / max(ppr)``. A fact already covered or already quoted
    keeps its penalty, however central it is. Anchors and connectors get the same estimate, so the
    two can be compared slot by slot (``admit_connectors``).
    """
    c = np.asarray(cdr_score, dtype=np.float64)
    r = np.asarray(ppr, dtype=np.float64)
    f = np.asarray(factor, dtype=np.float64)
    top = float(r.max(initial=0.0))
    rel = r / top if top > 0.0 else np.zeros_like(r)
    return np.asarray(c + f * graph_weight * rel, dtype=np.float64)


def admit_connectors(
    anchor_estimates: ArrayLike, connector_estimates: ArrayLike, fixed: int, slots: int
) -> tuple[list[int], list[int]]:
    """SPEC-025 §6 by construction: the first ``fixed`` anchors (CDR order) always stay; the other
    ``slots`` places go to the best estimates among the remaining anchors and the connectors, an
    anchor winning a tie. So a connector enters only in place of an anchor it is expected to beat.

    ``anchor_estimates`` are in CDR order (at least ``fixed + slots`` when there are that many);
    returns the anchor positions kept and the connector positions admitted, each best first.
    """
    a = np.asarray(anchor_estimates, dtype=np.float64).reshape(-1)
    c = np.asarray(connector_estimates, dtype=np.float64).reshape(-1)
    keep = list(range(min(fixed, a.shape[0])))
    rest = [(-float(a[i]), 0, i) for i in range(len(keep), a.shape[0])]
    rest += [(-float(c[j]), 1, j) for j in range(c.shape[0])]
    rest.sort()
    conns: list[int] = []
    for _neg, kind, i in rest[: max(slots, 0)]:
        (conns if kind else keep).append(i)
    return keep, conns


__all__ = [
    "EDGE_KINDS",
    "admit_connectors",
    "connector_estimate",
    "mention_spans",
    "names_title",
    "personalized_pagerank",
    "seed_weights",
    "title_key",
    "walk_levels",
]
