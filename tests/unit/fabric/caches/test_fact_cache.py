"""FactCache: fixed columns and vectors from memory, status and existence from the store
(fabric/caches/fact_cache.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from crp_stream.config import Settings
from crp_stream.fabric.caches.fact_cache import FactCache, least_recent
from crp_stream.fabric.sql import db
from crp_stream.fabric.sql.repository import Repository


def fact(fid: str, **kw: Any) -> dict[str, Any]:
    row = {
        "fact_id": fid,
        "source": "s",
        "source_type": "official",
        "trust": 0.9,
        "importance": 1.0,
        "epoch_us": 1,
        "modified_at_us": 2,
        "ttl_s": None,
        "expires_at_us": None,
        "text": f"text {fid}",
        "subject": None,
        "attribute": None,
        "value": None,
        "unit": None,
        "claim_key": None,
        "status": "active",
        "content_hash": "h",
        "document_id": "d",
        "position": 0,
        "origin_event_id": "e",
        "kind": "document",
        "extra": None,
    }
    row.update(kw)
    return row


class Vectors:
    def __init__(self, vecs: dict[str, list[float]]):
        self.vecs = {k: np.asarray(v, dtype=np.float32) for k, v in vecs.items()}
        self.calls: list[list[str]] = []

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        self.calls.append(list(ids))
        return {i: self.vecs[i] for i in ids if i in self.vecs}

    stored_vectors = get_vectors  # the port's read through its ANN cache; the same answer

    ann_now = None  # no ANN cache: the fact cache keeps every vector itself


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    eng = db.make_engine(f"sqlite:///{tmp_path / 'fabric.sqlite'}")
    db.upgrade(eng)
    with eng.begin() as conn:
        Repository(conn).insert_facts([fact("a"), fact("b"), fact("c", status="stale"), fact("d")])
    yield eng
    eng.dispose()


VECS = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [0.6, 0.8]}  # d has no vector


def test_rows_and_vectors_in_the_given_order_only_for_facts_with_both(engine: Engine) -> None:
    cache, vectors = FactCache(), Vectors(VECS)
    with engine.begin() as conn:
        ids, rows, vecs = cache.candidates(Repository(conn), vectors, ["c", "zz", "a", "d"])
    assert ids == ["c", "a"]
    assert [r["status"] for r in rows] == ["stale", "active"]
    assert rows[0]["text"] == "text c" and rows[0]["modified_at_us"] == 2
    assert vecs.dtype == np.float32 and vecs.tolist() == [[0.6000000238418579, 0.800000011920929], [1.0, 0.0]]


def test_second_read_takes_columns_and_vectors_from_memory_and_status_from_the_store(engine: Engine) -> None:
    cache, vectors = FactCache(), Vectors(VECS)
    with engine.begin() as conn:
        cache.candidates(Repository(conn), vectors, ["a", "b"])
        Repository(conn).set_fact_status(["a"], "quarantined")
    with engine.begin() as conn:
        ids, rows, _ = cache.candidates(Repository(conn), vectors, ["a", "b", "c"])
    assert vectors.calls == [["a", "b"], ["c"]]  # only the miss was fetched
    assert ids == ["a", "b", "c"] and rows[0]["status"] == "quarantined"
    assert cache.hits == 2 and cache.misses == 3


def test_read_ahead_reads_only_the_misses_and_builds_nothing_when_every_fact_is_held(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, vectors = FactCache(), Vectors(VECS)
    with engine.begin() as conn:
        repo = Repository(conn)
        cache.read_ahead(repo, vectors, ["a", "b"])
        assert vectors.calls == [["a", "b"]] and "a" in cache and "b" in cache
        built: list[list[str]] = []
        read = cache._read
        monkeypatch.setattr(cache, "_read", lambda ids, *a: built.append(ids) or read(ids, *a))
        cache.read_ahead(repo, vectors, ["b", "a"])  # held: no read, no batch
        assert built == [] and vectors.calls == [["a", "b"]]
        cache.read_ahead(repo, vectors, ["a", "c"])  # one miss: read, as ``columns`` reads it
        assert vectors.calls == [["a", "b"], ["c"]] and "c" in cache
        ids, rows, _ = cache.candidates(repo, vectors, ["c", "a"])
    assert ids == ["c", "a"] and rows[0]["status"] == "stale"


def test_bounded_oldest_first(engine: Engine) -> None:
    cache, vectors = FactCache(max_facts=2), Vectors(VECS)
    with engine.begin() as conn:
        repo = Repository(conn)
        cache.candidates(repo, vectors, ["a", "b"])
        ids, _, vecs = cache.candidates(repo, vectors, ["c", "a"])
    assert ids == ["c", "a"] and vecs[1].tolist() == [1.0, 0.0]
    assert len(cache) == 2 and "b" not in cache
    with pytest.raises(ValueError):
        FactCache(max_facts=0)


def test_aging_peeks_at_the_held_facts_recency_inputs_without_touching_the_lru(engine: Engine) -> None:
    with engine.begin() as conn:
        Repository(conn).insert_facts([fact("e", modified_at_us=7, ttl_s=3600)])
    cache, vectors = FactCache(max_facts=2), Vectors({**VECS, "e": [0.0, 1.0]})
    with engine.begin() as conn:
        repo = Repository(conn)
        cache.candidates(repo, vectors, ["a", "e"])
        places, modified_at_us, ttl_s = cache.aging(["zz", "e", "b", "a"])
        assert places.tolist() == [1, 3]
        assert modified_at_us.tolist() == [7.0, 2.0] and ttl_s.tolist() == [3600.0, float("inf")]
        cache.candidates(repo, vectors, ["b"])  # evicts the least recently used: a, read before e
    assert "a" not in cache and "e" in cache
    assert [len(x) for x in cache.aging(["zz"])] == [0, 0, 0]


def test_a_transaction_that_does_not_commit_empties_the_fabrics_cache(tmp_path: Path) -> None:
    from crp_stream.config import Settings
    from crp_stream.fabric.fabric import Fabric

    fabric = Fabric(Settings(data_dir=tmp_path, embedder="hashing"))
    vectors = Vectors({"x": [1.0, 0.0]})
    with pytest.raises(RuntimeError), fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("x")])
        assert fabric.facts.candidates(uow.repo, vectors, ["x"])[0] == ["x"]
        raise RuntimeError("rolled back")
    assert len(fabric.facts) == 0
    with fabric.unit_of_work() as uow:
        assert fabric.facts.candidates(uow.repo, vectors, ["x"])[0] == []
    fabric.close()


class CountingRepo(Repository):
    def __init__(self, conn: Any, asked: list[list[str]]):
        super().__init__(conn)
        self.asked = asked

    def fact_statuses(self, fact_ids: Sequence[str]) -> dict[str, str]:
        self.asked.append(sorted(fact_ids))
        return super().fact_statuses(fact_ids)

    def fact_rows(self, fact_ids: Sequence[str], fields: Sequence[str]) -> dict[str, Any]:
        if "status" in fields:  # statuses of facts not cached come with their rows
            self.asked.append(sorted(fact_ids))
        return super().fact_rows(fact_ids, fields)


def test_statuses_are_kept_until_facts_generation_moves(engine: Engine) -> None:
    cache, vectors, asked = FactCache(), Vectors(VECS), []
    with engine.begin() as conn:
        repo = CountingRepo(conn, asked)
        cache.candidates(repo, vectors, ["a", "b", "zz"])
        cache.candidates(repo, vectors, ["a", "b", "zz"])
        assert asked == [["a", "b", "zz"], ["zz"]]  # zz does not exist: asked again, never assumed
        gen = repo.set_fact_status(["a"], "stale")  # this process: only a is read again
        assert gen is not None
        cache.written(gen - 1, gen, ["a"])
        _, rows, _ = cache.candidates(repo, vectors, ["a", "b"])
        assert asked[-1] == ["a"] and [r["status"] for r in rows] == ["stale", "active"]
    with engine.begin() as conn:  # another process changes b: the counter moved, everything is read again
        Repository(conn).set_fact_status(["b"], "quarantined")
    with engine.begin() as conn:
        _, rows, _ = cache.candidates(CountingRepo(conn, asked), vectors, ["a", "b"])
        assert asked[-1] == ["a", "b"] and [r["status"] for r in rows] == ["stale", "quarantined"]


def test_a_status_write_rolled_back_to_a_savepoint_is_not_believed(engine: Engine) -> None:
    cache, vectors = FactCache(), Vectors(VECS)
    with engine.begin() as conn:
        repo = Repository(conn)
        cache.candidates(repo, vectors, ["a"])
        savepoint = conn.begin_nested()
        gen = repo.set_fact_status(["a"], "quarantined")
        assert gen is not None
        cache.written(gen - 1, gen, ["a"])
        assert cache.candidates(repo, vectors, ["a"])[1][0]["status"] == "quarantined"
        savepoint.rollback()  # the handler was rejected: status and counter back
        assert cache.candidates(repo, vectors, ["a"])[1][0]["status"] == "active"


def test_the_fabric_bounds_its_caches_by_the_settings(tmp_path: Path) -> None:
    from crp_stream.runtime.embedded import open_fabric

    fabric = open_fabric(Settings(data_dir=tmp_path, embedder="hashing", cache_facts=123, cache_graph_nodes=456))
    try:
        assert (fabric.facts.max_facts, fabric.graph.max_nodes) == (123, 456)
    finally:
        fabric.close()


def test_preload_reads_rows_and_statuses_once_so_requests_read_none(engine: Engine) -> None:
    cache, vectors, asked = FactCache(max_facts=3), Vectors(VECS), []
    with engine.begin() as conn:
        repo = CountingRepo(conn, asked)
        assert cache.preload(repo, vectors, ["a", "b", "c", "d"], batch=2) == 3  # d has no vector; bound 3
        assert asked == [["a", "b"], ["c"]] and cache.hits == cache.misses == 0
        ids, rows, _ = cache.candidates(repo, vectors, ["c", "a", "b"])
    assert ids == ["c", "a", "b"] and rows[0]["status"] == "stale"
    assert asked == [["a", "b"], ["c"]] and cache.hits == 3 and cache.misses == 0  # no read for the request


@settings(max_examples=300, deadline=None)
@given(
    used=st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=60),
    n=st.integers(min_value=1, max_value=70),
    free=st.sets(st.integers(min_value=0, max_value=59)),
)
def test_least_recent_is_the_stable_sorts_prefix(used: list[int], n: int, free: set[int]) -> None:
    """Eviction picks exactly what ``argsort(kind="stable")[:n]`` picks (ties in slot order), free slots last."""
    arr = np.array(used, dtype=np.int64)
    arr[[f for f in free if f < arr.shape[0]]] = np.iinfo(np.int64).max
    expect = np.argsort(arr, kind="stable")[:n]
    assert least_recent(arr, n).tolist() == expect.tolist()


def test_a_full_cache_evicts_the_least_recently_used_and_reuses_their_slots(engine: Engine) -> None:
    names = [f"f{i}" for i in range(6)]
    cache, vectors = FactCache(max_facts=3), Vectors({f: [1.0, float(i)] for i, f in enumerate(names)})
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.insert_facts([fact(f) for f in names])
        cache.candidates(repo, vectors, ["f0", "f1", "f2"])
        cache.candidates(repo, vectors, ["f0"])  # f1 and f2 are now the oldest, f1 first in slot order
        cache.candidates(repo, vectors, ["f3"])
        assert "f1" not in cache and all(f in cache for f in ("f0", "f2", "f3"))
        ids, _, vecs = cache.candidates(repo, vectors, ["f4", "f5"])  # f2, then f0 (both older than f3)
    assert ids == ["f4", "f5"] and vecs[:, 1].tolist() == [4.0, 5.0]
    assert sorted(f for f in names if f in cache) == ["f3", "f4", "f5"]
    assert sorted(cache._slot.values()) == [0, 1, 2]  # freed slots were reused: the arrays did not grow


def test_with_an_ann_cache_vectors_are_read_from_its_storage_not_kept_twice(engine: Engine, tmp_path: Path) -> None:
    from crp_stream.fabric.vectors.edge import EdgeVectorIndex
    from crp_stream.fabric.vectors.port import VectorItem

    index = EdgeVectorIndex(tmp_path / "edge")
    index.upsert([VectorItem(f, np.asarray(v, dtype=np.float32), "active") for f, v in VECS.items()])
    index.enable_ann(1, 100)
    assert index.ann() is not None
    cache = FactCache()
    with engine.connect() as conn:
        repo = Repository(conn)
        first = cache.candidates(repo, index, ["c", "zz", "a", "d"])
        again = cache.candidates(repo, index, ["a", "b", "c"])  # a and c held, b a miss
        third = cache.candidates(repo, index, ["b", "a"])  # all held: the fast path
    assert first[0] == ["c", "a"] and again[0] == ["a", "b", "c"] and third[0] == ["b", "a"]
    for ids, _rows, vecs in (first, again, third):
        np.testing.assert_array_equal(vecs, np.stack([index.get_vectors([f])[f] for f in ids]))
    assert cache._owned == 0 and (cache._aslot >= 0).all()  # no vector kept by the fact cache itself
    assert not cache._mat.any()  # its matrix was never written: no page of it is resident


def test_when_the_ann_cache_goes_the_facts_are_read_again_from_the_index(engine: Engine, tmp_path: Path) -> None:
    from crp_stream.fabric.vectors.edge import EdgeVectorIndex
    from crp_stream.fabric.vectors.port import VectorItem

    index = EdgeVectorIndex(tmp_path / "edge")
    index.upsert([VectorItem(f, np.asarray(v, dtype=np.float32), "active") for f, v in VECS.items()])
    index.enable_ann(1, 100)
    cache = FactCache()
    with engine.connect() as conn:
        repo = Repository(conn)
        cache.candidates(repo, index, ["a", "b"])
        index.enable_ann(1000, 10_000)  # the ANN cache goes (too few points now): the index serves
        index._ann_reset()
        ids, _rows, vecs = cache.candidates(repo, index, ["b", "a"])
    assert ids == ["b", "a"]
    np.testing.assert_array_equal(vecs, np.asarray([VECS["b"], VECS["a"]], dtype=np.float32))


def test_facts_cached_before_the_ann_cache_keep_their_own_vectors_beside_its_rows(
    engine: Engine, tmp_path: Path
) -> None:
    from crp_stream.fabric.vectors.edge import EdgeVectorIndex
    from crp_stream.fabric.vectors.port import VectorItem

    index = EdgeVectorIndex(tmp_path / "edge")
    index.upsert([VectorItem(f, np.asarray(v, dtype=np.float32), "active") for f, v in VECS.items()])
    cache = FactCache()
    with engine.connect() as conn:
        repo = Repository(conn)
        cache.candidates(repo, index, ["a"])  # no ANN cache yet: the vector is kept here
        index.enable_ann(1, 100)
        assert index.ann() is not None
        ids, _rows, vecs = cache.candidates(repo, index, ["b", "a", "c"])  # b, c: slots in its storage
    assert ids == ["b", "a", "c"] and cache._owned == 1
    np.testing.assert_array_equal(vecs, np.asarray([VECS["b"], VECS["a"], VECS["c"]], dtype=np.float32))


@pytest.mark.parametrize("seed", range(6))
def test_every_read_is_the_stores_whatever_the_cache_held_or_evicted(tmp_path: Path, seed: int) -> None:
    """Random requests (repeats, unknown ids, facts without a vector, more facts than the cache holds)
    against a small cache: each batch is what the store holds, field by field, in the request's order."""
    from crp_stream.fabric.caches.fact_cache import HEAD_FIELDS

    rng = np.random.default_rng(seed)
    eng = db.make_engine(f"sqlite:///{tmp_path / 'f.sqlite'}")
    db.upgrade(eng)
    names = [f"f{i:02d}" for i in range(40)]
    rows = {
        f: fact(
            f,
            importance=float(rng.uniform()),
            modified_at_us=int(rng.integers(1, 10**6)),
            ttl_s=None if i % 3 else 3600.0,
        )
        for i, f in enumerate(names)
    }
    vecs = {f: rng.normal(size=4).tolist() for f in names if f != "f07"}  # f07 has no vector
    with eng.begin() as conn:
        Repository(conn).insert_facts(list(rows.values()))
        Repository(conn).set_fact_status(["f03", "f11"], "stale")
    cache, vectors = FactCache(max_facts=int(rng.integers(3, 12))), Vectors(vecs)
    for _ in range(25):
        ask = [str(x) for x in rng.choice([*names, "zz"], int(rng.integers(1, 20)))]
        with eng.begin() as conn:
            b = cache.columns(Repository(conn), vectors, ask)
        want = [f for f in ask if f in rows and f in vecs]
        assert b.ids == want
        assert b.status == ["stale" if f in ("f03", "f11") else "active" for f in want]
        assert [r["text"] for r in b.rows] == [rows[f]["text"] for f in want]
        assert b.heads == [tuple(rows[f][k] for k in HEAD_FIELDS) for f in want]
        assert b.vecs.tolist() == [np.asarray(vecs[f], dtype=np.float32).tolist() for f in want]
        assert b.cols.importance.tolist() == [rows[f]["importance"] for f in want]
        assert b.cols.modified_at_us.tolist() == [float(rows[f]["modified_at_us"]) for f in want]
        assert b.cols.ttl_s.tolist() == [float("inf") if rows[f]["ttl_s"] is None else 3600.0 for f in want]
        assert len(cache) <= cache.max_facts
    eng.dispose()
