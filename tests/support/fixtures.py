"""The suite's shared fixtures (``pytest_plugins`` in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.services import Cluster, free_port, fresh_postgres_url, require_env


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
