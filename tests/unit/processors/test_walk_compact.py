"""The CDGR walk's compact numbering (``LoadedEdges.local``) against the graph cache's ints it replaces:
on random graphs loaded in random batches, the renumbered edges map back to the same edges, and
breadth-first levels on them are the levels on the cache's ints."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from crp_stream.core import graph_rank
from crp_stream.fabric.caches.graph import GraphCache
from crp_stream.processors import graph_select
from crp_stream.processors.graph_walk import LoadedEdges
from tests.unit.fabric.caches.test_graph import SortedSource, _random_edges


@pytest.mark.parametrize("seed", range(8))
def test_levels_on_the_compact_numbering_are_the_levels_on_the_cache_ints(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 80
    source = SortedSource(_random_edges(rng, n, 200))
    cache = GraphCache()
    names = [f"f{i:03d}" for i in range(n)]
    if seed % 2:
        cache.preload(source, names[: n // 2], "g")  # half packed, half loaded lazily
    cache.index(rng.permutation(names).tolist())
    g = LoadedEdges(cache=cache)
    uow = SimpleNamespace(repo=source)
    for _ in range(6):
        g.load(uow, rng.choice(len(cache.names), int(rng.integers(1, 15)), replace=False).tolist())  # type: ignore[arg-type]
        assert np.array_equal(g.glob[g.lsrc], g.src) and np.array_equal(g.glob[g.ldst], g.dst)
        assert np.array_equal(g.local(g.glob), np.arange(g.glob.shape[0]))  # one number per fact
        assert np.unique(g.glob).shape == g.glob.shape
        for hops in (1, 2, 3):
            seeds = rng.choice(len(cache.names), int(rng.integers(1, 5)), replace=False)
            want, want_depth = graph_rank.walk_levels(seeds, g.src, g.dst, hops)
            got, depth = graph_rank.walk_levels(g.local(seeds), g.lsrc, g.ldst, hops)
            assert depth == want_depth
            full = np.full(max(want.shape[0], int(g.glob.max(initial=-1)) + 1), -1, dtype=np.int64)
            full[g.glob[: got.shape[0]]] = got
            assert np.array_equal(full[: want.shape[0]], want)
            assert (full[want.shape[0] :] == -1).all()


@pytest.mark.parametrize("seed", range(4))
def test_name_array_is_the_names_through_growth_and_a_new_numbering(seed: int) -> None:
    """The fixed-width copy of the ids the walk gathers and sorts: equal to ``names`` as ints are added
    (longer ids widen it), and after ``clear`` starts the numbering over."""
    rng = np.random.default_rng(seed)
    cache = GraphCache(max_nodes=200)
    for step in range(12):
        width = int(rng.integers(1, 40))
        cache.index(f"{'x' * int(rng.integers(0, width))}{k}-{step}" for k in range(int(rng.integers(0, 300))))
        arr = cache.name_array().astype(str)
        assert arr[: len(cache.names)].tolist() == cache.names
        picked = rng.integers(0, max(len(cache.names), 1), 50) if cache.names else np.zeros(0, np.int64)
        got = arr[picked]
        assert got.tolist() == [cache.names[i] for i in picked.tolist()]
        assert [got.tolist()[i] for i in graph_select.id_order(got).tolist()] == sorted(got.tolist())
        if step % 5 == 4:
            cache.clear()  # over 2 x max_nodes ints: the numbering starts over


def test_name_array_has_room_for_four_times_max_nodes_without_a_copy() -> None:
    """A walk that meets new ids does not copy the ids already held (a 1M fabric's doubling copied
    ~128 MiB inside one window): the first array has room for 4 x max_nodes ids of that width."""
    cache = GraphCache(max_nodes=1000)
    cache.index(f"{k:08d}" for k in range(600))
    first = cache.name_array()
    cache.index(f"{k:08d}" for k in range(600, 3900))
    assert cache.name_array() is first and first[:3900].astype(str).tolist() == cache.names
    assert first.dtype.kind == "S"  # ASCII ids: one byte a character
    cache.index(["a-longer-id-than-the-others"])  # wider: a new array, every id kept
    wider = cache.name_array()
    assert wider is not first and wider[: len(cache.names)].astype(str).tolist() == cache.names
    cache.index(["fakt-\u00fcber", "zz"])  # not ASCII: unicode from now on, every id kept, same order
    uni = cache.name_array()
    assert uni.dtype.kind == "U" and uni[: len(cache.names)].tolist() == cache.names
    picked = np.asarray([3, len(cache.names) - 2, 0, len(cache.names) - 1])
    got = uni[picked].tolist()
    assert [got[i] for i in graph_select.id_order(uni[picked]).tolist()] == sorted(got)


@pytest.mark.parametrize("seed", range(6))
def test_structure_bridges_added_later_are_the_typed_bridge_values(seed: int) -> None:
    """A walk holds the similarity graph's bridge values until a selection asks for the structure
    edges' extra bridges (``Walk.with_structure``); then its arrays are ``cdgr.typed_bridge_values``'s."""
    from crp_stream.core import cdgr

    rng = np.random.default_rng(seed)
    n, m = 60, int(rng.integers(2, 7))
    pairs = {(int(a), int(b)) for a, b in rng.integers(0, n, (150, 2)) if a != b}
    edges = [(a, b, round(float(rng.uniform(0.5, 1.0)), 4), int(rng.integers(0, 3))) for a, b in sorted(pairs)]
    src = np.asarray([a for a, b, _w, _k in edges] + [b for a, b, _w, _k in edges], dtype=np.int64)
    dst = np.asarray([b for a, b, _w, _k in edges] + [a for a, b, _w, _k in edges], dtype=np.int64)
    weight = np.asarray([w for *_x, w, _k in edges] * 2)
    kind = np.asarray([k for *_x, k in edges] * 2, dtype=np.int8)
    anchors = np.sort(rng.choice(n, m, replace=False)).astype(np.int64)
    local = np.setdiff1d(np.arange(n), anchors)
    sim = kind == graph_select.SIMILARITY
    values, bridged = cdgr.bridge_values_edges(local, anchors, src[sim], dst[sim], weight[sim])
    w = graph_select.Walk(
        depth=2,
        ids=[f"f{i:03d}" for i in local.tolist()],
        bridge=values,
        bridged_cols=bridged,
        anchors=[f"f{i:03d}" for i in anchors.tolist()],
        extra=np.zeros(local.shape[0], dtype=bool),
        level=np.zeros(0, dtype=np.int64),
        local=local,
        edges=(src, dst, weight, kind),
        anchor_local=anchors,
        structured=False,
    )
    want_values, want_bridged, want_extra = cdgr.typed_bridge_values(local, anchors, src, dst, weight, sim)
    assert w.with_structure() and not w.with_structure()  # once
    assert w.bridge.tolist() == want_values.tolist()
    assert np.array_equal(w.bridged_cols, want_bridged) and np.array_equal(w.extra, want_extra)
    assert want_extra.any() or sim.all()  # the structure edges made bridges of their own


def test_new_facts_are_numbered_next_in_order_of_first_appearance() -> None:
    g = LoadedEdges()
    assert g.local([]).tolist() == []
    assert g.local([5, 3, 5, 9]).tolist() == [0, 1, 0, 2]
    assert g.local([9, 7, 3, 11, 7, 10**6]).tolist() == [2, 3, 1, 4, 3, 5]  # the thread's table grows
    assert g.glob.tolist() == [5, 3, 9, 7, 11, 10**6]


def _numbered_alone(calls: list[list[int]]) -> list[list[int]]:
    g = LoadedEdges()
    return [g.local(c).tolist() for c in calls]


@pytest.mark.parametrize("seed", range(6))
def test_walks_used_in_turn_keep_their_own_numbering(seed: int) -> None:
    """Walks of one thread share its table: a walk used again after another (an earlier request's
    ``Walk`` kept for the next window, two branches) numbers as if it had been alone."""
    rng = np.random.default_rng(seed)
    plans = [[rng.integers(0, 3000, int(rng.integers(0, 40))).tolist() for _ in range(8)] for _ in range(3)]
    walks = [LoadedEdges() for _ in plans]
    got: list[list[list[int]]] = [[] for _ in plans]
    for step in range(8):
        for k in rng.permutation(len(plans)).tolist():
            got[k].append(walks[k].local(plans[k][step]).tolist())
    assert got == [_numbered_alone(p) for p in plans]


def test_walks_of_two_threads_keep_their_own_numbering() -> None:
    import threading

    rng = np.random.default_rng(7)
    plans = [[rng.integers(0, 5000, 60).tolist() for _ in range(200)] for _ in range(2)]
    got: list[list[list[int]]] = [[], []]
    start = threading.Barrier(2)

    def run(k: int) -> None:
        g = LoadedEdges()
        start.wait()
        got[k] = [g.local(c).tolist() for c in plans[k]]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [_numbered_alone(p) for p in plans]


@pytest.mark.parametrize("seed", range(6))
def test_edges_of_are_the_edge_lists_rows_and_among_keeps_those_to_its_facts(seed: int) -> None:
    """``edges_of`` against a scan of the loaded edge list, row by row; ``among`` keeps the edges whose
    other end is one of its facts (what placing connectors reads), and nothing else."""
    rng = np.random.default_rng(seed)
    n = 60
    source = SortedSource(_random_edges(rng, n, 150))
    cache = GraphCache()
    names = [f"f{i:03d}" for i in range(n)]
    cache.index(names)
    g = LoadedEdges(cache=cache)
    g.load(SimpleNamespace(repo=source), rng.choice(n, 12, replace=False).tolist())  # type: ignore[arg-type]
    wanted = [names[i] for i in rng.choice(n, 5, replace=False)] + ["never-seen"]
    among = {names[i] for i in rng.choice(n, 15, replace=False)}
    want: dict[str, dict[str, float]] = {f: {} for f in wanted}
    for s, d, w in zip(g.src.tolist(), g.dst.tolist(), g.weight.tolist(), strict=True):
        if cache.names[s] in want:
            want[cache.names[s]][cache.names[d]] = w
    for s, d, w in zip(g.src.tolist(), g.dst.tolist(), g.weight.tolist(), strict=True):
        if cache.names[d] in want:
            want[cache.names[d]][cache.names[s]] = w
    assert g.edges_of(wanted) == want
    assert any(want.values())
    kept = {f: {o: w for o, w in row.items() if o in among} for f, row in want.items()}
    assert g.edges_of(wanted, among=among) == kept
    assert kept != want
