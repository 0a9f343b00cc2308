"""GraphCache: complete adjacency, batched loads, invalidation and bounds (crp_stream/fabric/caches/graph.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine

from crp_stream.core import cdgr
from crp_stream.fabric.caches.graph import GraphCache
from crp_stream.fabric.sql import db
from crp_stream.fabric.sql.repository import Repository

# a - b - c - d, plus a - e and b - e (a triangle a, b, e), and an isolated f.
EDGES = [("a", "b", 0.9), ("b", "c", 0.8), ("c", "d", 0.7), ("a", "e", 0.6), ("b", "e", 0.65)]


def full_adjacency(edges: Iterable[tuple[str, str, float]]) -> dict[str, dict[str, float]]:
    adj: dict[str, dict[str, float]] = {}
    for s, d, w in edges:
        adj.setdefault(s, {})[d] = w
        adj.setdefault(d, {})[s] = w
    return adj


class FakeSource:
    """Behaves like Repository.adjacency: full entries for the asked ids, partial reverse entries."""

    def __init__(self, edges: list[tuple[str, str, float]]):
        self.full = full_adjacency(edges)
        self.calls: list[list[str]] = []

    def adjacency(self, fact_ids: Iterable[str]) -> dict[str, dict[str, float]]:
        ids = sorted(set(fact_ids))
        self.calls.append(ids)
        out: dict[str, dict[str, float]] = {}
        for i in ids:
            for n, w in self.full.get(i, {}).items():
                out.setdefault(i, {})[n] = w
                out.setdefault(n, {})[i] = w  # the partial reverse entry
        return out


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    eng = db.make_engine(f"sqlite:///{tmp_path / 'fabric.sqlite'}")
    db.upgrade(eng)
    yield eng
    eng.dispose()


def test_adjacency_returns_complete_entries_for_requested_ids_only() -> None:
    src = FakeSource(EDGES)
    got = GraphCache().adjacency(src, ["c"])
    assert got == {"c": {"b": 0.8, "d": 0.7}}  # b and d (partial reverse entries) are not returned


def test_second_request_is_served_from_memory_and_loads_only_misses() -> None:
    src = FakeSource(EDGES)
    cache = GraphCache()
    cache.adjacency(src, ["a", "b"])
    got = cache.adjacency(src, ["a", "b", "c"])
    assert src.calls == [["a", "b"], ["c"]]
    assert got["a"] == {"b": 0.9, "e": 0.6}
    assert cache.hits == 2 and cache.misses == 3 and cache.loads == 2
    cache.adjacency(src, ["a", "c"])
    assert len(src.calls) == 2  # all hits: no load


def test_isolated_fact_is_cached_as_empty() -> None:
    src = FakeSource(EDGES)
    cache = GraphCache()
    assert cache.neighbours(src, "f") == {}
    assert cache.neighbours(src, "f") == {}
    assert src.calls == [["f"]]


def test_walk_keeps_anchor_edges_that_a_later_hop_would_clobber() -> None:
    # Loading hop 1 (b, e) through Repository.adjacency returns a partial entry for anchor a
    # ({b, e} only) and for b/e; merged with dict.update, the anchor-anchor edge a-b would vanish.
    src = FakeSource(EDGES)
    adj = GraphCache().walk(src, ["a", "c"], hops=2)
    assert adj["a"] == {"b": 0.9, "e": 0.6}
    assert adj["c"] == {"b": 0.8, "d": 0.7}
    assert adj["b"] == {"a": 0.9, "c": 0.8, "e": 0.65}
    assert set(adj) == {"a", "b", "c", "d", "e"}
    assert len(src.calls) == 2  # level 0 then level 1; level 2 is empty (every node already seen)


def test_walk_agrees_with_cdgr_on_the_full_graph() -> None:
    src = FakeSource(EDGES)
    full = full_adjacency(EDGES)
    anchors = ["a", "d"]
    walked = GraphCache().walk(src, anchors, hops=2)
    found = cdgr.expand_connectors(anchors, walked, 2)
    assert found == cdgr.expand_connectors(anchors, full, 2) == {"b", "c", "e"}
    for c in sorted(found):
        assert cdgr.bridge_value(c, anchors, walked) == cdgr.bridge_value(c, anchors, full)


def test_walk_with_zero_hops_loads_the_seeds_only_and_rejects_negative_hops() -> None:
    src = FakeSource(EDGES)
    assert GraphCache().walk(src, ["d"], hops=0) == {"d": {"c": 0.7}}
    with pytest.raises(ValueError):
        GraphCache().walk(src, ["d"], hops=-1)


def test_invalidate_and_sync_force_a_reload() -> None:
    src = FakeSource(EDGES)
    cache = GraphCache()
    cache.adjacency(src, ["a", "b"])
    src.full["a"]["z"] = 0.7  # a new edge a - z was written
    src.full.setdefault("z", {})["a"] = 0.7
    assert "z" not in cache.neighbours(src, "a")  # stale until told
    cache.invalidate(["a", "z"])
    assert cache.neighbours(src, "a") == {"b": 0.9, "e": 0.6, "z": 0.7}
    assert "b" in cache
    cache.sync("gen-1")
    assert len(cache) == 0  # first generation seen: nothing cached is trusted
    cache.adjacency(src, ["b"])
    cache.sync("gen-1")
    assert "b" in cache
    cache.sync(None)
    assert "b" in cache
    cache.sync("gen-2")
    assert "b" not in cache


def test_bounded_by_max_nodes_oldest_first() -> None:
    src = FakeSource(EDGES)
    cache = GraphCache(max_nodes=3)
    cache.adjacency(src, ["a", "b"])
    cache.adjacency(src, ["c", "d"])
    assert len(cache) == 3 and "a" not in cache and {"b", "c", "d"} <= {k for k in "abcdef" if k in cache}
    with pytest.raises(ValueError):
        GraphCache(max_nodes=0)


def test_a_full_cache_answers_a_request_whose_load_evicts_its_own_hits() -> None:
    """A request of cached and uncached facts on a full cache: the load evicts the oldest entries,
    which may be the request's own hits (it raised KeyError); rows and packed edges still answer."""
    src = FakeSource(EDGES)
    full = full_adjacency(EDGES)
    cache = GraphCache(max_nodes=2)
    cache.adjacency(src, ["a", "b"])  # full: a, b held
    got = cache.adjacency(src, ["a", "b", "c", "d"])  # a, b hits; loading c, d evicts them
    assert got == {f: full[f] for f in "abcd"}
    assert len(cache) <= 4 and "c" in cache and "d" in cache
    cache.adjacency(src, ["a", "e"])
    ids = cache.index(["c", "d", "b", "e"])
    src_col, nb, w, _k = cache.edges(src, ids)
    names = cache.names
    assert sorted(
        zip([names[i] for i in src_col.tolist()], [names[j] for j in nb.tolist()], w.tolist(), strict=True)
    ) == sorted((f, n, wt) for f in "cdbe" for n, wt in full[f].items())


def test_backed_by_the_repository(engine: Engine) -> None:
    with engine.begin() as conn:
        Repository(conn).add_edges(EDGES)
    cache = GraphCache()
    with engine.begin() as conn:
        repo = Repository(conn)
        walked = cache.walk(repo, ["a"], hops=1)
        assert walked == {"a": {"b": 0.9, "e": 0.6}, "b": {"a": 0.9, "c": 0.8, "e": 0.65}, "e": {"a": 0.6, "b": 0.65}}
        # the repository's own answer for hop 1 holds a partial entry for a: what the cache avoids
        assert repo.adjacency(["b", "e"])["a"] == {"b": 0.9, "e": 0.6}
        assert repo.adjacency(["b"])["a"] == {"b": 0.9}
    with engine.begin() as conn:
        Repository(conn).add_edges([("a", "d", 0.61)])
        cache.invalidate(["a", "d"])
        assert cache.neighbours(Repository(conn), "a") == {"b": 0.9, "e": 0.6, "d": 0.61}


def test_written_by_this_process_keeps_the_rest_of_the_cache_across_the_new_generation() -> None:
    src = FakeSource(EDGES)
    cache = GraphCache()
    cache.sync("3")
    cache.adjacency(src, ["a", "c"])
    src.full["c"]["z"] = 0.7  # this process's ingest adds c - z and moves the generation 3 -> 4
    src.full.setdefault("z", {})["c"] = 0.7
    cache.written("3", "4", ["c", "z"])
    cache.sync("4")  # the next request: same generation, nothing dropped but c
    assert "a" in cache and "c" not in cache
    assert cache.neighbours(src, "c") == {"b": 0.8, "d": 0.7, "z": 0.7}


def test_written_after_another_writer_or_rolled_back_drops_everything() -> None:
    src = FakeSource(EDGES)
    cache = GraphCache()
    cache.sync("3")
    cache.adjacency(src, ["a"])
    cache.written("4", "5", ["b"])  # the cache never saw 4: another process wrote in between
    assert len(cache) == 0
    cache.adjacency(src, ["a"])
    cache.written("5", "6", ["b"])
    assert "a" in cache
    cache.sync("5")  # the write rolled back: the store is still at 5
    assert len(cache) == 0


def test_preload_holds_complete_entries_and_later_reads_hit(engine: Engine) -> None:
    """Start-up preload: every listed fact's complete edges, bounded by max_nodes; a later read of a
    preloaded fact costs no load, and the entries equal what a lazy load reads."""
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.add_edges(EDGES)
        lazy = GraphCache().adjacency(repo, "abcdef")
        cache = GraphCache(max_nodes=4)
        assert cache.preload(repo, list("abcdef"), "7") == 4
        assert (cache.hits, cache.misses, cache.loads) == (0, 0, 0)
        assert cache._unames_len == len(cache.names) and cache._packed == 4  # built at start-up
        assert list(cache._adj.values()) == [None] * 4  # packed entries hold no arrays of their own
        assert cache.adjacency(repo, "abcd") == {f: lazy[f] for f in "abcd"}
        assert cache.loads == 0 and cache.hits == 4
        cache.sync("8")  # another process wrote edges: nothing preloaded is trusted
        assert len(cache) == 0


def test_install_replaces_entries_and_keeps_the_bound() -> None:
    cache = GraphCache(max_nodes=3)
    row = (np.asarray(cache.index(["x"]), dtype=np.int64), np.asarray([0.7]), np.asarray([0], dtype=np.int8))
    cache.install(["a", "b"], [row, row])
    assert "a" in cache and "b" in cache
    cache.install(["c", "d", "a"], [row, row, row])  # four entries for three places: the oldest goes
    assert len(cache) == 3 and "b" not in cache and all(f in cache for f in ("c", "d", "a"))


def _random_edges(rng: np.random.Generator, n: int, m: int) -> list[tuple[str, str, float]]:
    pairs = {tuple(sorted(rng.choice(n, 2, replace=False).tolist())) for _ in range(m)}
    return [(f"f{a:03d}", f"f{b:03d}", round(float(rng.uniform(0.5, 1.0)), 3)) for a, b in sorted(pairs)]


class SortedSource(FakeSource):
    """Entries ordered by neighbour, as the store returns them (FakeSource's order depends on the batch)."""

    def adjacency(self, fact_ids: Iterable[str]) -> dict[str, dict[str, float]]:
        return {f: dict(sorted(nb.items())) for f, nb in super().adjacency(fact_ids).items()}


def _concatenated(cache: GraphCache, src: FakeSource, ints: list[int]) -> tuple[np.ndarray, ...]:
    """The rule ``edges`` replaces: ``rows`` concatenated, each entry's int repeated per edge."""
    rows = cache.rows(src, ints)
    if not rows:
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int8))
    nbs, ws, ks = zip(*rows, strict=True)
    counts = [len(nb) for nb in nbs]
    return (
        np.repeat(np.asarray(ints, dtype=np.int64), counts),
        np.concatenate(nbs),
        np.concatenate(ws),
        np.concatenate(ks),
    )


@pytest.mark.parametrize("seed", range(6))
def test_packed_edges_equal_the_concatenated_rows_through_writes(seed: int) -> None:
    """``edges`` (one gather from the pack, or the entries' own arrays) against ``rows`` concatenated,
    on random graphs, as entries are installed, invalidated, evicted and the cache repacks."""
    rng = np.random.default_rng(seed)
    n = 60
    src = SortedSource(_random_edges(rng, n, 150))
    names = [f"f{i:03d}" for i in range(n)]
    # room for every fact: a load that evicts an entry the same call asked for is another matter
    packed, plain = GraphCache(max_nodes=n), GraphCache(max_nodes=n)
    packed.preload(src, names[:45], "g")
    plain.sync("g")
    plain.index(packed.names)  # the same ints in both
    for _ in range(40):
        ids = sorted({int(i) for i in rng.choice(len(packed.names), int(rng.integers(0, 25)), replace=False)})
        before = (packed.hits, packed.misses)
        got = packed.edges(src, ids)
        hits, misses = packed.hits - before[0], packed.misses - before[1]
        want = _concatenated(plain, src, ids)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and np.array_equal(g, w)
        assert hits + misses == len(ids)
        roll = rng.random()
        if roll < 0.3:  # this process wrote edges of some facts: both caches forget them
            gone = [names[i] for i in rng.choice(n, 5, replace=False)]
            packed.invalidate(gone)
            plain.invalidate(gone)
        elif roll < 0.5:  # installed rows (the writer keeps what it wrote)
            who = [names[i] for i in rng.choice(n, 3, replace=False)]
            row = (np.asarray(packed.index(names[:2]), dtype=np.int64), np.asarray([0.61, 0.62]), np.zeros(2, np.int8))
            packed.install(who, [row] * 3)
            plain.install(who, [row] * 3)
        elif roll < 0.55:
            packed.pack()
        assert len(packed) <= packed.max_nodes
        # an entry holds its own arrays exactly when it is outside the pack
        start = packed._start
        assert all((row is None) == (i < start.shape[0] and start[i] >= 0) for i, row in packed._adj.items())
    assert packed._packed == sum(1 for i in packed._adj if i < packed._start.shape[0] and packed._start[i] >= 0)


def test_extend_adds_written_rows_to_held_entries_as_a_load_reads_them(engine: Engine) -> None:
    """Structure edges written with ON CONFLICT DO NOTHING: held entries gain the new rows in the
    store's key order (neighbour id, then kind), a row already there keeps its weight, facts not held
    stay unheld; the entries then equal a fresh load."""
    rows = [
        ("b", "a", 1.0, "adjacency"),
        ("b", "a", 1.0, "mention"),
        ("a", "b", 1.0, "adjacency"),
        ("b", "c", 0.3, "similarity"),  # already there at 0.8: kept as it is
        ("e", "aa", 1.0, "mention"),
        ("e", "aa", 0.5, "mention"),  # the first of two wins
        ("d", "c", 1.0, "adjacency"),  # d is not held
    ]
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.add_edges(EDGES)
        cache = GraphCache()
        cache.rows(repo, cache.index(["a", "b", "c", "e"]))
        for kind in ("adjacency", "mention", "similarity"):
            repo.add_directed_edges([(s, d, w) for s, d, w, k in rows if k == kind], kind)
        cache.extend(rows)
        assert "d" not in cache
        fresh = GraphCache()
        for f, (nb, w, kind) in zip("abce", fresh.rows(repo, fresh.index(list("abce"))), strict=True):
            c_nb, c_w, c_kind = cache.rows(repo, cache.index([f]))[0]
            assert [cache.names[j] for j in c_nb.tolist()] == [fresh.names[j] for j in nb.tolist()]
            assert c_w.tolist() == w.tolist() and c_kind.tolist() == kind.tolist()
        assert cache.loads == 1  # the four entries were read once, before the writes
        b_nb, _w, _k = cache.rows(repo, cache.index(["b"]))[0]
        assert [cache.names[j] for j in b_nb.tolist()] == ["a", "a", "a", "c", "e"]
