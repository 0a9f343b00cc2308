"""Deterministic recovery tests: a crash between a batch's log sync and its database commit,
replayed in-process, must leave exactly what an uninterrupted run leaves, and each mechanism that
makes it so is shown to be necessary (the test fails without it). Also: transient database errors are
retried, and a record the database refuses is dead-lettered instead of stalling the stream."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.exc import DataError, OperationalError

from crp_stream.config import Settings
from crp_stream.events import OUTPUT_TOPICS
from crp_stream.processors import all_handlers
from crp_stream.runtime.embedded import open_fabric
from crp_stream.runtime.embedded import runtime as embedded_runtime
from crp_stream.runtime.embedded.log import Append, EmbeddedLog
from crp_stream.runtime.embedded.runtime import EmbeddedRuntime
from crp_stream.runtime.projections import differences, outputs_snapshot, tables_snapshot, vectors_snapshot
from crp_stream.runtime.vector_guard import GuardedVectors, VectorJournal

MODEL = "rec-model"
DIM = 8
T0 = 1_900_000_000 * 1_000_000
Input = tuple[str, str | None, int, bytes]


class Crash(BaseException):
    """kill -9 stand-in: nothing after it runs (not an Exception, so no handler catches it)."""


def vec(*xs: float) -> list[float]:
    v = np.zeros(DIM)
    v[: len(xs)] = xs
    return [float(x) for x in v / np.linalg.norm(v)]


def doc(eid: str, facts: list[tuple[str, list[float]]], source: str = "vendor_docs", **kw: Any) -> Input:
    value = {
        "event_id": eid,
        "source": source,
        "source_type": "official",
        "embedding_model": MODEL,
        "facts": [{"text": t, "embedding": e} for t, e in facts],
        **kw,
    }
    return ("crp.documents", source, 0, json.dumps(value).encode())


def claim(eid: str, source: str, stype: str, value: str) -> Input:
    body = {
        "event_id": eid,
        "source": source,
        "source_type": stype,
        "embedding_model": MODEL,
        "facts": [
            {
                "text": f"The api rate limit is {value} rps.",
                "embedding": vec(0, 0, 0, 1),
                "subject": "api",
                "attribute": "rate limit",
                "value": value,
                "unit": "rps",
            }
        ],
    }
    return ("crp.documents", source, 0, json.dumps(body).encode())


def request(session: str, q: list[float]) -> Input:
    value = {
        "request_id": f"r-{session}",
        "session_id": session,
        "window": 1,
        "embedding_model": MODEL,
        "query": {"text": "q", "embedding": q},
        "fact_budget": 4,
        "sub_queries": [{"id": "a", "text": "a", "embedding": q}],
    }
    return ("crp.window.requests", session, 0, json.dumps(value).encode())


class World:
    def __init__(self, path: Path, batch_size: int = 200, **kw: Any):
        self.batch_size = batch_size
        self.settings = Settings(data_dir=path, embedder=f"precomputed:{MODEL}", **kw)
        self.fabric = open_fabric(self.settings)
        self.log = EmbeddedLog(self.settings.log_path, lambda: 0)
        self.ts = T0

    def publish(self, inputs: list[Input]) -> None:
        items = []
        for topic, key, _ts, raw in inputs:
            self.ts += 1_000_000
            items.append(Append(topic, key, raw, ts_us=self.ts))
        self.log.append(items)

    def runtime(self) -> EmbeddedRuntime:
        return EmbeddedRuntime(self.fabric, self.log, all_handlers(), batch_size=self.batch_size)

    def crash_at_commit(self) -> None:
        """Run until the first batch has appended and synced its outputs, then die before the commit."""
        real = self.log.sync

        def die() -> None:
            real()
            raise Crash

        self.log.sync = die  # type: ignore[method-assign]
        with pytest.raises(Crash):
            self.runtime().run_until_idle()
        self.log.sync = real  # type: ignore[method-assign]
        old = self.fabric.vectors
        assert isinstance(old, GuardedVectors)
        old.journal.close()  # the next process opens the index and its journal afresh
        self.fabric.vectors = GuardedVectors(old.inner, VectorJournal(old.journal.path))

    def snapshot(self) -> dict[str, Any]:
        snap: dict[str, Any] = tables_snapshot(self.fabric.engine)
        snap["vectors"] = vectors_snapshot(self.fabric.vectors, [r["fact_id"] for r in snap["facts"]])
        snap["outputs"] = outputs_snapshot(self.log, [self.settings.topic(t) for t in OUTPUT_TOPICS])
        return snap

    def close(self) -> None:
        self.fabric.close()
        self.log.close()


def incident() -> list[Input]:
    """Order-sensitive for the arbiter: its verdicts change as the claim's facts arrive."""
    out = [claim("v1", "vendor_docs", "official", "1000")]
    out += [claim(f"t{i}", "field_telemetry", "telemetry", "250") for i in range(4)]
    out += [claim("c1", "community_notes", "community", "250")]
    out += [claim(f"u{i}", "unverified_blog", "unverified", "9") for i in range(2)]
    return out


def supersede() -> tuple[list[Input], list[Input]]:
    """A window request, then a document that supersedes the request's best fact: in one batch when
    the batch holds two records (a full batch; one the runtime is caught up with ends after the
    request)."""
    first = [doc("d1", [("Alpha routes packets.", vec(1, 0.1)), ("Beta is stable.", vec(0, 1))], document_id="d")]
    second = [
        request("s1", vec(1)),
        doc("d2", [("Alpha routes frames now.", vec(0.2, 0.1, 1)), ("Beta is stable.", vec(0, 1))], document_id="d"),
    ]
    return first, second


def reference(tmp_path: Path, phases: list[list[Input]], batch_size: int = 200) -> dict[str, Any]:
    w = World(tmp_path / "reference", batch_size)
    try:
        for inputs in phases:
            w.publish(inputs)
            w.runtime().run_until_idle()
        return w.snapshot()
    finally:
        w.close()


def crashed(tmp_path: Path, phases: list[list[Input]], name: str, batch_size: int = 200) -> dict[str, Any]:
    w = World(tmp_path / name, batch_size)
    try:
        for inputs in phases[:-1]:
            w.publish(inputs)
            w.runtime().run_until_idle()
        w.publish(phases[-1])
        w.crash_at_commit()
        w.runtime().run_until_idle()  # the restart
        return w.snapshot()
    finally:
        w.close()


def old_append(self: EmbeddedRuntime, outs: Any) -> None:
    """The runtime before the fix: an output already in the log was not handed to its consumers."""
    items = [Append(self.physical(o.topic), o.key, o.value, o.record_id) for o in outs]
    written = self.log.append(items)
    self._pending.extend(written)
    self._emitted.extend(written)


def test_outputs_already_in_the_log_are_consumed_when_re_caused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A window request closes the batch: it must see what the arbiter made of the facts the batch caused
    # (the vendor's value stale). The arbiter judges claims as of each fact's time, so only a consumer
    # after it in causal order shows whether re-caused outputs were handed over in that order.
    phase = [*incident(), request("s1", vec(0, 0, 0, 1))]
    want = reference(tmp_path, [phase])
    assert any(r["audit_type"] == "STALE_HIGH_TRUST" for r in want["audit_log"])
    assert differences(want, crashed(tmp_path, [phase], "fixed")) == []
    monkeypatch.setattr(EmbeddedRuntime, "_append", old_append)
    assert differences(want, crashed(tmp_path, [phase], "unfixed")) != []  # the test can fail


def test_vector_writes_of_an_uncommitted_batch_are_undone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = supersede()
    want = reference(tmp_path, [first, second], 2)
    env = [json.loads(v) for _, _, v in want["outputs"]["crp.envelopes"]]
    assert "Alpha routes packets." in [f["text"] for f in env[0]["facts"]]  # served before the supersede
    assert differences(want, crashed(tmp_path, [first, second], "fixed", 2)) == []
    monkeypatch.setattr(embedded_runtime, "reconcile", lambda fabric, journal: journal.clear())
    assert differences(want, crashed(tmp_path, [first, second], "unfixed", 2)) != []  # the test can fail


def test_transient_database_errors_are_retried_and_lose_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    want = reference(tmp_path, [incident()])
    w = World(tmp_path / "flaky")
    w.publish(incident())
    from crp_stream.fabric.sql.repository import Repository

    real = Repository.commit_offset
    failures = {"left": 3}

    def flaky(self: Repository, *args: Any) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise OperationalError("UPDATE consumer_offsets", {}, ConnectionError("server closed the connection"))
        real(self, *args)

    monkeypatch.setattr(Repository, "commit_offset", flaky)
    monkeypatch.setattr(embedded_runtime.time, "sleep", lambda s: None)
    with caplog.at_level(logging.WARNING, "crp_stream.runtime"):
        w.runtime().run_until_idle()
    try:
        assert failures["left"] == 0
        assert any("transient error, retrying" in r.getMessage() for r in caplog.records)
        assert differences(want, w.snapshot()) == []
    finally:
        w.close()


def test_a_record_the_database_refuses_is_deadlettered_not_retried_forever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = World(tmp_path / "refused")
    w.publish([doc("bad", [("Refused by the database.", vec(1))]), doc("good", [("Accepted.", vec(0, 1))])])
    from crp_stream.fabric.sql.repository import Repository

    real = Repository.insert_facts

    def refuse(self: Repository, rows: Any) -> None:
        if any(r["origin_event_id"] == "bad" for r in rows):
            raise DataError("INSERT INTO facts", {}, ValueError("invalid byte sequence"))
        real(self, rows)

    monkeypatch.setattr(Repository, "insert_facts", refuse)
    try:
        w.runtime().run_until_idle()
        dead = [json.loads(r.value) for r in w.log.iter_topic("crp.deadletter")]
        assert len(dead) == 1 and "DataError" in dead[0]["reason"]
        with w.fabric.unit_of_work() as uow:
            assert [f["text"] for f in uow.repo.all_facts()] == ["Accepted."]
    finally:
        w.close()


def test_a_batch_commits_all_or_nothing(tmp_path: Path) -> None:
    """Every handler's effects and the consumer offsets of a batch land together (SQLite included:
    a handler's SAVEPOINT must not commit on its own)."""
    first, second = supersede()
    w = World(tmp_path / "atomic")
    try:
        w.publish(first)
        w.runtime().run_until_idle()
        before = tables_snapshot(w.fabric.engine)
        w.publish(second)  # starts with the window request: its session row is the first write
        w.crash_at_commit()
        assert tables_snapshot(w.fabric.engine) == before
    finally:
        w.close()
