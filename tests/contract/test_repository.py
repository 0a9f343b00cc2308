"""The relational store contract, run on every backend (SQLite and a real PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from crp_stream.fabric.sql import db, tables
from crp_stream.fabric.sql.repository import Repository


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    eng = db.make_engine(database_url)
    db.upgrade(eng)
    yield eng
    eng.dispose()


def fact(fid: str, **kw: Any) -> dict[str, Any]:
    row = {
        "fact_id": fid,
        "source": "s",
        "source_type": "official",
        "trust": 0.9,
        "importance": 1.0,
        "epoch_us": 1,
        "modified_at_us": 1,
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


def test_migrations_create_every_table_and_downgrade_removes_them(engine: Engine) -> None:
    names = set(inspect(engine).get_table_names())
    assert {
        "facts",
        "sources",
        "edges",
        "sessions",
        "audit_log",
        "refresh_requests",
        "quarantine_candidates",
        "claims",
        "processed_events",
        "consumer_offsets",
        "meta",
    } <= names
    db.downgrade(engine)
    assert not {"facts", "audit_log"} & set(inspect(engine).get_table_names())
    db.upgrade(engine)
    assert "facts" in inspect(engine).get_table_names()


def test_migration_0004_adds_the_refresh_requests_claim_index(engine: Engine) -> None:
    """The arbiter reads a claim's refresh requests per changed verdict: the index ``tables.py``
    declares for it exists after the migrations, and downgrading 0004 removes only that one."""
    from crp_stream.fabric.sql import tables as t

    def indexes(table: str) -> set[str]:
        return {str(ix["name"]) for ix in inspect(engine).get_indexes(table)}

    assert {str(ix.name) for ix in t.refresh_requests.indexes} == indexes("refresh_requests")
    claim_index = "ix_refresh_requests_claim_key_status"
    cols = {str(ix["name"]): ix["column_names"] for ix in inspect(engine).get_indexes("refresh_requests")}
    assert cols[claim_index] == ["claim_key", "status"]
    db.downgrade(engine, "0003")
    assert indexes("refresh_requests") == {"ix_refresh_requests_status"}
    db.upgrade(engine)
    assert claim_index in indexes("refresh_requests")


def test_the_migrations_build_every_table_column_and_index_tables_py_declares(engine: Engine) -> None:
    """``tables.py`` and the migrations describe one schema: an index declared but never migrated
    (``ix_facts_source_document`` until 0005) makes every real fabric slower than the tests' model."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from crp_stream.fabric.sql import tables as t

    kinds = {"add_table", "remove_table", "add_column", "remove_column", "add_index", "remove_index"}
    with engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), t.metadata)
    structural = [d for d in diffs if isinstance(d, tuple) and d[0] in kinds]
    assert structural == []


def test_migration_0005_adds_the_facts_by_document_and_candidates_by_claim_indexes(engine: Engine) -> None:
    """Ingest reads a document's earlier facts by (source, document_id) once per document; the
    arbiter reads a claim's quarantine candidates once per poisoning verdict."""

    def indexes(table: str) -> dict[str, list[str]]:
        return {str(ix["name"]): list(ix["column_names"]) for ix in inspect(engine).get_indexes(table)}

    assert indexes("facts")["ix_facts_source_document"] == ["source", "document_id"]
    assert indexes("quarantine_candidates")["ix_quarantine_candidates_claim_key"] == ["claim_key"]
    db.downgrade(engine, "0004")
    assert "ix_facts_source_document" not in indexes("facts")
    assert "ix_facts_source_status" in indexes("facts")
    assert set(indexes("quarantine_candidates")) == {"ix_quarantine_candidates_status"}
    db.upgrade(engine)
    assert "ix_facts_source_document" in indexes("facts")
    assert "ix_quarantine_candidates_claim_key" in indexes("quarantine_candidates")


def test_migration_0006_clusters_edges_by_their_key_on_sqlite_and_keeps_every_row(engine: Engine) -> None:
    """Ingest writes and reads edges by (src, dst, kind): on SQLite the table is one B-tree by that
    key (no rowid, no second index); down and up again, every row and the key stay."""
    rows = [("b", "a", 0.5, "similarity"), ("a", "b", 0.5, "similarity"), ("a", "b", 1.0, "adjacency")]
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM edges"))
        for r in rows:
            conn.execute(
                text("INSERT INTO edges (src, dst, weight, kind) VALUES (:s, :d, :w, :k)"),
                dict(zip("sdwk", r, strict=True)),
            )

    def state() -> tuple[list[tuple[Any, ...]], list[str], bool]:
        with engine.connect() as conn:
            got = [
                tuple(r) for r in conn.execute(text("SELECT src, dst, weight, kind FROM edges ORDER BY src, dst, kind"))
            ]
            ddl = ""
            if engine.dialect.name == "sqlite":
                ddl = str(conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'edges'")).scalar_one())
        key = list(inspect(engine).get_pk_constraint("edges")["constrained_columns"])
        return got, key, "WITHOUT ROWID" in ddl.upper()

    expected = sorted(rows, key=lambda r: (r[0], r[1], r[3]))
    assert state() == (expected, ["src", "dst", "kind"], engine.dialect.name == "sqlite")
    db.downgrade(engine, "0005")
    assert state() == (expected, ["src", "dst", "kind"], False)
    db.upgrade(engine)
    assert state() == (expected, ["src", "dst", "kind"], engine.dialect.name == "sqlite")
    with engine.begin() as conn, pytest.raises(DBAPIError):  # the key still refuses a second row of one kind
        conn.execute(text("INSERT INTO edges (src, dst, weight, kind) VALUES ('a', 'b', 0.1, 'similarity')"))


def test_migration_0011_writes_session_states_and_outboxes_with_lz4_on_postgresql(engine: Engine) -> None:
    """The two large texts rewritten per window request are lz4 on PostgreSQL (pglz costs the worker's
    cores twice as much); down, pglz again. SQLite has no such setting: the migration leaves it be."""
    from alembic.migration import MigrationContext

    def revision() -> str | None:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()

    if engine.dialect.name == "sqlite":
        db.downgrade(engine, "0010")
        assert revision() == "0010"
        db.upgrade(engine)  # runs, and changes no column
        assert revision() == "0011"
        return

    def methods() -> list[str]:
        with engine.connect() as conn:
            return [
                str(
                    conn.execute(
                        text(
                            "SELECT attcompression FROM pg_attribute"
                            " WHERE attrelid = CAST(:t AS regclass) AND attname = :c"
                        ),
                        {"t": table, "c": column},
                    ).scalar_one()
                )
                for table, column in (("sessions", "state"), ("meta", "value"))
            ]

    assert methods() == ["l", "l"]
    db.downgrade(engine, "0010")
    assert methods() == ["p", "p"]
    db.upgrade(engine)
    assert methods() == ["l", "l"]


def test_fact_insert_is_idempotent_and_status_changes(engine: Engine) -> None:
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.insert_facts([fact("a", claim_key="x|y"), fact("b")])
        repo.insert_facts([fact("a", text="other")])  # first write wins
    with engine.begin() as conn:
        repo = Repository(conn)
        assert repo.facts_by_ids(["a", "b", "zz"]).keys() == {"a", "b"}
        assert repo.facts_by_ids(["a"])["a"]["text"] == "text a"
        repo.set_fact_status(["a"], "stale")
        assert [f["fact_id"] for f in repo.facts_for_claim("x|y")] == ["a"]
        assert repo.fact_counts() == [("s", "active", 1), ("s", "stale", 1)]


def test_a_batch_insert_keeps_the_first_write_of_each_id_and_counts_only_new_rows(engine: Engine) -> None:
    """A micro-batch's facts go in as one statement (COPY through a staging table on PostgreSQL, from
    a few dozen rows): a repeated id, in the store or earlier in the batch, keeps its first row; whole
    floats given for integer columns are stored as integers; a rolled-back batch leaves nothing."""
    ids = [f"f{i:03d}" for i in range(60)]
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.insert_facts([fact(ids[0], text="first")])
        batch = [fact(f, position=i, epoch_us=1000.0 + i, text=f'it\'s \\ \t"{f}"\n') for i, f in enumerate(ids)]
        batch.append(fact(ids[5], text="a repeat in the batch"))
        assert repo._insert_ignore(tables.facts, batch, ["fact_id"]) == 59
        with pytest.raises(RuntimeError), repo.savepoint():
            repo.insert_facts([fact(f"r{i:03d}") for i in range(40)])
            raise RuntimeError("rejected")
        repo.insert_facts([fact(f"g{i:03d}", epoch_us=2.0) for i in range(40)])  # the staging table again
    with engine.begin() as conn:
        stored = Repository(conn).facts_by_ids([*ids, "r000", "g000", "g039"])
    assert set(stored) == {*ids, "g000", "g039"}
    assert stored[ids[0]]["text"] == "first"
    assert stored[ids[5]]["text"] == f'it\'s \\ \t"{ids[5]}"\n'
    assert [stored[f]["epoch_us"] for f in ids[1:4]] == [1001, 1002, 1003]
    assert type(stored[ids[1]]["epoch_us"]) is int and stored["g000"]["epoch_us"] == 2


def test_ingest_per_document_reads_and_source_touch_on_the_driver_match_sqlalchemy(engine: Engine) -> None:
    """``existing_fact_ids``, ``document_facts`` and ``touch_source`` run on the driver (once per
    document): the same values and types as the SQLAlchemy statements they replace."""
    from sqlalchemy import select

    from crp_stream.fabric.sql import tables as t

    ids = [f"f{i:04d}" for i in range(1200)]  # more than one chunk of 500
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.insert_facts([fact(f, document_id="d1" if i % 3 else "d2", position=i) for i, f in enumerate(ids)])
        repo.touch_source("s", "official", 0.75, 10)
        repo.touch_source("s", "news", 0.5, 20)
        repo.touch_source("t", "news", 0.25, 30)
    with engine.begin() as conn:
        repo = Repository(conn)
        asked = [*ids[::2], "zz", ids[0]]
        assert repo.existing_fact_ids(asked) == {f for f in ids[::2]}
        assert repo.existing_fact_ids([]) == set()
        f = t.facts.c
        q = select(f.fact_id, f.position, f.status).where((f.source == "s") & (f.document_id == "d2"))
        want = sorted((dict(r._mapping) for r in conn.execute(q)), key=lambda r: r["fact_id"])
        got = sorted(repo.document_facts("s", "d2"), key=lambda r: r["fact_id"])
        assert got == want and len(got) == 400
        assert [type(v) for v in got[0].values()] == [type(v) for v in want[0].values()]
        assert repo.document_facts("s", "none") == []
        sources = [
            (r["source"], r["source_type"], r["trust"], r["first_seen_us"], r["last_seen_us"]) for r in repo.sources()
        ]
        assert sources == [("s", "news", 0.5, 10, 20), ("t", "news", 0.25, 30, 30)]


def test_offsets_and_processed_ids_commit_with_the_transaction(engine: Engine) -> None:
    with pytest.raises(RuntimeError), engine.begin() as conn:
        repo = Repository(conn)
        repo.commit_offset("g", "t", 0, 5)
        repo.mark_processed("g", "event_id:e1", "h1", "t", 4)
        raise RuntimeError("crash before commit")
    with engine.begin() as conn:
        repo = Repository(conn)
        assert repo.offsets("g") == {}
        assert repo.processed_hash("g", "event_id:e1") is None
        repo.commit_offset("g", "t", 0, 5)
        repo.commit_offset("g", "t", 0, 6)
        repo.commit_offset("g", "t", 0, 4)  # a worker restarted behind the fabric: never moves back
        repo.mark_processed("g", "event_id:e1", "h1", "t", 4)
        assert repo.processed_hash("g", "event_id:e1") == "h1"  # buffered, seen by this transaction
        repo.flush()  # what Fabric.unit_of_work does before it commits
    with engine.begin() as conn:
        repo = Repository(conn)
        assert repo.offsets("g") == {("t", 0): 6}
        assert repo.processed_hash("g", "event_id:e1") == "h1"


def test_offset_and_meta_in_one_write_never_lower_the_offset(engine: Engine) -> None:
    """``commit_offset_and_meta`` (the Kafka worker's last statement on PostgreSQL) keeps
    ``commit_offset``'s rule: a lower offset leaves the stored one; the meta row is written alike."""
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.commit_offset_and_meta("g", "t", 0, 5, "outbox:g:t:0", "[1]")
        repo.commit_offset_and_meta("g", "t", 1, 2, "outbox:g:t:1", None)  # no outbox write
        assert repo.get_meta("outbox:g:t:0") == "[1]"  # seen by this transaction
    with engine.begin() as conn:
        repo = Repository(conn)
        assert repo.offsets("g") == {("t", 0): 5, ("t", 1): 2}
        assert repo.get_meta("outbox:g:t:1") is None
        repo.commit_offset_and_meta("g", "t", 0, 7, "outbox:g:t:0", "[2]")
    with engine.begin() as conn:
        repo = Repository(conn)
        # a worker restarted behind the fabric: the offset never moves back, the outbox is its own
        repo.commit_offset_and_meta("g", "t", 0, 3, "outbox:g:t:0", "[]")
    with engine.begin() as conn:
        repo = Repository(conn)
        assert repo.offsets("g") == {("t", 0): 7, ("t", 1): 2}
        assert repo.get_meta("outbox:g:t:0") == "[]"


def test_batch_start_reads_the_offsets_and_the_meta_of_one_batch_in_one_statement(engine: Engine) -> None:
    """A micro-batch's first read: the group's offsets as ``offsets`` gives them, and its meta values
    kept for the transaction (a key written in it keeps the written value; an absent key reads None)."""
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.commit_offset("g", "t", 0, 5)
        repo.commit_offset("g", "u", 3, 9)
        repo.commit_offset("other", "t", 0, 1)
        repo.set_meta("m1", "one")
        repo.set_meta("m2", "two")
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.set_meta("m2", "changed")  # this transaction's own write
        assert repo.batch_start("g", ("m1", "m2", "absent")) == {("t", 0): 5, ("u", 3): 9} == repo.offsets("g")
        assert repo.batch_start("nobody", ()) == {}
        conn.execute(text("DELETE FROM meta WHERE key = 'm1'"))  # behind the repository's back
        assert (repo.get_meta("m1"), repo.get_meta("m2"), repo.get_meta("absent")) == ("one", "changed", None)


def test_buffered_sessions_and_processed_ids_are_written_with_the_offset(engine: Engine) -> None:
    """Session rows and processed ids are buffered; reads see them; they land with the offset
    statement (PostgreSQL) or the flush, and a rolled-back savepoint drops its session rows."""
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.prefetch_processed("g", ["request_id:r1"], ["s1", "s2"])
        assert repo.processed_hash("g", "request_id:r1") is None and repo.get_session("s1") is None
        repo.put_session("s1", "m", 1, 5, {"a": [1, 2]}, 10)
        with pytest.raises(RuntimeError), repo.savepoint():
            repo.put_session("s2", "m", 1, 5, {"b": 1}, 11)
            raise RuntimeError("rejected")
        assert repo.get_session("s2") is None
        got = repo.get_session("s1")
        assert got is not None and got["state"] == {"a": [1, 2]} and got["window_count"] == 1
        repo.mark_processed("g", "request_id:r1", "h", "t", 4)
        repo.commit_offset_and_meta("g", "t", 0, 5, "outbox:g:t:0", "[]")
        repo.flush()
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.prefetch_processed("g", ["request_id:r1"], ["s1", "s2"])
        assert repo.processed_hash("g", "request_id:r1") == "h"
        got = repo.get_session("s1")
        assert got is not None and got["state"] == {"a": [1, 2]} and got["updated_at_us"] == 10
        assert repo.get_session("s2") is None
        assert repo.offsets("g") == {("t", 0): 5}


def test_edges_are_symmetric_and_idempotent(engine: Engine) -> None:
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.add_edges([("a", "b", 0.7), ("b", "c", 0.65), ("a", "b", 0.7), ("a", "a", 1.0)])
    with engine.begin() as conn:
        repo = Repository(conn)
        assert repo.edge_count() == 2
        adj = repo.adjacency(["b"])
        assert adj["b"] == {"a": 0.7, "c": 0.65}
        assert adj["a"] == {"b": 0.7}


def test_prune_keeps_the_k_strongest_similarity_edges_ties_by_neighbour_id(engine: Engine) -> None:
    import random

    rng = random.Random(5)
    nodes = [f"n{i:02d}" for i in range(30)]
    edges = {
        (a, b): rng.choice([0.61, 0.7, 0.7, 0.8, 0.93]) for a in nodes for b in nodes if a < b and rng.random() < 0.5
    }
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.add_edges([(a, b, w) for (a, b), w in edges.items()])
        repo.add_edges([("n00", "n01", 0.99)], kind="adjacent")  # another kind is never pruned
        touched = nodes[:20]
        dropped = repo.prune_similarity(touched, 4)
    # the reference: per source, sort by (-weight, neighbour id) and drop past k
    both = {**edges, **{(b, a): w for (a, b), w in edges.items()}}
    want = []
    for src in sorted(touched):
        ranked = sorted((-w, dst) for (s, dst), w in both.items() if s == src)
        want += [(src, dst) for _w, dst in ranked[4:]]
    assert dropped == want and want
    with engine.begin() as conn:
        repo = Repository(conn)
        rows = repo.edge_rows(nodes)
        kept = {(s, d) for s, d, _w, kind in rows if kind == "similarity"}
        assert kept == set(both) - set(want)
        assert ("n00", "n01", 0.99, "adjacent") in rows
        assert repo.facts_by_ids(["zz"]) == {}


def test_sessions_round_trip_canonical_state(engine: Engine) -> None:
    state = {"residual": ["q2"], "coverage": [{"id": "q1", "depth": 0.7}], "blacklist": ["a b c d e f"]}
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.put_session("s1", "m", 0, 5, state, 10)
        repo.flush()  # buffered until then: what Fabric.unit_of_work does before it commits
    with engine.begin() as conn:
        repo = Repository(conn)
        row = repo.get_session("s1")
        assert row is not None and row["state"] == state and row["max_windows"] == 5
        repo.put_session("s1", "m", 1, 5, {**state, "residual": []}, 11)
        row = repo.get_session("s1")
        assert row is not None and row["window_count"] == 1 and row["state"]["residual"] == []


def test_audit_log_appends_in_order_and_ignores_a_repeated_id(engine: Engine) -> None:
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.append_audit("e1", "STALE_HIGH_TRUST", 1, "k", {"n": 1})
        repo.append_audit("e2", "REFRESH_REQUESTED", 2, "k", {"n": 2})
        repo.append_audit("e1", "STALE_HIGH_TRUST", 3, "k", {"n": 99})
    with engine.begin() as conn:
        repo = Repository(conn)
        assert [(a["event_id"], a["details"]["n"]) for a in repo.audit()] == [("e1", 1), ("e2", 2)]
        assert [a["event_id"] for a in repo.audit("REFRESH_REQUESTED")] == ["e2"]


def test_audit_log_has_no_update_or_delete_path() -> None:
    import inspect as pyinspect

    from crp_stream.fabric.sql import repository

    src = pyinspect.getsource(repository)
    assert "update(t.audit_log" not in src and "delete(t.audit_log" not in src
    assert "t.audit_log.update" not in src and "t.audit_log.delete" not in src


@pytest.mark.parametrize("statement", ["UPDATE audit_log SET details = '{}'", "DELETE FROM audit_log"])
def test_the_database_refuses_to_change_or_delete_audit_rows(engine: Engine, statement: str) -> None:
    with engine.begin() as conn:
        Repository(conn).append_audit("e1", "STALE_HIGH_TRUST", 1, "k", {"n": 1})
    with pytest.raises(DBAPIError, match="audit_log is append-only"), engine.begin() as conn:
        conn.execute(text(statement))
    with engine.begin() as conn:
        assert [(a["event_id"], a["details"]) for a in Repository(conn).audit()] == [("e1", {"n": 1})]
        Repository(conn).append_audit("e2", "REFRESH_REQUESTED", 2, "k", {})  # appending still works
    if engine.dialect.name == "postgresql":
        with pytest.raises(DBAPIError, match="audit_log is append-only"), engine.begin() as conn:
            conn.execute(text("TRUNCATE audit_log"))
    db.downgrade(engine)  # a rebuild drops the table with its triggers
    db.upgrade(engine)


def test_refresh_and_quarantine_lifecycle(engine: Engine) -> None:
    with engine.begin() as conn:
        repo = Repository(conn)
        assert repo.put_refresh("r1", "x|y", "vendor", {"stale_value": "1000"}, 5)
        assert not repo.put_refresh("r1", "x|y", "vendor", {"stale_value": "1000"}, 6)
        assert repo.put_candidate("c1", "x|y", "bad", {"value": "9"}, 5)
    with engine.begin() as conn:
        repo = Repository(conn)
        assert [r["request_id"] for r in repo.refresh_requests("open")] == ["r1"]
        assert repo.resolve_refresh("r1", 9, "alice")
        assert not repo.resolve_refresh("r1", 10, "bob")
        repo.decide_candidate("c1", "confirmed", 9, "alice")
        assert repo.candidates("confirmed")[0]["decided_by"] == "alice"
        assert repo.refresh_requests("resolved")[0]["resolved_by"] == "alice"


def test_narrow_fact_reads_statuses_rows_and_edge_rows(engine: Engine) -> None:
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.insert_facts([fact("a"), fact("b", status="stale", subject="svc", attribute="rate", value="5")])
        repo.add_edges([("a", "b", 0.7), ("b", "c", 0.65)])
    with engine.begin() as conn:
        repo = Repository(conn)
        assert repo.fact_statuses(["b", "a", "zz", "a"]) == {"a": "active", "b": "stale"}
        rows = repo.fact_rows(["b", "zz"], ("fact_id", "text", "subject", "value"))
        assert rows == {"b": {"fact_id": "b", "text": "text b", "subject": "svc", "value": "5"}}
        assert sorted(repo.edge_rows(["b"])) == [("b", "a", 0.7, "similarity"), ("b", "c", 0.65, "similarity")]
        assert repo.edge_rows([]) == []


def test_increment_meta_is_atomic_across_transactions(engine: Engine) -> None:
    import threading

    with engine.begin() as conn:
        repo = Repository(conn)
        assert repo.increment_meta("graph_generation") == 1
        assert repo.increment_meta("graph_generation") == 2
        assert repo.get_meta("graph_generation") == "2"
    if engine.dialect.name != "postgresql":
        return  # SQLite has one writer at a time; the race below needs PostgreSQL's row locks
    got: list[int] = []
    first = engine.connect()
    tx = first.begin()
    got.append(Repository(first).increment_meta("graph_generation"))  # holds the row lock

    def second() -> None:
        with engine.begin() as conn:
            got.append(Repository(conn).increment_meta("graph_generation"))  # waits for the first

    t = threading.Thread(target=second)
    t.start()
    t.join(0.5)
    assert t.is_alive()  # blocked on the lock, not reading the stale 2
    tx.commit()
    first.close()
    t.join(10)
    assert got == [3, 4]


def test_a_transaction_reads_its_own_fact_rows_as_the_store_holds_them(engine: Engine) -> None:
    """Rows written in a transaction are served from it (the arbiter reads each new fact right after
    ingest wrote it): they must equal what a later transaction reads back, types and order included,
    follow status and claim-key writes, and vanish with a rolled-back savepoint."""
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.insert_facts([fact("a", trust=1, importance=2, epoch_us=7.0), fact("b", ttl_s=3)])
        repo.set_fact_status(["b"], "stale")
        repo.set_claim_key(["a"], "sim:k")
        mine = repo.facts_by_ids(["b", "a", "zz"])
        mine["a"]["text"] = "a caller's change"  # rows handed out are copies
        with pytest.raises(RuntimeError), repo.savepoint():
            repo.insert_facts([fact("c")])
            assert set(repo.facts_by_ids(["c"])) == {"c"}
            raise RuntimeError("rejected")
        assert repo.facts_by_ids(["c"]) == {}
        mine = repo.facts_by_ids(["b", "a", "zz"])
    with engine.begin() as conn:
        stored = Repository(conn).facts_by_ids(["a", "b"])
    assert list(mine) == ["a", "b"]
    for fid in ("a", "b"):
        assert mine[fid] == stored[fid]
        assert list(mine[fid]) == list(stored[fid])
        assert [type(v) for v in mine[fid].values()] == [type(v) for v in stored[fid].values()]
    assert mine["b"]["status"] == "stale" and mine["a"]["claim_key"] == "sim:k"


def test_processed_marks_of_a_run_are_read_in_one_query(engine: Engine) -> None:
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.mark_processed("g", "event_id:e1", "h1", "t", 1)
        repo.mark_processed("other", "event_id:e2", "h2", "t", 2)
        repo.flush()
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.prefetch_processed("g", ["event_id:e1", "event_id:e2", "event_id:e3"])
        repo._select_where = None  # type: ignore[assignment,method-assign]  # any further read would fail
        assert repo.processed_hash("g", "event_id:e1") == "h1"
        assert repo.processed_hash("g", "event_id:e2") is None  # another consumer's mark
        assert repo.processed_hash("g", "event_id:e3") is None
        repo.mark_processed("g", "event_id:e3", "h3", "t", 3)
        assert repo.processed_hash("g", "event_id:e3") == "h3"  # this transaction's mark wins


def test_touching_a_claim_moves_only_its_time(engine: Engine) -> None:
    details = {"verdict": "STALE_HIGH_TRUST", "values": [1, 2]}
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.put_claim("x|y", "STALE_HIGH_TRUST", "fp", details, 10)
        repo.put_claim("a|b", "CONSENSUS_OK", "fp2", {}, 10)
        repo.flush()
    with engine.begin() as conn:
        repo = Repository(conn)
        stored = repo.get_claim("x|y")
        assert stored is not None
        repo.touch_claim(stored, 20)
        assert repo.get_claim("x|y") == {**stored, "updated_at_us": 20}
        with pytest.raises(RuntimeError), repo.savepoint():
            repo.touch_claim(stored, 30)
            raise RuntimeError("rejected")
        assert repo.get_claim("x|y") == {**stored, "updated_at_us": 20}
        repo.put_claim("a|b", "CONSENSUS_OK", "fp3", {"n": 1}, 15)
        other = repo.get_claim("a|b")
        assert other is not None
        repo.touch_claim(other, 25)  # a row written in this transaction keeps its new content
        repo.flush()
    with engine.begin() as conn:
        repo = Repository(conn)
        assert repo.get_claim("x|y") == {
            "claim_key": "x|y",
            "verdict": "STALE_HIGH_TRUST",
            "fingerprint": "fp",
            "details": details,
            "updated_at_us": 20,
        }
        assert repo.get_claim("a|b") == {
            "claim_key": "a|b",
            "verdict": "CONSENSUS_OK",
            "fingerprint": "fp3",
            "details": {"n": 1},
            "updated_at_us": 25,
        }


def test_fixed_meta_is_remembered_once_committed(engine: Engine) -> None:
    fixed: dict[str, str] = {}
    with pytest.raises(RuntimeError), engine.begin() as conn:
        repo = Repository(conn, fixed=fixed)
        repo.set_meta("embedding_text", "t1")
        assert repo.get_meta("embedding_text") == "t1"
        raise RuntimeError("rolled back")
    assert fixed == {}  # this transaction's own write is never remembered
    with engine.begin() as conn:
        repo = Repository(conn, fixed=fixed)
        assert repo.get_meta("embedding_text") is None
        repo.set_meta("embedding_text", "t2")
        repo.set_meta("graph_generation", "7")
    with engine.begin() as conn:
        repo = Repository(conn, fixed=fixed)
        assert repo.get_meta("embedding_text") == "t2" and repo.get_meta("graph_generation") == "7"
    assert fixed == {"embedding_text": "t2"}  # counters are read every time
    with engine.begin() as conn:
        conn.execute(text("UPDATE meta SET value = 'changed' WHERE key = 'embedding_text'"))
        assert Repository(conn, fixed=fixed).get_meta("embedding_text") == "t2"


def test_the_model_is_read_per_transaction(engine: Engine) -> None:
    """A reembed switches the model and its dimension: a process reads them in every transaction."""
    fixed: dict[str, str] = {}
    with engine.begin() as conn:
        Repository(conn, fixed=fixed).set_meta("embedding_model", "m1")
    with engine.begin() as conn:
        assert Repository(conn, fixed=fixed).get_meta("embedding_model") == "m1"
        conn.execute(text("UPDATE meta SET value = 'm2' WHERE key = 'embedding_model'"))
    with engine.begin() as conn:
        assert Repository(conn, fixed=fixed).get_meta("embedding_model") == "m2"
    assert fixed == {}


def test_fact_vectors_are_stored_once_as_the_index_holds_them_and_read_back_with_the_facts_payload(
    engine: Engine,
) -> None:
    """What a worker keeping its own embedded index loads (``runtime/kafka/projection.py``): each fact's
    unit float32 vector, written once (a second write of the same fact keeps the first), and the
    payload of the facts as the fabric holds it."""
    import numpy as np

    from crp_stream.fabric.vectors.port import VectorItem, normalise

    with engine.begin() as conn:
        repo = Repository(conn)
        repo.insert_facts([fact("f1"), fact("f2", status="stale", expires_at_us=2_500_000, source="t")])
        repo.insert_fact_vectors([VectorItem("f1", [3.0, 4.0]), VectorItem("f2", [0.0, 2.0])])
        repo.insert_fact_vectors([VectorItem("f1", [1.0, 0.0])])  # the same fact again: kept as first stored
    with engine.connect() as conn:
        repo = Repository(conn)
        stored = repo.fact_vectors(["f1", "f2", "f3"])
        assert sorted(stored) == ["f1", "f2"]
        assert stored["f1"].dtype == np.float32
        assert stored["f1"].tobytes() == normalise([3.0, 4.0]).tobytes()
        assert stored["f2"].tolist() == [0.0, 1.0]
        assert repo.fact_points() == [("f1", "active", None, "s", "default"), ("f2", "stale", 2.5, "t", "default")]
        assert repo.fact_points(["f2", "f9"]) == [("f2", "stale", 2.5, "t", "default")]
    db.downgrade(engine, "0007")
    assert "fact_vectors" not in inspect(engine).get_table_names()
    db.upgrade(engine)
    assert "fact_vectors" in inspect(engine).get_table_names()


def test_fact_words_find_the_facts_of_a_word_and_go_with_forget_and_a_downgrade(engine: Engine) -> None:
    """Each fact is written under the words of its text (``core.graph_rank.title_words``), once; the
    facts of a word come back by id, only the tenant's active ones; ``forget`` deletes a fact's words;
    the migration indexes the facts already there."""
    with engine.begin() as conn:
        repo = Repository(conn)
        repo.insert_facts(
            [
                fact("f2", text="Menabrea's paper was translated by Ada—Lovelace."),
                fact("f1", text="Babbage designed the engine for Ada Lovelace."),
                fact("f3", text="Lovelace wrote notes.", status="stale"),
                fact("f4", text="Lovelace, in another tenant.", tenant="acme"),
            ]
        )
        repo.insert_facts([fact("f1", text="Babbage designed the engine for Ada Lovelace.")])  # a replay
        counts = repo.word_counts(["lovelace", "ada", "babbage", "nowhere"], cap=3)
        assert counts == {"lovelace": 3, "ada": 2, "babbage": 1, "nowhere": 0}  # "lovelace": 4, capped
        assert [r[0] for r in repo.facts_with_word("lovelace", None)] == ["f1", "f2"]
        assert repo.facts_with_word("lovelace", "acme") == [("f4", "Lovelace, in another tenant.", "s", "d")]
        assert repo.word_counts(["the"], cap=10) == {"the": 0}  # too common to be written
    with engine.begin() as conn:
        Repository(conn).erase_facts(
            [{**fact("f2", text="Menabrea's paper was translated by Ada—Lovelace.")}], "default", []
        )
    with engine.connect() as conn:
        left = {r[0] for r in conn.execute(text("SELECT DISTINCT fact_id FROM fact_words"))}
        assert left == {"f1", "f3", "f4"}
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM fact_words"))
    db.downgrade(engine, "0009")
    assert "fact_words" not in inspect(engine).get_table_names()
    db.upgrade(engine)
    with engine.connect() as conn:
        assert [r[0] for r in Repository(conn).facts_with_word("babbage", None)] == ["f1"]  # indexed again
