"""ClaimIndex: the arbiter's claims in memory, never ahead of the store (fabric/caches/claim_index.py)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crp_stream.config import Settings
from crp_stream.fabric.fabric import Fabric
from crp_stream.fabric.sql.repository import Repository
from crp_stream.fabric.sql.rows import ClaimRow, FactRow
from tests.contract.test_repository import fact as repository_fact


class NoVectors:
    dim = None

    def enable_ann(self, min_points: int, max_points: int, snapshot: Path | None = None) -> None:
        pass

    def bound_ids(self, max_ids: int) -> None:
        pass

    def save_ann(self) -> None:
        pass

    def close(self) -> None:
        pass


def fact(fid: str, key: str | None = "api|limit", epoch: int = 1, **kw: Any) -> dict[str, Any]:
    # trust and importance as ints: the index must keep what the store reads back (floats)
    return repository_fact(
        fid,
        trust=1,
        importance=1,
        epoch_us=epoch,
        modified_at_us=epoch,
        subject="api" if key else None,
        attribute="limit" if key else None,
        value="10",
        claim_key=key,
        **kw,
    )


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[Fabric]:
    f = Fabric(Settings(data_dir=tmp_path, embedder="hashing", cache_claim_facts=100), vectors=NoVectors())  # type: ignore[arg-type]
    yield f
    f.close()


def stored(fabric: Fabric, key: str) -> tuple[ClaimRow | None, list[FactRow]]:
    with fabric.engine.connect() as conn:
        repo = Repository(conn)
        return repo.get_claim(key), repo.facts_for_claim(key)


def assert_never_ahead(fabric: Fabric, *keys: str) -> None:
    """Every key the index holds is exactly what the store holds."""
    for key in keys:
        held = fabric.claims.held(key)
        if held is not None:
            claim, rows = stored(fabric, key)
            assert held == (claim, rows), key
    # the fact -> key map is exactly the held entries' members (a commit maps only what it added)
    index = fabric.claims
    assert index._claim_of == {r["fact_id"]: k for k, e in index._entries.items() for r in e.rows}


def test_it_is_rebuilt_at_start_and_follows_this_process_s_writes(fabric: Fabric) -> None:
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("a", epoch=5), fact("b", epoch=3), fact("x", key="other|k")])
    fabric.claims.clear()
    with fabric.unit_of_work() as uow:
        assert fabric.claims.preload(uow.repo) == 3
    assert [r["fact_id"] for r in (fabric.claims.held("api|limit") or (None, []))[1]] == ["b", "a"]
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("c", epoch=4)])
        uow.repo.set_fact_status(["a"], "stale")
        uow.repo.put_claim("api|limit", "CONSENSUS_OK", "f1", {"n": 1.5}, 7)
        claim, rows, _ = fabric.claims.claim(uow.repo, "api|limit")
        assert claim is not None and claim["details"] == {"n": 1.5}
        assert [(r["fact_id"], r["status"]) for r in rows] == [("b", "active"), ("c", "active"), ("a", "stale")]
    loads = fabric.claims.loads
    with fabric.unit_of_work() as uow:
        fabric.claims.claim(uow.repo, "api|limit")
    assert fabric.claims.loads == loads  # from memory: nothing read
    assert_never_ahead(fabric, "api|limit", "other|k")


def test_a_rolled_back_unit_of_work_leaves_nothing_behind(fabric: Fabric) -> None:
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("a")])
        fabric.claims.claim(uow.repo, "api|limit")
    with pytest.raises(RuntimeError), fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("b", epoch=2)])
        uow.repo.set_fact_status(["a"], "quarantined")
        uow.repo.put_claim("api|limit", "POISONING_CANDIDATE", "f", {}, 9)
        assert len(fabric.claims.claim(uow.repo, "api|limit")[1]) == 2
        raise RuntimeError("the batch failed")
    assert_never_ahead(fabric, "api|limit")
    with fabric.unit_of_work() as uow:
        claim, rows, _ = fabric.claims.claim(uow.repo, "api|limit")
    assert claim is None and [(r["fact_id"], r["status"]) for r in rows] == [("a", "active")]


def test_a_rolled_back_savepoint_forgets_what_it_wrote(fabric: Fabric) -> None:
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("a")])
        uow.repo.put_claim("api|limit", "CONSENSUS_OK", "f1", {}, 1)
    with fabric.unit_of_work() as uow:
        fabric.claims.claim(uow.repo, "api|limit")
        with pytest.raises(ValueError), uow.repo.savepoint():  # a rejected record
            uow.repo.insert_facts([fact("b", epoch=2)])
            uow.repo.put_claim("api|limit", "DRIFT_UNDETERMINED", "f2", {}, 2)
            raise ValueError("rejected")
        claim, rows, _ = fabric.claims.claim(uow.repo, "api|limit")
        assert claim is not None and claim["fingerprint"] == "f1"
        assert [r["fact_id"] for r in rows] == ["a"]
        uow.repo.insert_facts([fact("c", epoch=3)])  # the batch goes on and moves the counter again
    assert_never_ahead(fabric, "api|limit")
    with fabric.engine.connect() as conn:
        assert Repository(conn).get_meta("claims_generation") == "2"
    loads = fabric.claims.loads
    with fabric.unit_of_work() as uow:
        assert [r["fact_id"] for r in fabric.claims.claim(uow.repo, "api|limit")[1]] == ["a", "c"]
    assert fabric.claims.loads == loads  # still current after the commit


def test_another_writer_moves_the_counter_and_the_index_reads_again(fabric: Fabric) -> None:
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("a")])
        fabric.claims.claim(uow.repo, "api|limit")
    with fabric.engine.begin() as conn:  # another process (no index of its own)
        Repository(conn).insert_facts([fact("b", epoch=2)])
    with fabric.unit_of_work() as uow:
        rows = fabric.claims.claim(uow.repo, "api|limit")[1]
    assert [r["fact_id"] for r in rows] == ["a", "b"]
    with fabric.engine.begin() as conn:
        Repository(conn).set_claim_key(["a"], "sim:x")
    with fabric.unit_of_work() as uow:
        assert [r["fact_id"] for r in fabric.claims.claim(uow.repo, "api|limit")[1]] == ["b"]
    assert_never_ahead(fabric, "api|limit", "sim:x")


def test_an_insert_that_meets_a_stored_id_is_read_again(fabric: Fabric) -> None:
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("a", key="other|k")])
        uow.repo.insert_facts([fact("b")])
        fabric.claims.claim(uow.repo, "api|limit")
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("a"), fact("c", epoch=2)])  # "a" is stored under another claim
        rows = fabric.claims.claim(uow.repo, "api|limit")[1]
    assert [r["fact_id"] for r in rows] == ["b", "c"]
    assert_never_ahead(fabric, "api|limit", "other|k")


def test_text_claims_formed_by_set_claim_key_are_read_again(fabric: Fabric) -> None:
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("t1", key=None), fact("t2", key=None, epoch=2)])
        assert fabric.claims.claim(uow.repo, "sim:k")[1] == []
        uow.repo.set_claim_key(["t1", "t2"], "sim:k")
        assert [r["fact_id"] for r in fabric.claims.claim(uow.repo, "sim:k")[1]] == ["t1", "t2"]
    assert_never_ahead(fabric, "sim:k")


def test_it_is_bounded_by_the_setting(tmp_path: Path) -> None:
    f = Fabric(Settings(data_dir=tmp_path, embedder="hashing", cache_claim_facts=3), vectors=NoVectors())  # type: ignore[arg-type]
    try:
        assert f.claims.max_facts == 3
        with f.unit_of_work() as uow:
            uow.repo.insert_facts([fact(f"a{i}", epoch=i) for i in range(4)])
            uow.repo.insert_facts([fact(f"b{i}", key="b|k", epoch=i) for i in range(2)])
            uow.repo.insert_facts([fact(f"c{i}", key="c|k", epoch=i) for i in range(2)])
            assert len(f.claims.claim(uow.repo, "api|limit")[1]) == 4  # larger than the bound: not held
            f.claims.claim(uow.repo, "b|k")
            f.claims.claim(uow.repo, "c|k")  # b|k, the least recently used, makes room
        assert f.claims.held("api|limit") is None and f.claims.held("b|k") is None
        assert f.claims.held("c|k") is not None and len(f.claims) == 2
        with f.unit_of_work() as uow:
            assert f.claims.preload(uow.repo) <= 3
        assert_never_ahead(f, "api|limit", "b|k", "c|k")
    finally:
        f.close()


def test_a_savepoint_rolled_back_after_another_writer_leaves_nothing_behind(fabric: Fabric) -> None:
    """The first read of a transaction may drop the index (another writer moved the counter) inside a
    savepoint that is then rolled back: the claim row written there must not survive (kept, a later
    evaluation would find its fingerprint equal)."""
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("a"), fact("b", key="b|k"), fact("c", key="c|k")])
        for key in ("api|limit", "b|k", "c|k"):
            fabric.claims.claim(uow.repo, key)
    with fabric.engine.begin() as conn:  # another process
        Repository(conn).insert_facts([fact("x", key="x|k")])
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([fact("a2", epoch=2), fact("b2", key="b|k", epoch=2)])  # written before any read
        with pytest.raises(ValueError), uow.repo.savepoint():  # a rejected record
            fabric.claims.claim(uow.repo, "c|k")
            uow.repo.put_claim("c|k", "DRIFT_UNDETERMINED", "rolled-back", {}, 5)
            raise ValueError("rejected")
        assert fabric.claims.claim(uow.repo, "c|k")[0] is None
    assert_never_ahead(fabric, "api|limit", "b|k", "c|k", "x|k")
    with fabric.unit_of_work() as uow:
        assert fabric.claims.claim(uow.repo, "c|k")[0] is None


class Failed(Exception):
    pass


def test_random_units_of_work_never_leave_the_index_ahead_of_the_store(fabric: Fabric) -> None:
    """Seeded model check: units of work of random claim writes, reads, rejected savepoints, rollbacks
    and another writer's commits in between. Inside a transaction the index answers what the store
    answers in that transaction; after it, whatever it holds is what was committed."""
    rng = random.Random(20261201)
    keys = ["k0|a", "k1|a", "k2|a", "sim:t"]
    ids: list[str] = []

    def new_fact(repo: Repository) -> None:
        fid = f"f{len(ids)}"
        ids.append(fid)
        repo.insert_facts([fact(fid, key=rng.choice([*keys, None]), epoch=rng.randrange(50))])

    def op(repo: Repository) -> None:
        r = rng.random()
        if r < 0.3 or not ids:
            new_fact(repo)
        elif r < 0.4:
            repo.insert_facts([fact(rng.choice(ids), key=rng.choice(keys))])  # meets a stored id
        elif r < 0.6:
            repo.set_fact_status([rng.choice(ids)], rng.choice(["active", "stale", "quarantined"]))
        elif r < 0.75:
            repo.put_claim(rng.choice(keys), "CONSENSUS_OK", f"fp{rng.randrange(1000)}", {}, rng.randrange(100))
        elif r < 0.85:
            repo.set_claim_key(rng.sample(ids, min(2, len(ids))), rng.choice(keys))
        else:
            key = rng.choice(keys)
            claim, rows, _ = fabric.claims.claim(repo, key)
            assert (claim, rows) == (repo.get_claim(key), repo.facts_for_claim(key))

    for _ in range(120):
        if rng.random() < 0.15:
            with fabric.engine.begin() as conn:  # another process, no index of its own
                op(Repository(conn))
            continue
        with contextlib.suppress(Failed), fabric.unit_of_work() as uow:
            for _ in range(rng.randrange(1, 8)):
                if rng.random() < 0.2:
                    with contextlib.suppress(Failed), uow.repo.savepoint():
                        for _ in range(rng.randrange(1, 4)):
                            op(uow.repo)
                        if rng.random() < 0.5:
                            raise Failed
                else:
                    op(uow.repo)
            for key in keys:  # inside the transaction: what the store says in it
                claim, rows, _ = fabric.claims.claim(uow.repo, key)
                assert (claim, rows) == (uow.repo.get_claim(key), uow.repo.facts_for_claim(key)), key
            if rng.random() < 0.2:
                raise Failed  # the unit of work rolls back
        assert_never_ahead(fabric, *keys)
    assert fabric.claims.hits > 0  # it did serve from memory


def test_cached_rows_are_plain_dicts_the_collector_leaves_alone(tmp_path: Path) -> None:
    """Rows held by the index and the transaction are keyed by plain interned ``str`` (SQLAlchemy's
    ``quoted_name`` keys made every cached row a container the cyclic collector tracked)."""
    import gc
    import sys

    from crp_stream.fabric.caches.claim_index import as_stored

    row = as_stored(fact("a", epoch=5))  # type: ignore[arg-type]
    assert not gc.is_tracked(row)
    assert all(type(k) is str and sys.intern(k) is k for k in row)
    fabric = Fabric(Settings(data_dir=tmp_path, embedder="hashing"), vectors=NoVectors())  # type: ignore[arg-type]
    try:
        with fabric.unit_of_work() as uow:
            uow.repo.insert_facts([fact("a", epoch=5)])
        with fabric.unit_of_work() as uow:
            read = uow.repo.facts_by_ids(["a"])["a"]
            _, rows, _ = fabric.claims.claim(uow.repo, "api|limit")
        assert not gc.is_tracked(read) and all(type(k) is str for k in read)
        assert rows and not any(gc.is_tracked(r) for r in rows)
    finally:
        fabric.close()


def test_as_stored_takes_its_short_paths_with_the_same_result() -> None:
    """``as_stored``'s short paths (a row with every column in order; numbers already of the stored
    types) give what the plain rule gives: every column in table order, keyed by the table's own
    names, numbers cast to the driver's types; random rows of any shape."""
    from crp_stream.fabric.caches.claim_index import _CASTS, _COLUMNS, as_stored

    class Named(str):  # a str subclass key, as SQLAlchemy's ``quoted_name``
        pass

    def plain(row: dict[str, Any]) -> dict[str, Any]:
        out = {c: row.get(c) for c in _COLUMNS}
        for c, k in _CASTS:
            if out[c] is not None and type(out[c]) is not k:
                out[c] = k(out[c])
        return out

    rng = random.Random(5)
    values: list[Any] = [None, 1, 2.5, True, 0, -0.0, 10**12, "x", ""]
    for i in range(2000):
        cols = list(_COLUMNS) if i % 2 else rng.sample(_COLUMNS, rng.randint(0, len(_COLUMNS)))
        if i % 4 == 3:
            rng.shuffle(cols)
        numeric = {c for c, _ in _CASTS}
        row = {(Named(c) if i % 8 == 1 else c): rng.choice(values[:-2] if c in numeric else values) for c in cols}
        got, want = as_stored(row), plain(row)  # type: ignore[arg-type]
        assert list(got.items()) == list(want.items())
        assert [type(v) for v in got.values()] == [type(v) for v in want.values()]
        assert all(type(k) is str for k in got) and list(got) == list(_COLUMNS)
