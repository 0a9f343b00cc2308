"""The columnar gather agrees with the per-hit rules it replaces, on random inputs: the union of the
probes' top K from the ANN cache's arrays (``search_union``, ``ann.top_slots``) against the ranked
tuples of ``search_many``; the n-gram screen over kept hash arrays against ``ngram_overlaps``; the
fact cache's per-slot statuses against the store; the CDGR connectors' lookup against its list form."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine

from crp_stream.core import ngram
from crp_stream.fabric.caches.fact_cache import FactCache
from crp_stream.fabric.sql import db
from crp_stream.fabric.sql.repository import Repository
from crp_stream.fabric.vectors.ann import top_slots
from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.fabric.vectors.port import SCORE_DECIMALS, VectorItem, rank
from crp_stream.processors import graph_select
from tests.unit.fabric.caches.test_fact_cache import Vectors, fact
from tests.unit.fabric.vectors.test_ann import NOW, clustered


@pytest.mark.parametrize("seed", range(6))
def test_top_slots_is_the_ranked_cut(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        n, k = rng.randrange(1, 60), rng.randrange(1, 40)
        limit = k + 8
        n = min(n, limit)
        base = rng.random()
        # scores on and around rounding boundaries: ties after rounding, half-way points, equal floats
        pool = [base, base + 4e-7, base - 4e-7, base + 5e-7, round(base, 6) + 5e-7, base + 1e-6, base + 3e-6]
        scores = np.array(sorted((rng.choice([*pool, rng.random()]) for _ in range(n)), reverse=True))
        names = [f"f{rng.randrange(10**6):06d}-{i}" for i in range(n)]
        slots = np.arange(n, dtype=np.int64)
        ranked = rank(list(zip(names, scores.tolist(), strict=True)))
        got = top_slots(slots, scores, k, limit, names, SCORE_DECIMALS)
        if len(ranked) >= limit and not ranked[-1][1] < ranked[k - 1][1]:
            assert got is None  # search_many would search again
            continue
        assert got is not None
        assert sorted(names[i] for i in got.tolist()) == sorted(f for f, _ in ranked[:k])


@pytest.fixture
def index(tmp_path: Path) -> EdgeVectorIndex:
    idx = EdgeVectorIndex(tmp_path / "edge")
    vecs = clustered(3000)
    status = ["active", "active", "stale", "quarantined", "superseded"]
    idx.upsert(
        [VectorItem(f"f{i:05d}", v, status[i % 5], NOW + 100 if i % 10 == 0 else None) for i, v in enumerate(vecs)]
    )
    idx.enable_ann(1000, 10_000)
    return idx


@pytest.mark.parametrize("k", [1, 20, 140])
def test_search_union_is_the_union_of_search_many(index: EdgeVectorIndex, k: int) -> None:
    excluded = ("quarantined", "expired", "superseded")
    for seed in range(4):
        probes = list(clustered(4, seed=20 + seed))
        for now in (NOW, NOW + 101):
            want = sorted({f for hits in index.search_many(probes, k, now, excluded) for f, _ in hits})
            assert index.search_union(probes, k, now, excluded) == want
    index.set_status(["f00000", "f00001"], "quarantined")  # a write drops the kept results
    want = sorted({f for hits in index.search_many(probes, k, NOW, excluded) for f, _ in hits})
    assert index.search_union(probes, k, NOW, excluded) == want


def test_search_union_without_the_ann_cache(tmp_path: Path) -> None:
    idx = EdgeVectorIndex(tmp_path / "edge")
    idx.upsert([VectorItem(f"f{i:03d}", v) for i, v in enumerate(clustered(200))])
    probes = list(clustered(3, seed=4))
    want = sorted({f for hits in idx.search_many(probes, 30, NOW) for f, _ in hits})
    assert idx.search_union(probes, 30, NOW) == want
    assert idx.search_union([], 30, NOW) == [] and idx.search_union(probes, 0, NOW) == []


@pytest.mark.parametrize("seed", range(4))
def test_ngram_overlaps_hashed_equals_ngram_overlaps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = ["a", "b", "c", "d", "Ünï", "x1"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 14)))) for _ in range(200)]
    blacklist = ngram.update_ngram_blacklist(frozenset(), " ".join(texts[:4]))
    kept = [ngram.gram_hash_array(t) if rng.random() < 0.7 else None for t in texts]
    want = ngram.ngram_overlaps(texts, blacklist)
    assert 0 < sum(map(bool, want)) < len(texts)
    assert ngram.ngram_overlaps_hashed(texts, kept, blacklist) == want
    assert ngram.ngram_overlaps_hashed(texts, kept, frozenset()) == [0] * len(texts)
    assert ngram.ngram_overlaps_hashed([], [], blacklist) == []


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    eng = db.make_engine(f"sqlite:///{tmp_path / 'fabric.sqlite'}")
    db.upgrade(eng)
    return eng


def test_fact_cache_slot_statuses_follow_the_store(engine: Engine) -> None:
    """The per-slot statuses (the path where every fact is cached and known) against the statuses
    read from the store, through writes of this process, of another, and evictions."""
    rng = random.Random(5)
    ids = [f"f{i:03d}" for i in range(40)]
    with engine.begin() as conn:
        Repository(conn).insert_facts([fact(f) for f in ids])
    vectors = Vectors({f: [1.0, float(i)] for i, f in enumerate(ids)})
    cache = FactCache(max_facts=25)
    statuses = ["active", "stale", "quarantined", "superseded", "expired"]
    for step in range(60):
        with engine.begin() as conn:
            repo = Repository(conn)
            if step % 3 == 1:  # this process writes and says so
                changed = rng.sample(ids, 3)
                gen = repo.set_fact_status(changed, rng.choice(statuses))
                if gen is not None:
                    cache.written(gen - 1, gen, changed)
            asked = rng.sample(ids, rng.randrange(1, 20))
            b = cache.columns(repo, vectors, asked)
            truth = repo.fact_statuses(asked)
        assert b.ids == asked and b.status == [truth[f] for f in asked]
        assert [r["fact_id"] for r in b.rows] == asked and [h[0] for h in b.heads or []] == asked
        with engine.begin() as conn:  # a cache that reads everything from the store: the same batch
            fresh = FactCache().columns(Repository(conn), vectors, asked)
        assert np.array_equal(b.vecs, fresh.vecs) and all(map(np.array_equal, b.cols, fresh.cols))
        assert b.heads == fresh.heads and b.status == fresh.status
        if step % 7 == 3:  # another process writes: the counter moves without ``written``
            with engine.begin() as conn:
                Repository(conn).set_fact_status(rng.sample(ids, 4), rng.choice(statuses))
    assert len(cache) == 25


@pytest.mark.parametrize("seed", range(8))
def test_walk_positions_and_bridging_candidates_are_the_list_forms(seed: int) -> None:
    """A walk's places of fact ids (a binary search of its sorted names) and its bridging candidates,
    against the forms that look every reached fact up by id."""
    rng = random.Random(seed)
    # ids of several lengths, some a prefix of another: a search at one width must not cut them
    universe = sorted({f"f{rng.randrange(10 ** rng.randrange(1, 6))}{rng.choice(['', 'x', 'yy'])}" for _ in range(900)})
    ball = sorted(rng.sample(universe, min(200, len(universe) // 2)))
    ids = [*rng.sample(universe, 150), "z" * 40]  # some outside the walk; one longer than any
    bridge = np.asarray([rng.choice([0.0, 0.0, 0.5, 1.25, rng.random()]) for _ in ball])
    extra = np.asarray([rng.random() < 0.3 for _ in ball])
    w = graph_select.Walk(
        depth=2,
        ids=ball,
        bridge=bridge,
        bridged_cols=np.zeros((len(ball), 0), dtype=bool),
        anchors=[],
        extra=extra,
        level=np.zeros(0, dtype=np.int64),
        local=np.arange(len(ball), dtype=np.int64),
        edges=(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int8)),
        names=np.asarray(ball, dtype=str),
    )
    assert w.positions(ids).tolist() == [ball.index(f) if f in ball else -1 for f in ids]
    exclude, taken = set(rng.sample(ball, 20)), set(rng.sample(ball, 20))
    want = sorted(
        (k for k, f in enumerate(ball) if bridge[k] > 0 and f not in exclude and f not in taken),
        key=lambda k: (bool(extra[k]), -bridge[k], k),
    )
    assert graph_select.bridging_candidates(w, exclude, taken) == want
    empty = graph_select.Walk(0, [], bridge[:0], [], [], extra[:0], w.level, w.local[:0], w.edges)
    assert empty.positions(ids).tolist() == [-1] * len(ids)


def test_recency_factor_of_fresh_facts_is_the_full_rule() -> None:
    from crp_stream.core import recency

    rng = np.random.default_rng(4)
    ttl = np.where(rng.random(300) < 0.3, np.inf, rng.uniform(0.0, 1e6, 300))
    for age in (rng.uniform(-10.0, 1e6, 300), np.minimum(rng.uniform(-10.0, 1e6, 300), ttl / 2)):
        want = np.ones(300)
        finite = np.isfinite(ttl)
        half = recency.FRESH_FRACTION * np.where(finite, ttl, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            decay = 1.0 - (1.0 - recency.STALE_FLOOR) * (age - half) / half
        stale = finite & (age > half)
        want[stale] = np.clip(np.where(age >= ttl, recency.STALE_FLOOR, decay), recency.STALE_FLOOR, 1.0)[stale]
        got = recency.recency_factor(age, ttl)
        assert got.dtype == np.float64 and np.array_equal(got, want)


def test_preloaded_facts_carry_their_ngram_hashes(engine: Engine) -> None:
    texts = {f"p{i}": f"the quick brown fox jumps over the lazy dog number {i} again" for i in range(6)}
    with engine.begin() as conn:
        Repository(conn).insert_facts([fact(f, text=t) for f, t in texts.items()])
    vectors = Vectors({f: [1.0, float(i)] for i, f in enumerate(texts)})
    cache = FactCache(max_facts=10)
    with engine.begin() as conn:
        repo = Repository(conn)
        cache.preload(repo, vectors, list(texts)[:4])
        b = cache.columns(repo, vectors, list(texts))  # four preloaded, two read now
    assert b.grams is not None and [g is None for g in b.grams] == [False] * 4 + [True] * 2
    for f, g in zip(b.ids[:4], b.grams, strict=False):
        assert g is not None and sorted(g.tolist()) == sorted(ngram.gram_hash_array(texts[f]).tolist())


def test_search_union_with_remembered_top_slots(index: EdgeVectorIndex) -> None:
    """Kept hits' ``top_slots`` are remembered (``AnnCache._tops``): asked again with another k, after a
    status change and after new points (slot names change), the union is still ``search_many``'s."""
    excluded = ("quarantined", "expired", "superseded")
    ann = index.ann()
    assert ann is not None
    probes = list(clustered(4, seed=31))
    for round_ in range(3):
        for k in (40, 25, 40, 60, 25):
            want = sorted({f for hits in index.search_many(probes, k, NOW, excluded) for f, _ in hits})
            assert index.search_union(probes, k, NOW, excluded) == want
            assert index.search_union(probes[1:], k, NOW, excluded) == sorted(
                {f for hits in index.search_many(probes[1:], k, NOW, excluded) for f, _ in hits}
            )
        assert ann._tops  # the second asking of each probe read them
        if round_ == 0:
            index.set_status([index.search(probes[0], 1, NOW)[0][0]], "quarantined")
        else:
            near = clustered(30, seed=40 + round_) * 0.2 + np.asarray(probes[0]) * 0.8
            near /= np.linalg.norm(near, axis=1, keepdims=True)
            index.upsert([VectorItem(f"n{round_}-{i:03d}", v) for i, v in enumerate(near)])
            assert not ann._tops
