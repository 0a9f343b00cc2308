"""Contract of the vector port: every backend goes through the same cases.

Backends: qdrant-edge on disk (the embedded default), qdrant-client local mode in memory and on disk,
and a live Qdrant server (``ops/qdrant``, CRP_TEST_QDRANT / CRP_TEST_QDRANT_GRPC) over REST and over
gRPC, each test on a collection of its own. The server cases are marked ``qdrant``: without the server
they fail, never skip.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.fabric.vectors.port import VectorIndex, VectorItem, normalise
from crp_stream.fabric.vectors.qdrant import QdrantVectorIndex
from tests.support.qdrant import drop, fresh_spec

Opener = Callable[[], VectorIndex]


def _with_ann(idx: VectorIndex) -> VectorIndex:
    idx.enable_ann(1, 1_000_000)  # every search through the in-process HNSW cache (fabric/vectors/ann.py)
    return idx


OPENERS: dict[str, Callable[[Path], Opener]] = {
    "edge": lambda d: lambda: EdgeVectorIndex(d / "edge"),
    "edge+ann": lambda d: lambda: _with_ann(EdgeVectorIndex(d / "edge")),
    "qdrant-memory": lambda d: lambda: QdrantVectorIndex(location=":memory:"),
    "qdrant-path": lambda d: lambda: QdrantVectorIndex(path=str(d / "qdrant")),
}
SERVERS = {"qdrant-server-grpc": "grpc", "qdrant-server-http": "http"}  # name -> transport
ON_SERVER = [pytest.param(name, marks=pytest.mark.qdrant) for name in sorted(SERVERS)]
DURABLE = ["edge", "qdrant-path", *ON_SERVER]
NOW = 1_700_000_000.0


class Backends:
    """This test's storage of each backend: on a server a new collection (dropped at the end), which
    every open of that backend in the test sees again."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.specs: dict[str, str] = {}

    def where(self, name: str) -> str:
        """What locates the storage: the directory, or the server spec with its collection."""
        if name in SERVERS:
            return self.specs.setdefault(name, fresh_spec(SERVERS[name], "contract"))
        return str(self.tmp_path)

    def opener(self, name: str) -> Opener:
        if name in SERVERS:
            spec = self.where(name)
            return lambda: QdrantVectorIndex(url=spec)
        return OPENERS[name](self.tmp_path)

    def drop(self) -> None:
        for spec in self.specs.values():
            drop(spec)


@pytest.fixture
def backends(tmp_path: Path) -> Iterator[Backends]:
    b = Backends(tmp_path)
    yield b
    b.drop()


@pytest.fixture(params=[*sorted(OPENERS), *ON_SERVER])
def index(request: pytest.FixtureRequest, backends: Backends) -> Iterator[VectorIndex]:
    idx = backends.opener(request.param)()
    yield idx
    idx.close()


def unit(*xs: float) -> np.ndarray:
    return normalise(np.array(xs, dtype=np.float32))


def item(fid: str, *xs: float, status: str = "active", expires_at: float | None = None) -> VectorItem:
    return VectorItem(fid, np.array(xs, dtype=np.float32), status, expires_at, "src")


def ids(hits: list[tuple[str, float]]) -> list[str]:
    return [h[0] for h in hits]


# ---- basic reads and writes ------------------------------------------------------------------------


def test_empty_index_answers_empty(index: VectorIndex) -> None:
    assert index.dim is None
    assert index.count() == 0
    assert index.search(unit(1, 0, 0), 5, NOW) == []
    assert index.neighbours(unit(1, 0, 0), 5, 0.0) == []
    assert index.get_vectors(["a"]) == {}
    index.set_status(["a"], "stale")  # nothing to update, no error
    index.upsert([])
    assert index.dim is None


def test_search_orders_by_cosine_and_scores_are_cosines(index: VectorIndex) -> None:
    index.upsert([item("far", 0, 1, 0), item("near", 1, 0.1, 0), item("mid", 1, 1, 0), item("opp", -1, 0, 0)])
    assert index.dim == 3
    hits = index.search(unit(1, 0, 0), 10, NOW)
    assert ids(hits) == ["near", "mid", "far", "opp"]
    expected = [1 / np.sqrt(1.01), 1 / np.sqrt(2), 0.0, -1.0]
    assert [h[1] for h in hits] == pytest.approx(expected, abs=1e-6)
    assert ids(index.search(unit(1, 0, 0), 2, NOW)) == ["near", "mid"]
    assert index.search(unit(1, 0, 0), 0, NOW) == []


def test_unnormalised_input_is_normalised(index: VectorIndex) -> None:
    index.upsert([item("a", 3, 4, 0)])
    hits = index.search(np.array([30.0, 40.0, 0.0]), 1, NOW)
    assert hits == [("a", 1.0)]
    np.testing.assert_allclose(index.get_vectors(["a"])["a"], [0.6, 0.8, 0.0], atol=1e-6)


def test_ties_are_broken_by_fact_id_even_beyond_the_fetch_margin(index: VectorIndex) -> None:
    names = [f"t{i:02d}" for i in range(30)]
    index.upsert([item(n, 1, 2, 3) for n in reversed(names)] + [item("best", 1, 2, 3.3)])
    hits = index.search(unit(1, 2, 3.3), 6, NOW)
    assert ids(hits) == ["best", *names[:5]]
    hits = index.search(unit(1, 2, 3), 4, NOW)
    assert ids(hits) == names[:4]  # all 30 tie at 1.0 and beat "best"


def test_upsert_is_idempotent_and_replaces(index: VectorIndex) -> None:
    batch = [item("a", 1, 0, 0), item("b", 0, 1, 0)]
    index.upsert(batch)
    first = index.search(unit(1, 1, 0), 5, NOW)
    index.upsert(batch)
    assert index.count() == 2
    assert index.search(unit(1, 1, 0), 5, NOW) == first
    index.upsert([item("a", 0, 0, 1, status="stale")])  # same fact, new vector and payload
    assert index.count() == 2
    assert index.search(unit(0, 0, 1), 1, NOW) == [("a", 1.0)]


def test_repeated_fact_in_one_batch_last_wins(index: VectorIndex) -> None:
    index.upsert([item("a", 1, 0, 0), item("a", 0, 1, 0)])
    assert index.count() == 1
    np.testing.assert_allclose(index.get_vectors(["a"])["a"], [0, 1, 0], atol=1e-6)


# ---- filters ----------------------------------------------------------------------------------------


def test_status_filter_excludes_quarantined_and_default_set(index: VectorIndex) -> None:
    statuses = ["active", "stale", "quarantined", "superseded", "expired"]
    index.upsert([item(s, 1, 0.1 * n, 0, status=s) for n, s in enumerate(statuses)])
    assert ids(index.search(unit(1, 0, 0), 10, NOW)) == ["active", "stale"]
    assert ids(index.search(unit(1, 0, 0), 10, NOW, exclude_statuses=("quarantined",))) == [
        "active",
        "stale",
        "superseded",
        "expired",
    ]
    assert len(index.search(unit(1, 0, 0), 10, NOW, exclude_statuses=())) == 5

    index.set_status(["active", "missing"], "quarantined")  # unknown ids are skipped
    assert ids(index.search(unit(1, 0, 0), 10, NOW)) == ["stale"]
    index.set_status(["active", "quarantined"], "active")
    assert ids(index.search(unit(1, 0, 0), 10, NOW)) == ["active", "stale", "quarantined"]
    assert index.count() == 5


def test_expiry_filter(index: VectorIndex) -> None:
    index.upsert(
        [
            item("never", 1, 0.0, 0),
            item("later", 1, 0.1, 0, expires_at=NOW + 1),
            item("now", 1, 0.2, 0, expires_at=NOW),
            item("past", 1, 0.3, 0, expires_at=NOW - 3600),
        ]
    )
    assert ids(index.search(unit(1, 0, 0), 10, NOW)) == ["never", "later"]
    assert ids(index.search(unit(1, 0, 0), 10, NOW - 1)) == ["never", "later", "now"]
    assert ids(index.search(unit(1, 0, 0), 10, NOW + 10)) == ["never"]
    # neighbours ignore expiry: edges are structural
    assert ids(index.neighbours(unit(1, 0, 0), 10, -1.0)) == ["never", "later", "now", "past"]


def test_status_and_expiry_combine(index: VectorIndex) -> None:
    index.upsert(
        [
            item("ok", 1, 0, 0, expires_at=NOW + 5),
            item("q", 1, 0.1, 0, status="quarantined", expires_at=NOW + 5),
            item("old", 1, 0.2, 0, expires_at=NOW - 5),
        ]
    )
    assert ids(index.search(unit(1, 0, 0), 10, NOW)) == ["ok"]


def test_neighbours_min_score_exclude_id_and_statuses(index: VectorIndex) -> None:
    index.upsert(
        [
            item("self", 1, 0, 0),
            item("close", 1, 0.2, 0, status="superseded"),
            item("also", 1, 0.5, 0, status="stale"),
            item("quar", 1, 0.1, 0, status="quarantined"),
            item("far", 0, 1, 0),
        ]
    )
    q = unit(1, 0, 0)
    hits = index.neighbours(q, 10, 0.6, exclude_id="self")
    assert ids(hits) == ["close", "also"]
    assert all(score >= 0.6 for _, score in hits)
    assert ids(index.neighbours(q, 10, 0.95)) == ["self", "close"]
    assert ids(index.neighbours(q, 1, 0.0, exclude_id="self")) == ["close"]
    assert index.neighbours(q, 10, 1.01) == []


def test_neighbours_many_equals_one_query_at_a_time(index: VectorIndex) -> None:
    rng = np.random.default_rng(11)
    base = rng.standard_normal(8).astype(np.float32)
    items = [VectorItem(f"n{i:02d}", base + 0.4 * rng.standard_normal(8).astype(np.float32)) for i in range(40)]
    items += [VectorItem(f"tie{i:02d}", base) for i in range(20)]  # 20 exact ties, more than the margin
    index.upsert(items)
    index.set_status(["n03", "tie05"], "quarantined")
    index.set_status(["n04"], "superseded")
    queries = [it.vector for it in items[:12]] + [base, base, base]
    excludes = [it.fact_id for it in items[:12]] + [None, "tie00", "tie01"]
    for k, min_score in ((5, 0.6), (12, 0.0), (1, 0.9), (25, -1.0)):
        batch = index.neighbours_many(queries, k, min_score, excludes)
        single = [index.neighbours(q, k, min_score, ex) for q, ex in zip(queries, excludes, strict=True)]
        assert batch == single
    assert ids(index.neighbours_many([base], 3, 0.5, ["tie00"])[0]) == ["tie01", "tie02", "tie03"]
    assert index.neighbours_many([base], 3, 0.5)[0] == index.neighbours(base, 3, 0.5)
    assert index.neighbours_many([], 3, 0.5) == []
    assert index.neighbours_many([base], 0, 0.5) == [[]]
    with pytest.raises(ValueError, match="exclude_ids"):
        index.neighbours_many([base, base], 3, 0.5, ["a"])


def test_neighbours_many_answers_more_queries_than_any_result_cache_holds(index: VectorIndex) -> None:
    rng = np.random.default_rng(12)
    items = [VectorItem(f"m{i:04d}", rng.standard_normal(8).astype(np.float32)) for i in range(50)]
    index.upsert(items)
    queries = rng.standard_normal((1500, 8)).astype(np.float32)  # an ingest batch's k-NN: one call
    batch = index.neighbours_many(queries, 3, -1.0)
    assert len(batch) == 1500
    for i in (0, 700, 1499):
        assert batch[i] == index.neighbours(queries[i], 3, -1.0)


def test_a_small_id_bound_changes_no_answer(index: VectorIndex) -> None:
    """``bound_ids``: a backend that remembers point -> fact ids forgets them past the bound
    and reads them again; every answer stays the same."""
    rng = np.random.default_rng(12)
    items = [VectorItem(f"b{i:03d}", rng.standard_normal(8).astype(np.float32)) for i in range(120)]
    index.upsert(items[:60])
    queries = [it.vector for it in items[:20]]
    before = index.neighbours_many(queries, 7, -1.0)
    index.bound_ids(5)
    assert index.neighbours_many(queries, 7, -1.0) == before
    index.upsert(items[60:])
    one = index.neighbours_many(queries[:1], 7, -1.0)
    held = getattr(index, "_fact_of", None)
    if held is not None:  # the embedded backend's map; qdrant-client returns payloads with every hit
        assert len(held) <= 60  # forgotten at the bound: at most the last batch and the hits (120 unbounded)
    after = index.neighbours_many(queries, 7, -1.0)
    assert after[:1] == one
    index.bound_ids(1_000_000)
    index.upsert(items[:1])  # a write: no kept result answers below
    assert index.neighbours_many(queries, 7, -1.0) == after
    with pytest.raises(ValueError, match="max_ids"):
        index.bound_ids(0)


# ---- vectors, count, delete -------------------------------------------------------------------------


def test_get_vectors_round_trip(index: VectorIndex) -> None:
    rng = np.random.default_rng(7)
    vecs = {f"f{i}": rng.standard_normal(16).astype(np.float32) for i in range(20)}
    index.upsert([VectorItem(k, v, "active", None, "s") for k, v in vecs.items()])
    got = index.get_vectors([*vecs, "unknown"])
    assert sorted(got) == sorted(vecs)
    for k, v in vecs.items():
        assert got[k].dtype == np.float32
        np.testing.assert_allclose(got[k], v / np.linalg.norm(v), atol=1e-6)


def test_count_and_delete_all(index: VectorIndex) -> None:
    index.upsert([item(f"f{i}", 1, i, 0) for i in range(12)])
    assert index.count() == 12
    index.set_status(["f1", "f2"], "quarantined")
    assert index.count() == 12  # count ignores status
    index.delete_all()
    assert index.count() == 0
    assert index.dim is None
    assert index.search(unit(1, 0, 0), 5, NOW) == []
    index.upsert([item("g", 1, 0, 0, 0, 0)])  # a rebuild may change the dimension
    assert index.dim == 5
    assert index.count() == 1
    assert index.search(unit(1, 0, 0, 0, 0), 5, NOW) == [("g", 1.0)]


# ---- validation -------------------------------------------------------------------------------------


def test_bad_vectors_and_statuses_are_rejected(index: VectorIndex) -> None:
    index.ensure(3)
    index.ensure(3)
    with pytest.raises(ValueError, match="dimension"):
        index.ensure(4)
    with pytest.raises(ValueError, match="dimension"):
        index.upsert([item("a", 1, 0)])
    with pytest.raises(ValueError, match="NaN"):
        index.upsert([item("a", 1, float("nan"), 0)])
    with pytest.raises(ValueError, match="NaN"):
        index.upsert([item("a", 1, float("inf"), 0)])
    with pytest.raises(ValueError, match="norm 0"):
        index.upsert([item("a", 0, 0, 0)])
    with pytest.raises(ValueError, match="status"):
        index.upsert([item("a", 1, 0, 0, status="bogus")])
    with pytest.raises(ValueError, match="status"):
        index.set_status(["a"], "bogus")
    with pytest.raises(ValueError, match="dimension"):
        index.search(unit(1, 0), 3, NOW)
    assert index.count() == 0  # a rejected batch writes nothing


def test_closed_index_refuses_work(index: VectorIndex) -> None:
    index.upsert([item("a", 1, 0, 0)])
    index.close()
    index.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        index.search(unit(1, 0, 0), 1, NOW)
    with pytest.raises(RuntimeError, match="closed"):
        index.upsert([item("b", 1, 0, 0)])
    with pytest.raises(RuntimeError, match="closed"):
        index.flush()


# ---- durability -------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", DURABLE)
def test_survives_reopen(backend: str, backends: Backends) -> None:
    open_index = backends.opener(backend)
    with open_index() as idx:
        idx.upsert([item("a", 1, 0, 0), item("b", 1, 1, 0, expires_at=NOW + 10), item("c", 0, 1, 0)])
        idx.set_status(["c"], "quarantined")
        idx.flush()
        before = idx.search(unit(1, 0.5, 0), 5, NOW)
    with open_index() as idx:
        assert idx.dim == 3
        assert idx.count() == 3
        assert idx.search(unit(1, 0.5, 0), 5, NOW) == before
        assert ids(before) == ["b", "a"]  # c is quarantined
        assert [s for _, s in before] == pytest.approx([0.948683, 0.894427], abs=1e-6)
        assert ids(idx.search(unit(1, 0.5, 0), 5, NOW + 10)) == ["a"]
        with pytest.raises(ValueError, match="dimension"):
            idx.upsert([item("d", 1, 0)])
        idx.upsert([item("d", 0, 0, 1)])
    with open_index() as idx:
        assert idx.count() == 4
        idx.delete_all()
    with open_index() as idx:
        assert idx.dim is None
        assert idx.count() == 0


def test_second_open_of_the_same_edge_storage_is_refused(tmp_path: Path) -> None:
    # Edge only: qdrant-client local mode refuses too, but leaks its .lock file handle doing so
    # (a ResourceWarning); a server has no such lock.
    open_index = OPENERS["edge"](tmp_path)
    with open_index() as idx:
        idx.upsert([item("a", 1, 0, 0)])
        with pytest.raises(RuntimeError):
            open_index()
        assert idx.count() == 1
    with open_index() as idx:  # the lock is released on close
        assert idx.count() == 1


_CRASH_WRITER = """
import os, sys
import numpy as np
from crp_stream.fabric.vectors.port import VectorItem
from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.fabric.vectors.qdrant import QdrantVectorIndex
backend, where = sys.argv[1], sys.argv[2]
if backend == "edge":
    idx = EdgeVectorIndex(where + "/edge")
else:  # qdrant-client's local mode on disk, or a server's collection (the spec)
    idx = QdrantVectorIndex(path=where + "/qdrant") if backend == "qdrant-path" else QdrantVectorIndex(url=where)
idx.upsert([VectorItem(f"f{i}", np.arange(1, 5, dtype=np.float32) + i) for i in range(50)])
idx.set_status(["f3"], "quarantined")
os._exit(0)  # no flush, no close: a crash right after the calls returned
"""


@pytest.mark.parametrize("backend", DURABLE)
def test_writes_survive_a_crash_without_flush(backend: str, backends: Backends) -> None:
    subprocess.run([sys.executable, "-c", _CRASH_WRITER, backend, backends.where(backend)], check=True, timeout=120)
    with backends.opener(backend)() as idx:
        assert idx.count() == 50
        hits = idx.search(unit(1, 1, 1, 1), 100, NOW)
        assert len(hits) == 49
        assert "f3" not in ids(hits)


# ---- congruence: the embedded engine and the qdrant-client adapter (local mode, server) agree -------


def _assert_congruent(a: list[tuple[str, float]], b: list[tuple[str, float]], tol: float = 1e-5) -> None:
    assert len(a) == len(b)
    np.testing.assert_allclose([s for _, s in a], [s for _, s in b], atol=tol)
    for i, ((ida, sa), (idb, _)) in enumerate(zip(a, b, strict=True)):
        if ida != idb:  # only allowed between scores that are equal within the tolerance
            partner = dict(b).get(ida)
            last = i == len(a) - 1
            assert last or (partner is not None and abs(partner - sa) <= tol), (i, ida, idb)


@pytest.mark.parametrize("other", ["qdrant-memory", *ON_SERVER])
def test_edge_and_qdrant_client_agree_on_random_operations(other: str, tmp_path: Path, backends: Backends) -> None:
    rng = np.random.default_rng(2024)
    dim, n = 24, 400
    statuses = ["active", "active", "active", "stale", "quarantined", "superseded", "expired"]
    with EdgeVectorIndex(tmp_path / "edge") as edge, backends.opener(other)() as local:
        both = (edge, local)

        def random_items(count: int) -> list[VectorItem]:
            out = []
            for _ in range(count):
                fid = f"f{int(rng.integers(0, n)):04d}"
                exp = None if rng.random() < 0.5 else NOW + float(rng.integers(-1000, 1000))
                vec = rng.standard_normal(dim).astype(np.float32)
                out.append(VectorItem(fid, vec, str(rng.choice(statuses)), exp, "s"))
            return out

        for _round in range(8):
            batch = random_items(120)
            for idx in both:
                idx.upsert(batch)
            flips = [f"f{int(i):04d}" for i in rng.integers(0, n, 25)]
            status = str(rng.choice(statuses))
            for idx in both:
                idx.set_status(flips, status)
            assert edge.count() == local.count()
            for _q in range(10):
                q = rng.standard_normal(dim).astype(np.float32)
                now = NOW + float(rng.integers(-1200, 1200))
                k = int(rng.integers(1, 60))
                _assert_congruent(edge.search(q, k, now), local.search(q, k, now))
                min_score = float(rng.uniform(-0.2, 0.5))
                exclude = f"f{int(rng.integers(0, n)):04d}"
                _assert_congruent(edge.neighbours(q, k, min_score, exclude), local.neighbours(q, k, min_score, exclude))
            qs = rng.standard_normal((20, dim)).astype(np.float32)
            exs = [f"f{int(i):04d}" for i in rng.integers(0, n, 20)]
            many = zip(edge.neighbours_many(qs, 10, 0.1, exs), local.neighbours_many(qs, 10, 0.1, exs), strict=True)
            for a, b in many:
                _assert_congruent(a, b)
        some = [f"f{i:04d}" for i in range(0, n, 7)]
        ve, vl = edge.get_vectors(some), local.get_vectors(some)
        assert sorted(ve) == sorted(vl)
        for key in ve:
            np.testing.assert_allclose(ve[key], vl[key], atol=1e-6)


def test_edge_keeps_query_results_until_a_write(tmp_path: Path) -> None:
    """The embedded shard is this process's alone: a repeated query is answered from memory until the
    next write, and whatever ``now`` is while no point has an expiry."""
    idx = EdgeVectorIndex(tmp_path / "edge")
    idx.upsert([item("a", 1, 0, 0), item("b", 1, 1, 0), item("c", 0, 1, 0)])
    calls: list[int] = []
    real = idx._live().query_batch

    def counted(batch: object) -> object:
        calls.append(1)
        return real(batch)

    idx._shard = type(
        "Spy", (), {"__getattr__": lambda s, n: getattr(real.__self__, n), "query_batch": staticmethod(counted)}
    )()
    first = idx.search(unit(1, 0.5, 0), 2, NOW)
    assert idx.search(unit(1, 0.5, 0), 2, NOW + 999) == first == [("b", 0.948683), ("a", 0.894427)]
    assert len(calls) == 1
    idx.set_status(["b"], "quarantined")
    assert ids(idx.search(unit(1, 0.5, 0), 2, NOW)) == ["a", "c"] and len(calls) == 2
    idx.upsert([item("d", 1, 0.5, 0, expires_at=NOW + 10)])
    assert ids(idx.search(unit(1, 0.5, 0), 2, NOW)) == ["d", "a"]
    assert ids(idx.search(unit(1, 0.5, 0), 2, NOW + 10)) == ["a", "c"]  # an expiry: now matters again
    assert len(calls) == 4
    idx.close()


# ---- a micro-batch's probes searched ahead (fabric/vectors/ahead.py) -----------------------------------


@pytest.mark.parametrize("expiring", [False, True], ids=["no-expiry", "expiry-between"])
def test_searched_ahead_the_answers_are_the_engines(index: VectorIndex, expiring: bool) -> None:
    from crp_stream.fabric.vectors import ahead as vector_ahead

    rng = np.random.default_rng(3)
    points = [item(f"f{i:03d}", *rng.normal(size=8)) for i in range(120)]
    points.append(item("soon", *rng.normal(size=8), expires_at=NOW + 5 if expiring else None))
    index.upsert(points)
    batch = [
        vector_ahead.Probes([rng.normal(size=8) for _ in range(3)], 10, NOW + t, None) for t in (0.0, 1.0, 9.0, 9.5)
    ]
    alone = [index.search_union(p.vectors, p.k, p.now) for p in batch]
    calls: list[int] = []
    query_many = index._query_many

    def counted(queries: np.ndarray, *a: object) -> list[list[tuple[str, float]]]:
        calls.append(len(queries))
        return query_many(queries, *a)  # type: ignore[arg-type]

    index._query_many = counted  # type: ignore[method-assign]
    vector_ahead.search_ahead(index, batch, ("quarantined", "expired", "superseded"))
    ahead = len(calls)
    assert [index.search_union(p.vectors, p.k, p.now) for p in batch] == alone
    assert len(calls) == ahead  # every request answered from what was searched ahead
    vector_ahead.forget(index)
    assert index.ahead is None
