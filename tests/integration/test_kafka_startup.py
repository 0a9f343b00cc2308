"""A worker started while the broker and PostgreSQL are down waits, says so on /health, and
starts when they come back (it used to give up after 60 s)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.kafka import WorkerProcess, unique_prefix
from tests.support.services import Cluster, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.postgres, pytest.mark.heavy]


def test_worker_started_with_broker_and_database_down_waits_then_starts(
    tmp_path: Path, cluster: tuple[Cluster, str], private_broker: Callable[[str], None]
) -> None:
    pg, url = cluster
    pg.stop()
    kafka = private_broker  # not started yet
    worker = WorkerProcess(tmp_path, unique_prefix("boot"), url, name="boot").start()
    try:
        wait_until(
            "/health: degraded, waiting for broker and database",
            lambda: set((worker.health() or {}).get("waiting_for", {})) == {"broker", "database"},
            60.0,
            0.3,
        )
        assert worker.health()["status"] == "degraded"  # type: ignore[index]
        pg.start()
        wait_until(
            "/health: waiting for the broker only",
            lambda: set((worker.health() or {}).get("waiting_for", {})) == {"broker"},
            60.0,
            0.3,
        )
        assert worker.alive()
        kafka("start")
        try:
            wait_until(
                "the worker to start and take partitions",
                lambda: (worker.health() or {}).get("status") == "ok" and bool(worker.health()["assigned"]),  # type: ignore[index]
                180.0,
                0.5,
            )
        finally:
            worker.stop()
            kafka("stop")
        log = worker.log_path.read_text(errors="replace")
        assert "waiting before start" in log and "starting" in log
    finally:
        if worker.alive():
            worker.stop()
