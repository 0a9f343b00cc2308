"""The Kafka worker's window requests: their PostgreSQL round trips (counted, as
``ops.bench.kafka_round_trips`` does), the savepoint they skip, and the isolation path when a handler
rejects after a write after all. Driven without a broker, through the worker's one-record path."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from crp_stream.config import Settings
from crp_stream.events import Rejected
from crp_stream.events.topics import ALL_TOPICS
from crp_stream.processors.base import Record
from crp_stream.runtime.kafka.worker import KafkaWorker
from ops.bench.kafka_round_trips import measure
from tests.support.services import fresh_postgres_url


@pytest.mark.postgres
def test_a_window_request_makes_at_most_six_round_trips() -> None:
    per, kinds, _cpu = measure(fresh_postgres_url(), 200, 6)
    # BEGIN, offset and meta, processed id and session, (titled leads not cached yet), the last
    # write (processed id, session, offset, outbox), COMMIT: no ping, savepoint or separate upserts
    assert max(per) <= 6, kinds
    assert not any(k.startswith(("SAVEPOINT", "RELEASE", ";")) for k in kinds), kinds


@pytest.fixture
def worker(tmp_path: Path, database_url: str) -> Iterator[KafkaWorker]:
    settings = Settings(
        data_dir=tmp_path, database_url=database_url, embedder="hashing:16", broker="kafka://127.0.0.1:1"
    )
    w = KafkaWorker(settings, ("retrieval",))
    w.partitions = {t: 4 for t in ALL_TOPICS}
    try:
        yield w
    finally:
        asyncio.run(w.stop())


def request(offset: int, session: str, window: int) -> Record:
    body = {"request_id": f"r{offset}", "session_id": session, "window": window, "query": {"text": "what port?"}}
    body["sub_queries"] = [{"id": "q0", "text": "the port"}]
    return Record("crp.window.requests", 0, offset, session, json.dumps(body).encode(), 1_700_000_000_000_000)


def rows(w: KafkaWorker, sql: str) -> list[Any]:
    eng = create_engine(w.settings.database)
    try:
        with eng.connect() as conn:
            return list(conn.execute(text(sql)))
    finally:
        eng.dispose()


def test_a_rejection_before_any_write_needs_no_savepoint(worker: KafkaWorker, caplog: Any) -> None:
    h = worker.handlers[0]
    with caplog.at_level(logging.WARNING, "crp_stream.kafka"):
        outs, _ = asyncio.run(worker._apply(h, request(0, "s1", 1)))
    assert outs is not None and [o.topic for o in outs] == ["crp.deadletter", "crp.audit"]
    assert b"the fabric holds no facts yet" in outs[0].value
    assert "savepoint" not in caplog.text  # no isolation path was needed
    assert rows(worker, "SELECT next_offset FROM consumer_offsets") == [(1,)]


@pytest.mark.parametrize("write", ["buffered", "statement"])
def test_a_rejection_after_a_write_is_redone_in_a_savepoint(
    worker: KafkaWorker, write: str, caplog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler on the one-record path (here retrieval without its batch path) that breaks its word
    (``rejects_before_writes``): the attempt fails, and the record is applied again in the
    savepoint, which undoes the write before the rejection."""
    h = worker.handlers[0]
    monkeypatch.setattr(h, "batch_native", False)

    def writes_then_rejects(ev: Any, record: Record, uow: Any) -> None:
        if write == "buffered":
            uow.repo.put_session(ev.session_id, "m", 1, 5, {"partial": True}, 1)
        else:
            uow.repo.append_audit("partial-write", "EVENT_REJECTED", 1, "k", {})
        raise Rejected("rejected after a write")

    monkeypatch.setattr(h, "_plan", writes_then_rejects)
    with caplog.at_level(logging.WARNING, "crp_stream.kafka"):
        outs, _ = asyncio.run(worker._apply(h, request(0, "s2", 1)))
    assert "applying it again in a savepoint" in caplog.text
    assert outs is not None and [o.topic for o in outs] == ["crp.deadletter", "crp.audit"]
    assert b"rejected after a write" in outs[0].value
    assert rows(worker, "SELECT session_id FROM sessions") == []
    assert rows(worker, "SELECT event_id FROM audit_log WHERE event_id = 'partial-write'") == []
    assert rows(worker, "SELECT next_offset FROM consumer_offsets") == [(1,)]
