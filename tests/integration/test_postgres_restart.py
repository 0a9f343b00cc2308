"""A real PostgreSQL restart mid-stream: the worker retries with backoff, says so in its log,
and loses nothing. The server is a dedicated cluster started by ``ops/postgres`` on a free port (the
shared test server is never restarted: other tests use it); ``ops/postgres stop`` is a fast shutdown,
which terminates the worker's connections, then the cluster starts again on the same data."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from crp_stream.runtime.projections import differences
from tests.support.crash import build_scenario, discover_embedded, embedded_snapshot, run_embedded, seed_log
from tests.support.crash import sqlite_log_size as log_size
from tests.support.services import Cluster, fresh_postgres_url

pytestmark = [pytest.mark.postgres, pytest.mark.heavy]


def test_postgres_restart_mid_stream_loses_nothing(
    cluster: tuple[Cluster, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pg, url = cluster
    scenario = build_scenario(7, discover_embedded(tmp_path / "scenario"))[:150]
    ref_url = fresh_postgres_url()
    seed_log(tmp_path / "ref", scenario)
    run_embedded(tmp_path / "ref", ref_url)
    want = embedded_snapshot(tmp_path / "ref", ref_url)

    data = tmp_path / "restart"
    seed_log(data, scenario)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            run_embedded(data, url)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    with caplog.at_level(logging.WARNING, "crp_stream.runtime"):
        thread = threading.Thread(target=worker)
        thread.start()
        size = log_size(data / "log.sqlite")
        deadline = time.monotonic() + 120
        while size() < len(scenario) + 40 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert thread.is_alive(), "the worker finished before the restart: the scenario is too short"
        pg.stop()  # mid-stream: the worker's connections are terminated
        time.sleep(2.0)
        grown_while_down = size()
        time.sleep(0.5)
        assert size() == grown_while_down  # nothing is acknowledged while the database is down
        assert thread.is_alive() and not errors, errors
        pg.start()
        thread.join(300)
    assert not thread.is_alive() and not errors, errors
    retries = [r.getMessage() for r in caplog.records if "transient error, retrying" in r.getMessage()]
    assert retries and "OperationalError" in retries[0], retries[:3]
    engine = create_engine(url)
    with engine.connect() as conn:  # the same cluster, restarted: the fabric survived in it
        assert conn.execute(text("SELECT count(*) FROM facts")).scalar_one() == len(want["facts"])
    engine.dispose()
    diffs = differences(want, embedded_snapshot(data, url))
    assert not diffs, "\n".join(diffs)
