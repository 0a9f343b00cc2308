"""Envelope assembly, in SPEC-027 §4 order: candidates -> CDR -> CDGR -> conflicts -> packing.

Every rule is a pure function of ``crp_stream.core``; this module gathers the inputs from the
fabric and wires the rules together for one branch of one window.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from operator import itemgetter
from typing import NamedTuple, cast

import numpy as np
import numpy.typing as npt

from crp_stream.core import cdgr, cdr, conflicts, exits, near_copies, ngram, recency, sibling_titles
from crp_stream.core.calibration import Thresholds
from crp_stream.events import Policy
from crp_stream.fabric.caches.fact_batch import HEAD_FIELDS, Batch
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.fabric.sql.rows import FactRow
from crp_stream.processors import graph_select
from crp_stream.processors.graph_select import Connector
from crp_stream.processors.graph_walk import LoadedEdges
from crp_stream.processors.session import SubQueryState, vec_from_json

EXCLUDED = ("quarantined", "expired", "superseded")
# FactView's fields up to ``importance``, in its order; the rest (recency, status, epoch, relevance) follow
assert conflicts.FactView._fields[: len(HEAD_FIELDS)] == HEAD_FIELDS
_VIEW_HEAD = itemgetter(*HEAD_FIELDS)
_STATUS = itemgetter("status")
_TEXT = itemgetter("text")
_SOURCE = itemgetter("source")
_HEAD_TEXT = itemgetter(HEAD_FIELDS.index("text"))
_HEAD_SOURCE = itemgetter(HEAD_FIELDS.index("source"))
_EXCLUDED = frozenset(EXCLUDED)
_NEW_VIEW = partial(tuple.__new__, conflicts.FactView)

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
# embeddings: float32 as stored; a probe decoded from a session's JSON may be float64
Vectors = npt.NDArray[np.float32 | np.float64]
WalkKey = tuple[tuple[str, ...], int]  # (seed ids, max_hops)


class Resolved(NamedTuple):
    """One arbitrated contradiction of a selection (SPEC-027 §2.2-§2.5), as fact ids."""

    pair: tuple[str, str]  # the two representatives, in pair order
    tie: bool
    pattern: str
    kept: str
    suppressed: str
    authority_kept: float
    authority_suppressed: float
    texts: tuple[str, str]  # the kept and the suppressed fact's texts


@dataclass
class Candidates:
    """The gathered candidate set, one row per fact, every signal as an aligned numpy array."""

    ids: list[str]
    rows: list[FactRow]
    vecs: npt.NDArray[np.float32]
    relevance: Floats
    pull: Floats
    novelty: Floats
    recency: Floats
    penalty: Floats
    score: Floats
    support: Ints
    views: list[conflicts.FactView]
    ctx: ScoringContext
    graph: LoadedEdges = field(default_factory=LoadedEdges)  # graph edges read so far
    walks: dict[WalkKey, graph_select.Walk] = field(default_factory=dict)  # per seed set
    order: list[int] = field(default_factory=list)  # the CDR order select() ranks by
    twins: dict[int, int] = field(default_factory=dict)  # collapsed duplicate -> its representative
    titles: dict[str, str] = field(default_factory=dict)  # document titles of facts in a contradiction
    gram: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0), np.float32))  # see ``screen``
    importance: Floats = field(default_factory=lambda: np.zeros(0))  # ``rows[i]["importance"]`` as floats
    index: dict[str, int] = field(default_factory=dict)  # fact id -> its position in ``ids``
    norms: Floats = field(default_factory=lambda: np.zeros(0))  # rows' squared norms (``pairs_above``)
    # the facts retrieval gathered come first; the connectors read while bounding the walk's scores
    # follow, and how many of those are read depends on the bound, not on the rules
    gathered: int = 0


@dataclass(frozen=True)
class ScoringContext:
    query_vec: Vectors
    residual_vecs: Vectors
    coverage_vecs: Vectors
    depth: Floats
    now_s: float
    blacklist: frozenset[str]
    branch_scoped: bool = False
    query_text: str = ""
    now_us: int = 0


@dataclass
class Selection:
    anchors: list[int]
    connectors: list[Connector]
    suppressed: set[int] = field(default_factory=set)
    resolutions: list[Resolved] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unresolved: int = 0
    hops: int = 0
    rank: dict[int, int] = field(default_factory=dict)  # candidate index -> rank by expected value
    via: dict[int, str] = field(default_factory=dict)  # connector -> kind of edge that reached it

    def chosen(self) -> list[int]:
        return self.anchors + [ci for ci, *_ in self.connectors]

    @property
    def detected(self) -> int:
        """Contradictions arbitrated (the ties among them only while both facts are in the envelope)."""
        return sum(1 for r in self.resolutions if not r.tie) + self.unresolved


def gather(
    uow: UnitOfWork,
    query_vec: Vectors,
    residual: list[SubQueryState],
    budget: int,
    now_us: int,
    min_relevance: float,
    coverage: tuple[Vectors, Floats],
    blacklist: frozenset[str],
    branch_scoped: bool = False,
    query_text: str = "",
    task: list[SubQueryState] | None = None,
    tenant: str | None = None,
) -> Candidates:
    """SPEC-027 §4 steps 1-2: top-K by similarity (quarantined/expired excluded), gate, CDR scores.

    ``branch_scoped``: ``residual`` is one fan-out branch's partition (SPEC-027 §1.3: "relevant to
    THIS partition only"). SPEC-024 §2.7 zeroes the pull of an empty Coverage Set because the
    Residual Set is then the whole task, "not specific"; a partition is specific, so its pull
    applies from window 1 on, which is what lets the branches' scores tell their facts apart.

    The relevance gate (SPEC-024 §2.6) passes a fact relevant to the question or to one of the
    task's sub-queries (``task``; the Residual Set when not given): a sub-query's probe finds facts
    for its hop, and a hop unlike the question would otherwise never pass (the residual
    pull is gated by the sub-query that pulls). Only open sub-queries pull (the score is unchanged);
    an addressed one still vouches that its facts belong to the task.
    """
    k = top_k(budget)
    now_s = now_us / 1e6
    vec = {id(s): vec_from_json(s.embedding) for s in [*residual, *(task or [])]}  # each state decoded once
    probes = [query_vec] + [vec[id(s)] for s in residual]
    # every probe's hits, once each, sorted (their scores are recomputed from the vectors below)
    found = uow.vectors.search_union(probes, k, now_s, EXCLUDED, tenant)  # the session's tenant only
    dim = int(query_vec.shape[0])
    batch = _fetch(uow, found, dim, now_us)
    ids, vecs = batch.ids, batch.vecs
    res_vecs = np.stack([vec[id(s)] for s in residual]) if residual else np.zeros((0, dim))
    v64 = vecs.astype(np.float64)  # once, not in every ``core.cdr`` call
    rel = cdr.relevance(v64, query_vec) if ids else np.zeros(0)
    gate_subs = residual if task is None else task
    gate_vecs = np.stack([vec[id(s)] for s in gate_subs]) if gate_subs else np.zeros((0, dim))
    keep = cdr.relevance_gate(np.maximum(rel, cdr.residual_pull(v64, gate_vecs)), min_relevance)
    # a kept statement's swapped copy (or the true one it copies) is arbitrated, not gated
    keep = np.asarray(
        near_copies.admit_copies(_texts(batch), _sources(batch), keep.tolist()),
        dtype=bool,
    )
    if not keep.all():
        at = np.flatnonzero(keep)
        batch, v64 = _take(batch, at), v64[at]
    cov_vecs, depth = coverage
    if cov_vecs.shape[0] == 0:
        cov_vecs = np.zeros((0, dim), dtype=np.float32)
    ctx = ScoringContext(query_vec, res_vecs, cov_vecs, depth, now_s, blacklist, branch_scoped, query_text, now_us)
    empty = np.zeros(0)
    c = Candidates(
        ids=[],
        rows=[],
        vecs=np.zeros((0, dim), np.float32),
        relevance=empty,
        pull=empty,
        novelty=empty,
        recency=empty,
        penalty=empty,
        score=empty,
        support=np.zeros(0, dtype=np.int64),
        views=[],
        ctx=ctx,
    )
    _extend(c, batch, v64)
    c.gathered = len(c.ids)
    return c


def top_k(budget: int) -> int:
    """How many hits each probe of a window with this fact budget searches for."""
    return max(4 * budget, 50)


def _fetch(uow: UnitOfWork, fact_ids: list[str], dim: int, now_us: int) -> Batch:
    """Rows, vectors and numeric columns of the facts that exist, have a vector, are not excluded and
    not hard-expired, in the given order, as of ``now_us`` (a fact published after the request is not
    in its envelope, even if a distributed runtime stored it first). Every path into an envelope
    (vector hits, graph connectors) comes through here."""
    b = uow.facts.columns(uow.repo, uow.vectors, fact_ids)
    cols = b.cols
    # ``recency.hard_expired`` and ``drift.known_at`` on the columns (``NEVER`` never expires)
    ok = (cols.expires_at_us > now_us) & (cols.epoch_us <= now_us)
    status = b.status if b.status is not None else map(_STATUS, b.rows)
    ok &= ~np.fromiter(map(_EXCLUDED.__contains__, status), dtype=bool, count=len(b.rows))
    keep = np.flatnonzero(ok)
    if keep.shape[0] == len(b.ids) and b.ids:
        return b
    if keep.shape[0] == 0:
        return Batch([], [], np.zeros((0, dim), np.float32), cols.take(keep), [], [], [])
    return _take(b, keep)


def _texts(b: Batch) -> list[str]:
    """The batch's texts, from its heads where it has them (the row dicts stay untouched until the
    envelope's own facts are written out)."""
    return list(map(_HEAD_TEXT, b.heads)) if b.heads is not None else list(map(_TEXT, b.rows))


def _sources(b: Batch) -> list[str]:
    return list(map(_HEAD_SOURCE, b.heads)) if b.heads is not None else list(map(_SOURCE, b.rows))


def _take(b: Batch, keep: Ints) -> Batch:
    """The facts ``keep`` (positions, ascending) of a batch."""
    at = keep.tolist()
    status = [b.status[i] for i in at] if b.status is not None else None
    heads = [b.heads[i] for i in at] if b.heads is not None else None
    grams = [b.grams[i] for i in at] if b.grams is not None else None
    ids, rows = [b.ids[i] for i in at], [b.rows[i] for i in at]
    return Batch(ids, rows, b.vecs[keep], b.cols.take(keep), status, heads, grams)


def _extend(c: Candidates, b: Batch, v64: Floats | None = None) -> None:
    """Score the batch (SPEC-024 §7.1 with SPEC-027 §3.3) and append it to the candidate arrays.
    ``v64``: the batch's vectors as float64, if the caller has them."""
    ctx = c.ctx
    ids, rows, vecs, cols, status, heads, grams = b
    if v64 is None:
        v64 = vecs.astype(np.float64)  # once, not in every ``core.cdr`` call
    sig = cdr.cdr_signals(v64, ctx.query_vec, ctx.coverage_vecs, ctx.depth, ctx.residual_vecs)
    if ctx.branch_scoped:
        sig = replace(sig, residual_pull=cdr.residual_pull(v64, ctx.residual_vecs))
    age = ctx.now_s - cols.modified_at_us / 1e6
    rec = recency.recency_factor(age, cols.ttl_s)
    texts = _texts(b)
    counts = (
        ngram.ngram_overlaps(texts, ctx.blacklist)
        if grams is None
        else ngram.ngram_overlaps_hashed(texts, grams, ctx.blacklist)
    )
    overlaps = np.asarray(counts, dtype=np.float64)
    pen = ngram.ngram_penalty(overlaps)
    score = cdr.cdr_score(cols.importance, sig.relevance, sig.residual_pull, sig.novelty, rec, pen)
    c.index.update(zip(ids, range(len(c.ids), len(c.ids) + len(ids)), strict=True))
    c.ids.extend(ids)
    c.rows.extend(cast(list[FactRow], rows))  # the cache's rows are fact rows
    c.importance = np.concatenate([c.importance, cols.importance])
    c.vecs = np.vstack([c.vecs, vecs]) if c.vecs.size else vecs
    # once per candidate, for both screens' scale (row by row as ``core.conflicts`` computes it)
    c.norms = np.concatenate([c.norms, np.einsum("ij,ij->i", v64, v64)])
    c.relevance = np.concatenate([c.relevance, sig.relevance])
    c.pull = np.concatenate([c.pull, sig.residual_pull])
    c.novelty = np.concatenate([c.novelty, sig.novelty])
    c.recency = np.concatenate([c.recency, rec])
    c.penalty = np.concatenate([c.penalty, pen])
    c.score = np.concatenate([c.score, score])
    c.support = np.concatenate([c.support, np.ones(len(ids), dtype=np.int64)])
    # named tuples built in C (``tuple.__new__``, as ``_make`` does, without its Python frame): one for
    # every candidate of every window; epochs as ``r["epoch_us"] / 1e6`` gives them (int64 -> float64)
    status_of = map(_STATUS, rows) if status is None else status
    tails = zip(rec.tolist(), status_of, (cols.epoch_us / 1e6).tolist(), sig.relevance.tolist(), strict=True)
    c.views.extend(map(_NEW_VIEW, map(tuple.__add__, map(_VIEW_HEAD, rows) if heads is None else heads, tails)))


def screen(c: Candidates, idx: list[int] | None = None, first: int | None = None) -> npt.NDArray[np.float32]:
    """The float32 cosines of the candidates (of ``idx``; ``first``: only its first rows), the screen
    ``core.conflicts`` would compute for duplicates and contradictions alike: one product per request,
    extended as candidates join."""
    n, m = c.vecs.shape[0], c.gram.shape[0]
    v = c.vecs.astype(np.float32, copy=False)
    if m == 0 and n:
        c.gram = v @ v.T  # numpy's symmetric product: faster than a general one
    elif m < n:
        g = np.empty((n, n), dtype=np.float32)
        g[:m, :m] = c.gram
        g[m:] = v[m:] @ v.T
        g[:m, m:] = g[m:, :m].T
        c.gram = g
    if idx is None:
        return c.gram
    at = np.asarray(idx, dtype=np.int64)
    return c.gram[at[:first]][:, at]  # rows then columns: several times faster than ``np.ix_``


def collapse_duplicates(c: Candidates) -> tuple[list[int], dict[int, list[int]]]:
    """Same-value copies (47 identical readings) become one entry carrying ``support``.

    Returns the eligible indices and, per representative of a group of two or more, its members.
    """
    if not c.ids:
        return [], {}
    groups = conflicts.same_claim_duplicates(c.views, c.vecs, gram=screen(c), norms=c.norms)
    c.support[:] = 1  # the groups partition the candidates: most are singletons
    if len(groups) == len(c.ids):  # the usual case: every fact alone
        return list(range(len(c.ids))), {}
    reps: list[int] = []
    members: dict[int, list[int]] = {}
    for g in groups:
        if len(g) == 1:
            reps.append(g[0])
            continue
        rep = min(g, key=lambda i: (-c.score[i], c.ids[i]))
        reps.append(rep)
        members[rep] = g
        c.support[rep] = len(g)
        c.twins.update((m, rep) for m in g if m != rep)
    return sorted(reps), members


def select(
    uow: UnitOfWork, c: Candidates, eligible: list[int], budget: int, policy: Policy, th: Thresholds, exclude: set[str]
) -> Selection:
    """SPEC-025 §2 (anchors + connectors, ``graph_select``) and SPEC-027 §2 (arbitration, with refill).

    Each round builds the selection from the candidates not yet suppressed: with the graph off, the
    top ``budget`` by CDR; with it on, the top seeds by CDR and the best estimates among the other
    anchors and the connectors (SPEC-025 §6). Arbitration suppresses the losers and the next round
    refills their slots; it ends when a round suppresses nothing, so at most one round per candidate.
    """
    ranked = cdr.cdr_rank(c.score[eligible], [c.ids[i] for i in eligible])
    order = [eligible[i] for i in ranked if c.ids[eligible[i]] not in exclude]
    c.order = order
    graph_on = policy.graph_retrieval == "on"
    n_anchor = cdgr.anchor_seed_count(budget, policy.connector_budget) if graph_on else budget
    n_anchor = max(1, min(n_anchor, budget))
    sel = Selection(anchors=[], connectors=[])
    while True:
        live = [i for i in order if i not in sel.suppressed]
        if graph_on:
            graph_select.choose(
                uow, c, sel, live, n_anchor, budget, policy, exclude, _append_outside, th.min_connector_relevance
            )
        else:
            sel.anchors = live[:budget]
            sel.rank = {i: r + 1 for r, i in enumerate(sel.anchors)}
        if not _arbitrate(uow, c, sel, th, order):
            break
    _tie_notes(c, sel)
    return sel


def _append_outside(uow: UnitOfWork, c: Candidates, fact_ids: list[str]) -> None:
    """Connectors below the relevance gate join the candidates (SPEC-025 §2.5: their floor is 0.30)."""
    b = _fetch(uow, fact_ids, c.vecs.shape[1], c.ctx.now_us)
    if b.ids:
        _extend(c, b)


def _arbitrate(uow: UnitOfWork, c: Candidates, sel: Selection, th: Thresholds, order: list[int]) -> bool:
    """SPEC-027 §2.2-§2.5 over the selected facts; returns True when the selection must change.

    The selected facts are also checked against the candidates left out: a left-out fact
    that beats a selected one, or ties with it (§2.5), is moved up in ``order`` next to it, so the
    next round serves it (and suppresses or notes the selected one) instead of a copy with its
    answer swapped standing alone in the envelope.
    """
    chosen = sel.chosen()
    taken = set(chosen)
    listed = chosen + [i for i in order if i not in taken and i not in sel.suppressed]
    # a collapsed duplicate speaks for its representative: the copy may have swapped its answer, not
    # the representative's (five true passages collapse into one, their five copies do not)
    reps = set(listed)
    pool = listed + sorted(m for m, r in c.twins.items() if r in reps and m not in sel.suppressed)
    views = list(map(c.views.__getitem__, pool))
    pairs = conflicts.detect_envelope_contradictions(
        views,
        c.vecs[pool],
        th.contradiction_threshold,
        inside=len(chosen),
        gram=screen(c, pool, len(chosen)),  # only pairs touching the envelope are checked
        norms=c.norms[pool],
    )
    pairs = _other_subjects_dropped(uow, c, views, pairs)
    seen: set[frozenset[int]] = set()  # one pair per two representatives (the first found)
    kept_pairs = []
    for i, j, p in pairs:
        key = frozenset((_rep(c, pool[i]), _rep(c, pool[j])))
        if len(key) == 2 and key not in seen and _new_pair(sel, c, *sorted(key)):
            seen.add(key)
            kept_pairs.append((i, j, p))
    pairs = kept_pairs
    inside = [(i, j, p) for i, j, p in pairs if j < len(chosen)]
    promote: list[tuple[int, int]] = []  # (left-out fact, the selected fact it contests)
    for i, j, p in pairs:
        if j >= len(chosen):
            r = conflicts.resolve_pair(views[i], views[j], p)
            if r.tie or r.kept is views[j]:
                inside.append((i, j, p))
                promote.append((_rep(c, pool[j]), pool[i]))
    if not inside:
        return False
    arb = conflicts.arbitrate_contradictions(views, sorted(inside))
    for i, j, pattern, r in arb.resolutions:
        a, b = _rep(c, pool[i]), _rep(c, pool[j])
        kept, gone = (a, b) if r.kept is views[i] else (b, a)
        sel.resolutions.append(
            Resolved(
                pair=(c.ids[a], c.ids[b]),
                tie=r.tie,
                pattern=pattern,
                kept=c.ids[kept],
                suppressed=c.ids[gone],
                authority_kept=round(float(r.authority_kept), 6),
                authority_suppressed=round(float(r.authority_suppressed), 6),
                texts=(c.views[kept].text, c.views[gone].text),
            )
        )
    lost = {pool[i] for i in arb.suppressed} | {_rep(c, pool[i]) for i in arb.suppressed}
    sel.suppressed |= lost
    for out, contested in promote:
        if out not in sel.suppressed and out in order:
            order.remove(out)
            order.insert(order.index(contested) if contested in order else 0, out)
    return bool(lost) or bool(promote)


def _other_subjects_dropped(
    uow: UnitOfWork, c: Candidates, views: list[conflicts.FactView], pairs: list[tuple[int, int, str]]
) -> list[tuple[int, int, str]]:
    """Text contradictions between facts of two numbered sibling documents are two subjects, not a
    conflict (``core.sibling_titles.numbered_sibling_titles``); structured claims keep their keys."""
    if not pairs:
        return pairs
    keyed = [bool(v.subject and v.attribute) for v in views]
    text = [(i, j, p) for i, j, p in pairs if not (keyed[i] and keyed[j])]
    if not text:
        return pairs
    missing = {views[k].fact_id for i, j, _ in text for k in (i, j)} - c.titles.keys()
    if missing:
        found = uow.repo.fact_titles(sorted(missing))
        c.titles.update((f, found.get(f, "")) for f in missing)
    sibling = sibling_titles.numbered_sibling_titles
    return [
        (i, j, p)
        for i, j, p in pairs
        if (keyed[i] and keyed[j]) or not sibling(c.titles[views[i].fact_id], c.titles[views[j].fact_id])
    ]


def _rep(c: Candidates, i: int) -> int:
    return c.twins.get(i, i)


def _tie_notes(c: Candidates, sel: Selection) -> None:
    """SPEC-027 §2.5: one NOTE per tied contradiction whose two facts both reach the envelope."""
    final = {c.ids[i] for i in sel.chosen()}
    live = [r for r in sel.resolutions if not r.tie or set(r.pair) <= final]
    sel.resolutions = live
    sel.notes = [conflicts.unresolved_conflict_note(*r.texts) for r in live if r.tie]
    sel.unresolved = len(sel.notes)


def _new_pair(sel: Selection, c: Candidates, a: int, b: int) -> bool:
    pair = {c.ids[a], c.ids[b]}
    return not any(set(r.pair) == pair for r in sel.resolutions)


def novelty_ratios(c: Candidates, idx: list[int], relevance_floor: float) -> Floats:
    """SPEC-024 §6 Exit 3 / §8.1 per envelope fact: its CDR score over its query relevance."""
    return exits.novelty_ratio(c.score[idx], c.relevance[idx], relevance_floor)
