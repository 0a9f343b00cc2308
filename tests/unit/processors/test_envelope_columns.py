"""The vectorised forms envelope assembly uses agree with the scalar rules they replace, on random inputs:
fact-cache columns, the ``_fetch`` filter, the envelope's authorities, the CDGR ball's id order and
its reached facts outside the candidates."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

from crp_stream.core import authority, conflicts, recency
from crp_stream.core.drift import known_at
from crp_stream.fabric.caches.fact_cache import NEVER, FactCache
from crp_stream.fabric.sql import db
from crp_stream.fabric.sql.repository import Repository
from crp_stream.processors import assembly, graph_select
from tests.unit.fabric.caches.test_fact_cache import Vectors, fact

SOURCE_TYPES = sorted(authority.SOURCE_AUTHORITY)


def random_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    rows = []
    for k in range(n):
        rows.append(
            fact(
                f"f{int(rng.integers(0, 10**6)):06d}-{k}",
                importance=float(rng.uniform(0.0, 2.0)),
                epoch_us=int(rng.integers(0, 2 * 10**15)),
                modified_at_us=int(rng.integers(0, 2 * 10**15)),
                ttl_s=None if rng.random() < 0.4 else float(rng.uniform(0.0, 10**8)),
                expires_at_us=None if rng.random() < 0.6 else int(rng.integers(0, 2 * 10**15)),
                status=str(rng.choice(["active", "stale", "quarantined", "expired", "superseded"])),
                trust=float(rng.uniform(0.0, 1.0)),
            )
        )
    return rows


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    eng = db.make_engine(f"sqlite:///{tmp_path / 'fabric.sqlite'}")
    db.upgrade(eng)
    yield eng
    eng.dispose()


def scalar_columns(rows: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    """What ``_extend`` and ``_fetch`` computed from the row dicts before the columns."""
    n = len(rows)
    return [
        np.fromiter((r["importance"] for r in rows), dtype=np.float64, count=n),
        np.fromiter((r["modified_at_us"] for r in rows), dtype=np.float64, count=n),
        np.fromiter((recency.ttl_or_inf(r["ttl_s"]) for r in rows), dtype=np.float64, count=n),
        np.asarray([r["epoch_us"] for r in rows], dtype=np.int64),
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("max_facts", [7, 1000])
def test_columns_equal_the_rows_read_one_by_one(engine: Engine, seed: int, max_facts: int) -> None:
    rng = np.random.default_rng(seed)
    rows = random_rows(rng, 60)
    with engine.begin() as conn:
        Repository(conn).insert_facts(rows)
    vecs = Vectors({r["fact_id"]: rng.standard_normal(4).tolist() for r in rows[:50]})  # 10 without a vector
    cache = FactCache(max_facts=max_facts)
    ids_all = [r["fact_id"] for r in rows] + ["missing"]
    for _ in range(3):  # misses, then hits (and, bounded at 7, evictions)
        asked = [str(x) for x in rng.permutation(ids_all)[: int(rng.integers(1, 61))]]
        with engine.begin() as conn:
            b = cache.columns(Repository(conn), vecs, asked)
        assert b.ids == [f for f in asked if f in vecs.vecs]
        assert [r["fact_id"] for r in b.rows] == b.ids
        for got, want in zip(b.cols, scalar_columns(b.rows), strict=False):
            assert got.dtype == want.dtype and np.array_equal(got, want)
        exp = [r["expires_at_us"] for r in b.rows]
        assert b.cols.expires_at_us.tolist() == [NEVER if e is None else e for e in exp]
        assert np.array_equal(b.vecs, np.stack([vecs.vecs[f] for f in b.ids]) if b.ids else b.vecs)


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_fetch_keeps_what_the_scalar_filters_keep(engine: Engine, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = random_rows(rng, 80)
    with engine.begin() as conn:
        Repository(conn).insert_facts(rows)
    vecs = Vectors({r["fact_id"]: rng.standard_normal(4).tolist() for r in rows})
    cache = FactCache()
    now_us = 10**15
    asked = sorted(r["fact_id"] for r in rows)
    with engine.begin() as conn:
        uow = SimpleNamespace(fabric=SimpleNamespace(facts=cache), facts=cache, repo=Repository(conn), vectors=vecs)
        got = assembly._fetch(uow, asked, 4, now_us)  # type: ignore[arg-type]
        ids, all_rows, _ = cache.candidates(Repository(conn), vecs, asked)
    expired = recency.hard_expired([r["expires_at_us"] for r in all_rows], now_us)
    known = known_at([r["epoch_us"] for r in all_rows], now_us)
    want = [
        f
        for k, (f, r) in enumerate(zip(ids, all_rows, strict=True))
        if r["status"] not in assembly.EXCLUDED and not expired[k] and known[k]
    ]
    assert 0 < len(want) < len(ids)  # the random rows exercise every filter
    assert got.ids == want
    assert [r["fact_id"] for r in got.rows] == want
    assert np.array_equal(got.vecs, np.stack([vecs.vecs[f] for f in want]))
    assert got.cols.epoch_us.tolist() == [r["epoch_us"] for r in got.rows]


def test_envelope_authorities_are_fact_authority_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    views = [
        conflicts.FactView(
            fact_id=str(k),
            text="t",
            source_type=str(rng.choice(SOURCE_TYPES)),
            trust=float(rng.uniform(0, 1)),
            importance=float(rng.uniform(0, 3)),
            recency=float(rng.uniform(0.3, 1)),
        )
        for k in range(500)
    ]
    together = authority.authority(
        [authority.source_authority(v.source_type, v.trust) for v in views],
        [v.recency for v in views],
        [v.importance for v in views],
    ).tolist()
    assert together == [float(authority.fact_authority(v)) for v in views]


def random_ids(rng: np.random.Generator, n: int) -> list[str]:
    alphabet = list("abcXYZ019-_:éß")
    ids = {"".join(rng.choice(alphabet, size=int(rng.integers(1, 12)))) for _ in range(n)}
    return [str(x) for x in rng.permutation(sorted(ids))]


@pytest.mark.parametrize("seed", range(5))
def test_id_order_sorts_as_sorted_does(seed: int) -> None:
    names = random_ids(np.random.default_rng(seed), 400)
    order = graph_select.id_order(names).tolist()
    assert [names[i] for i in order] == sorted(names)
    assert graph_select.id_order([]).tolist() == []


@pytest.mark.parametrize("seed", [8, 9])
def test_extend_scores_and_views_as_the_row_by_row_rules(seed: int) -> None:
    from crp_stream.core import cdr, ngram
    from crp_stream.fabric.caches.fact_batch import Batch, Columns, numbers

    rng = np.random.default_rng(seed)
    rows = random_rows(rng, 120)
    for r in rows:  # a small vocabulary: some texts repeat six words of the quoted ones
        r["text"] = " ".join(str(w) for w in rng.choice(["a", "b", "c"], size=int(rng.integers(4, 12))))
    vecs = rng.standard_normal((120, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    num, whole = numbers(rows)
    cols = Columns(num[:, 0], num[:, 1], num[:, 2], whole[:, 0], whole[:, 1])
    batch = Batch([r["fact_id"] for r in rows], rows, vecs, cols)
    now_s = 1.5e9
    blacklist = ngram.update_ngram_blacklist(frozenset(), " ".join(r["text"] for r in rows[:3]))
    query = vecs[0].astype(np.float64)
    ctx = assembly.ScoringContext(query, np.zeros((0, 8)), np.zeros((0, 8), np.float32), np.zeros(0), now_s, blacklist)
    empty = np.zeros(0)
    c = assembly.Candidates(
        [], [], np.zeros((0, 8), np.float32), empty, empty, empty, empty, empty, empty, np.zeros(0, np.int64), [], ctx
    )
    assembly._extend(c, batch)
    n = len(rows)
    age = now_s - np.fromiter((r["modified_at_us"] for r in rows), dtype=np.float64, count=n) / 1e6
    rec = recency.recency_factor(age, [recency.ttl_or_inf(r["ttl_s"]) for r in rows])
    rel = cdr.relevance(vecs.astype(np.float64), query)
    pen = ngram.ngram_penalty(ngram.ngram_overlaps([r["text"] for r in rows], blacklist))
    imp = np.fromiter((r["importance"] for r in rows), dtype=np.float64, count=n)
    assert 0 < np.count_nonzero(pen) < n and 0 < np.count_nonzero(rec < 1.0) < n
    assert np.array_equal(c.recency, rec) and np.array_equal(c.relevance, rel)
    assert np.array_equal(c.score, cdr.cdr_score(imp, rel, np.zeros(n), np.ones(n), rec, pen))
    make = conflicts.FactView._make
    want = [
        make((*assembly._VIEW_HEAD(r), rc, r["status"], r["epoch_us"] / 1e6, rl))
        for r, rc, rl in zip(rows, rec.tolist(), rel.tolist(), strict=True)
    ]
    assert c.views == want and all(type(v) is conflicts.FactView for v in c.views)
    assert [type(x) for x in c.views[0]] == [type(x) for x in want[0]]
    # the index and importance column choose() and envelope.build read, against the rows, over two batches
    more = random_rows(rng, 30)
    num2, whole2 = numbers(more)
    assembly._extend(
        c,
        Batch(
            [r["fact_id"] for r in more],
            more,
            vecs[:30],
            Columns(num2[:, 0], num2[:, 1], num2[:, 2], whole2[:, 0], whole2[:, 1]),
        ),
    )
    assert c.index == {f: i for i, f in enumerate(c.ids)} and len(c.index) == n + 30
    every = np.asarray([r["importance"] for r in c.rows], dtype=np.float64)
    assert c.importance.dtype == np.float64 and np.array_equal(c.importance, every)
