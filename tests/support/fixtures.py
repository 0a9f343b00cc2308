"""The suite's shared fixtures (``pytest_plugins`` in tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.qdrant import QdrantServer
from tests.support.services import OPS, Cluster, free_port, fresh_postgres_url, require_env


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Every store contract runs on both relational backends."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fabric.sqlite'}"
    else:
        yield fresh_postgres_url()


@pytest.fixture
def postgres_url() -> str:
    """SQLAlchemy URL of the test PostgreSQL (CRP_TEST_POSTGRES_URL)."""
    return require_env("CRP_TEST_POSTGRES_URL")


@pytest.fixture
def kafka_bootstrap() -> str:
    """``HOST:PORT`` of the test Kafka broker (CRP_TEST_KAFKA, a ``kafka://`` prefix is dropped)."""
    return require_env("CRP_TEST_KAFKA").removeprefix("kafka://")


@pytest.fixture
def cluster() -> Iterator[tuple[Cluster, str]]:
    """A private PostgreSQL cluster on a free port, reset afterwards (the shared server is never restarted)."""
    fresh_postgres_url()  # the suite's server must be configured: fail, never skip, without it
    pg = Cluster(free_port())
    url = pg.start()
    try:
        yield pg, url
    finally:
        pg.reset()


@pytest.fixture
def private_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """A Kafka broker of this test's own on free ports, not started: ``ops("start")`` / ``ops("stop")``.
    CRP_TEST_KAFKA points at it; it is stopped at the end."""
    require_env("CRP_TEST_KAFKA")  # the suite's broker must be configured: fail, never skip
    port = free_port()
    controller = next(p for p in iter(free_port, None) if p != port)
    env = {
        **os.environ,
        "CRP_KAFKA_PORT": str(port),
        "CRP_KAFKA_CONTROLLER_PORT": str(controller),
        "CRP_KAFKA_RUN": str(tmp_path / "kafka"),
        "CRP_PYTHON": sys.executable,
    }
    started: list[bool] = []

    def ops(command: str) -> None:
        done = subprocess.run([str(OPS / "kafka"), command], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"ops/kafka {command}: {done.stdout}{done.stderr}"
        started.append(command == "start")

    monkeypatch.setenv("CRP_TEST_KAFKA", f"127.0.0.1:{port}")
    try:
        yield ops
    finally:
        if any(started):
            subprocess.run([str(OPS / "kafka"), "stop"], env=env, capture_output=True, timeout=300)


@pytest.fixture
def private_qdrant(tmp_path: Path) -> Iterator[QdrantServer]:
    """A Qdrant server of this test's own on free ports (storage under tmp_path), not started; stopped
    at the end. For tests that kill or restart it (the suite's server is never restarted)."""
    require_env("CRP_TEST_QDRANT")  # the suite's server must be configured: fail, never skip
    server = QdrantServer(tmp_path / "qdrant")
    try:
        yield server
    finally:
        server.close()
