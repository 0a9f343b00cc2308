"""The embedded runtime applies window requests as micro-batches without a savepoint per record
(``RetrievalHandler.handle_batch``): a rejection before any write needs nothing undone, and a
handler that rejects after a write after all fails its batch, which is redone record by record, so
the write is undone, the failing record is dead-lettered alone and the others keep their effects."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from crp_stream.events import Rejected
from crp_stream.fabric.sql.records.operator import OperatorRecords
from crp_stream.processors.retrieval import RetrievalHandler
from tests.integration.test_recovery import World, doc, request, vec


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The savepoints opened, by the handler group applying its record then."""
    opened: list[str] = []
    real = OperatorRecords.savepoint

    @contextmanager
    def counting(self: OperatorRecords) -> Iterator[None]:
        opened.append("savepoint")
        with real(self):
            yield

    monkeypatch.setattr(OperatorRecords, "savepoint", counting)
    return opened


def _world(tmp_path: Path) -> World:
    w = World(tmp_path / "w")
    w.publish([doc("d1", [("The port is 8080.", vec(1)), ("The host is db1.", vec(1, 0.2))])])
    w.runtime().run_until_idle()
    return w


def _late_window(session: str) -> tuple[str, str | None, int, bytes]:
    topic, key, ts, raw = request(session, vec(1))
    return topic, key, ts, json.dumps({**json.loads(raw), "window": 3}).encode()


def test_window_requests_open_no_savepoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = _world(tmp_path)
    try:
        opened = _counted(monkeypatch)
        w.publish([request("s1", vec(1)), _late_window("s2"), request("s3", vec(1, 0.2))])
        w.runtime().run_until_idle()
        envelopes = [json.loads(r.value) for r in w.log.iter_topic("crp.envelopes")]
        dead = [json.loads(r.value) for r in w.log.iter_topic("crp.deadletter")]
        assert [e["session_id"] for e in envelopes] == ["s1", "s3"]
        assert len(dead) == 1 and "session 's2' is unknown" in dead[0]["reason"]
        assert opened == []
    finally:
        w.close()


def test_a_rejection_after_a_write_is_redone_in_a_savepoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    w = _world(tmp_path)
    real = RetrievalHandler._serve

    def writes_then_rejects(self: RetrievalHandler, plan: Any, uow: Any, out: Any) -> None:
        if plan.ev.session_id != "s2":
            real(self, plan, uow, out)
            return
        uow.repo.append_audit("partial-write", "EVENT_REJECTED", 1, "k", {})
        raise Rejected("rejected after a write")

    try:
        monkeypatch.setattr(RetrievalHandler, "_serve", writes_then_rejects)
        w.publish([request("s1", vec(1)), request("s2", vec(1)), request("s3", vec(1, 0.2))])
        with caplog.at_level(logging.WARNING):
            w.runtime().run_until_idle()
        assert "isolating its records" in caplog.text
        envelopes = [json.loads(r.value) for r in w.log.iter_topic("crp.envelopes")]
        dead = [json.loads(r.value) for r in w.log.iter_topic("crp.deadletter")]
        assert [e["session_id"] for e in envelopes] == ["s1", "s3"]
        assert len(dead) == 1 and "rejected after a write" in dead[0]["reason"]
        with w.fabric.unit_of_work() as uow:
            assert uow.repo.get_session("s1") is not None and uow.repo.get_session("s3") is not None
            assert uow.repo.get_session("s2") is None
        audit_ids = [json.loads(r.value).get("event_id") for r in w.log.iter_topic("crp.audit")]
        assert "partial-write" not in audit_ids
        rows = w.fabric.engine.connect().exec_driver_sql("SELECT event_id FROM audit_log").fetchall()
        assert ("partial-write",) not in rows
    finally:
        w.close()
