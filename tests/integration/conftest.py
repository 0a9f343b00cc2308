"""Fixtures for the integration tests: the addresses of the real services.

The services come from ``ops/postgres`` and ``ops/kafka`` (``ops/test-integration``, ``ops/test`` and
``.ci/run`` start them and export the variables, see ``ops/env.sh``). A missing address FAILS the test,
never skips it: a green run must mean the real services were used.
"""

from __future__ import annotations

import os

import pytest


def require_env(name: str) -> str:
    """The value of ``name``, or a failed test that says how to provide it."""
    value = os.environ.get(name, "").strip()
    if not value:
        pytest.fail(
            f"{name} is not set: this test needs the real service. Run ops/test-integration, or start it with "
            f"ops/postgres start / ops/kafka start and `. ops/env.sh`.",
            pytrace=False,
        )
    return value


@pytest.fixture
def postgres_url() -> str:
    """SQLAlchemy URL of the test PostgreSQL (CRP_TEST_POSTGRES_URL)."""
    return require_env("CRP_TEST_POSTGRES_URL")


@pytest.fixture
def kafka_bootstrap() -> str:
    """``HOST:PORT`` of the test Kafka broker (CRP_TEST_KAFKA, a ``kafka://`` prefix is dropped)."""
    return require_env("CRP_TEST_KAFKA").removeprefix("kafka://")
