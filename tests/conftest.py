"""Shared fixtures. Backends that need a server read their address from the environment and FAIL
(never skip) when it is missing: ``ops/test`` and ``.ci/run`` start them."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

_counter = itertools.count()


def require_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: start the services with ops/test (or ops/postgres start, ops/kafka start)",
                    pytrace=False)
    return value


def fresh_postgres_url() -> str:
    """A new, empty database on the test PostgreSQL server, so tests never share state."""
    from sqlalchemy import create_engine, text

    base = require_env("CRP_TEST_POSTGRES_URL")
    name = f"crp_t_{os.getpid()}_{next(_counter)}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE template0'))
    admin.dispose()
    return base.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Every store contract runs on both relational backends."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fabric.sqlite'}"
    else:
        yield fresh_postgres_url()
