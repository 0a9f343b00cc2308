"""The in-process ANN cache (fabric/vectors/ann.py) behind the vector port: same answers as exact search where
it can give them, the filters respected, and exact search when it cannot."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from crp_stream.fabric.vectors import ann as ann_module
from crp_stream.fabric.vectors.ann import AnnCache
from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.fabric.vectors.port import VectorItem

NOW = 1_900_000_000.0


def clustered(n: int, dim: int = 32, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, dim))
    v = centres[rng.integers(0, 20, n)] + 0.8 * rng.normal(size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def index(tmp_path: Path) -> EdgeVectorIndex:
    idx = EdgeVectorIndex(tmp_path / "edge")
    vecs = clustered(3000)
    idx.upsert([VectorItem(f"f{i:05d}", v, "active", NOW + 100 if i % 10 == 0 else None) for i, v in enumerate(vecs)])
    return idx


def test_ann_top_k_matches_exact_search(index: EdgeVectorIndex) -> None:
    queries = clustered(100, seed=9)
    exact = [[f for f, _ in index.search(q, 20, NOW)] for q in queries]
    index.enable_ann(1000, 10_000)
    assert index.ann() is not None
    got = [[f for f, _ in index.search(q, 20, NOW)] for q in queries]
    recall = np.mean([len(set(a) & set(b)) / 20 for a, b in zip(exact, got, strict=True)])
    assert recall >= 0.98
    # the scores are exact cosines of the stored vectors: a shared hit ranks the same
    q = queries[0]
    assert dict(index.search(q, 5, NOW)).keys() <= {f for f, _ in index.search(q, 20, NOW)}


def test_ann_respects_status_and_expiry_and_follows_writes(index: EdgeVectorIndex) -> None:
    index.enable_ann(1000, 10_000)
    q = clustered(1, seed=11)[0]
    top = [f for f, _ in index.search(q, 10, NOW)]
    index.set_status(top[:3], "quarantined")
    after = [f for f, _ in index.search(q, 10, NOW)]
    assert not set(top[:3]) & set(after)
    # facts that expire at NOW + 100 vanish after it
    later = [f for f, _ in index.search(q, 50, NOW + 101)]
    assert all(int(f[1:]) % 10 != 0 for f in later)
    # a new point written through the port is found at once
    index.upsert([VectorItem("new", q, "active")])
    assert index.search(q, 1, NOW)[0][0] == "new"


def test_ann_gives_way_to_exact_search_when_the_filter_leaves_too_few(index: EdgeVectorIndex) -> None:
    index.enable_ann(1000, 10_000)
    ann = index.ann()
    assert ann is not None
    index.set_status([f"f{i:05d}" for i in range(2500)], "superseded")
    q = clustered(1, seed=12)[0]
    assert ann.search(q[None, :], 10, ("superseded",), None, None) is None  # 17% alive: not trusted
    hits = index.search(q, 10, NOW)  # served exactly instead
    assert len(hits) == 10 and all(int(f[1:]) >= 2500 for f, _ in hits)


def test_ann_is_off_below_its_threshold_and_above_its_cap(index: EdgeVectorIndex) -> None:
    index.enable_ann(5000, 10_000)
    assert index.ann() is None
    index.enable_ann(100, 1000)
    assert index.ann() is None


def test_ann_cache_replaces_a_rewritten_point() -> None:
    ann = AnnCache(4)
    ann.add(["a", "b"], np.eye(2, 4, dtype=np.float32), ["active", "active"], [None, None])
    ann.add(["a"], np.array([[0, 0, 1, 0]], dtype=np.float32), ["active"], [None])
    found = ann.search(np.array([[0, 0, 1, 0]], dtype=np.float32), 1, (), None, None)
    assert found is not None and found[0][0][0] == "a" and found[0][0][1] == pytest.approx(1.0)
    assert len(ann) == 2


def test_stored_vectors_from_the_ann_cache_are_the_index_floats(index: EdgeVectorIndex) -> None:
    """Candidates' vectors come from the cache's flat storage: bit for bit what the index returns,
    for points built from the index and for points written after (the envelope must not change)."""
    index.enable_ann(1000, 10_000)
    assert index.ann() is not None
    extra = clustered(50, seed=11) * 3.0  # not unit length: normalised on the way in, as every write
    index.upsert([VectorItem(f"g{i:03d}", v, "active", None) for i, v in enumerate(extra)])
    wanted = ["f00007", "g003", "missing", "f02999", "g049", "f00000"]
    got = index.stored_vectors(wanted)
    exact = index.get_vectors(wanted)
    assert sorted(got) == sorted(exact) == sorted(f for f in wanted if f != "missing")
    for f in exact:
        assert got[f].dtype == np.float32
        assert np.array_equal(got[f], exact[f]), f


def test_alive_fraction_kept_with_the_writes_equals_a_full_pass() -> None:
    """The filter's share of passing points is kept per status code (no pass over every point per
    search); it must equal the full pass exactly, since it sizes the over-fetch (and so the hits)."""
    import math

    rng = np.random.default_rng(5)
    ann = AnnCache(8, capacity=4)
    statuses = ["active", "stale", "quarantined", "superseded", "expired"]
    ids = [f"f{i}" for i in range(300)]

    def full(excluded: tuple[str, ...], alive_at: float | None) -> float:
        n = len(ann._fact)
        codes = [*(["active", "stale", "quarantined", "superseded", "expired"].index(s) for s in excluded), 255]
        ok = ~np.isin(ann._status[:n], codes)
        if alive_at is not None:
            ok &= ann._expires[:n] > alive_at
        return float(ok.sum()) / n

    for _round in range(40):
        batch = list(rng.choice(ids, size=int(rng.integers(1, 20)), replace=False))
        expires = [None if rng.random() < 0.7 else float(rng.integers(0, 100)) for _ in batch]
        ann.add(batch, clustered(len(batch), dim=8, seed=_round), list(rng.choice(statuses, len(batch))), expires)
        changed = list(rng.choice(ids, size=10, replace=False))
        ann.set_status([*changed, changed[0]], str(rng.choice(statuses)))
        for excluded in [(), ("quarantined",), ("quarantined", "expired", "superseded")]:
            for alive_at in [None, 0.0, 50.0, 99.5, math.inf]:
                assert ann.alive_fraction(excluded, alive_at) == full(excluded, alive_at)


def test_reconcile_puts_the_ann_cache_back_in_place(tmp_path: Path) -> None:
    """Undone writes of an uncommitted batch leave the cache it built (no HNSW rebuild) and hide the
    points whose facts never committed, exactly as the backend does."""
    from crp_stream.config import Settings
    from crp_stream.runtime.embedded import open_fabric
    from crp_stream.runtime.vector_guard import reconcile
    from tests.contract.test_repository import fact

    settings = Settings(data_dir=tmp_path, embedder="precomputed:m-32", ann_min_points=1000)
    fabric = open_fabric(settings)
    try:
        vecs = clustered(1500)
        ids = [f"f{i:05d}" for i in range(1500)]
        with fabric.unit_of_work() as uow:
            uow.repo.insert_facts([fact(f, position=i) for i, f in enumerate(ids[:1200])])
        fabric.vectors.upsert([VectorItem(f, v, "active", None) for f, v in zip(ids, vecs, strict=True)])
        built = fabric.vectors.ann()
        assert built is not None and len(built) == 1500
        q = vecs[1300]  # an uncommitted point: found before the reconcile, hidden after it
        assert fabric.vectors.search(q, 1, NOW)[0][0] == ids[1300]
        assert reconcile(fabric, fabric.vectors.journal) == 1500
        assert fabric.vectors.ann() is built
        hits = [f for f, _ in fabric.vectors.search(q, 50, NOW)]
        assert hits and not set(hits) & set(ids[1200:])
        assert fabric.vectors.search(vecs[7], 1, NOW)[0][0] == ids[7]
    finally:
        fabric.close()


def _twin(vecs: np.ndarray, expires: list[float | None]) -> AnnCache:
    ann = AnnCache(vecs.shape[1])
    ann.add([f"f{i:05d}" for i in range(len(vecs))], vecs, ["active"] * len(vecs), expires)
    return ann


@pytest.mark.parametrize("expiring", [False, True])
def test_kept_results_are_what_a_fresh_search_finds(expiring: bool) -> None:
    vecs = clustered(2000, seed=5)
    expires: list[float | None] = [NOW + 100 if expiring and i % 7 == 0 else None for i in range(len(vecs))]
    kept, fresh = _twin(vecs, expires), _twin(vecs, expires)
    queries = clustered(12, seed=6)
    excluded = ("quarantined",)
    first = kept.search(queries[:8], 60, excluded, NOW, None)
    assert first is not None and len(kept.kept) == 8
    # a batch of kept and new queries, another time: as a cache without kept results answers it
    for at in (NOW, NOW + 101):
        assert kept.search(queries[4:], 60, excluded, at, None) == fresh.search(queries[4:], 60, excluded, at, None)
        fresh.kept.clear()
    # a write drops them: statuses changed on one, not yet on the other, then on both
    gone = [f for f, _ in first[0][:5]]
    kept.set_status(gone, "quarantined")
    assert not kept.kept
    again = kept.search(queries[:1], 60, excluded, NOW, None)
    assert again is not None and not {f for f, _ in again[0]} & set(gone)
    fresh.set_status(gone, "quarantined")
    assert again == fresh.search(queries[:1], 60, excluded, NOW, None)
    kept.add(["new"], queries[:1], ["active"], [None])
    assert not kept.kept


def test_one_call_of_more_queries_than_it_keeps_answers_every_one() -> None:
    """A batch k-NN of several documents asks more queries at once than the cache keeps results of:
    its own first results are dropped only after the call has answered with them."""
    vecs = clustered(1200, seed=6)
    ann = _twin(vecs, [None] * len(vecs))
    many = ann.search(vecs[:400], 5, ("quarantined",), NOW, None)
    assert many is not None and len(many) == 400
    assert [row[0][0] for row in many] == [f"f{i:05d}" for i in range(400)]
    assert many == [ann.search(v[None, :], 5, ("quarantined",), NOW, None)[0] for v in vecs[:400]]  # type: ignore[index]


def test_the_stored_view_is_read_once_and_follows_every_add() -> None:
    """``stored`` keeps its view between adds (the same array object), and an add, in the caller's
    thread or in the background, gives the next read every point, moved storage or not."""
    vecs = clustered(700, seed=5)
    ann = AnnCache(32)
    ann.add(["a0"], vecs[:1], ["active"], [None])
    first = ann.stored()
    assert ann.stored() is first and np.array_equal(first, vecs[:1])
    ann.add([f"a{i}" for i in range(1, 600)], vecs[1:600], ["active"] * 599, [None] * 599)  # in the background
    assert ann._adding is not None
    view = ann.stored()
    assert ann._adding is None and view is not first and np.array_equal(view, vecs[:600])
    ann.add(["a0"], vecs[600:601], ["active"], [None])  # a rewrite takes a new slot
    assert np.array_equal(ann.stored(), np.concatenate([vecs[:600], vecs[600:601]]))


def test_a_large_add_runs_in_the_background_and_the_next_read_waits_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    vecs = clustered(600, seed=4)

    def build() -> AnnCache:
        ann = AnnCache(32)
        ann.add([f"a{i:04d}" for i in range(300)], vecs[:300], ["active"] * 300, [None] * 300)
        ann.add([f"a{i:04d}" for i in range(300, 600)], vecs[300:], ["active"] * 300, [None] * 300)
        return ann

    one = build()
    assert one._adding is not None  # the second add is still the graph's to take
    hits = one.search(vecs[450:451], 5, ("quarantined",), None, None)
    assert one._adding is None and one.index.ntotal == 600
    assert hits is not None and hits[0][0][0] == "a0450"
    # the same graph, byte for byte, as the same adds made in the caller's thread
    monkeypatch.setattr(ann_module, "_BACKGROUND_ADD", 10**9)
    two = build()
    assert two._adding is None
    assert bytes(faiss.serialize_index(one.index)) == bytes(faiss.serialize_index(two.index))


def test_an_error_of_a_background_add_reaches_the_next_reader() -> None:
    ann = AnnCache(32)

    class Broken:
        def add(self, _points: np.ndarray) -> None:
            raise MemoryError("no room for the graph")

    ann._add_in_background(Broken(), clustered(2))  # type: ignore[arg-type]
    with pytest.raises(MemoryError, match="no room"):
        ann.settle()
    ann.settle()  # reported once


def test_a_batch_on_every_core_leaves_the_threads_own_openmp_count() -> None:
    """A search of 32 queries or more runs on every core, then the calling thread is back at its own
    count (one by default, the environment's where it sets one), not at a count of the cache's."""
    vecs = clustered(200, seed=9)
    ann = AnnCache(32)
    ann.add([f"f{i}" for i in range(200)], vecs, ["active"] * 200, [None] * 200, threads=2)
    before = faiss.omp_get_max_threads()
    try:
        faiss.omp_set_num_threads(3)
        ann.search(vecs[:40], 5, [], None, None)
        assert faiss.omp_get_max_threads() == 3
    finally:
        faiss.omp_set_num_threads(before)
