"""The real services the suite needs. A missing one FAILS the test, never skips it: ``ops/test`` and
``.ci/run`` start them and export their addresses (``ops/env.sh``)."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

OPS = Path(__file__).resolve().parents[2] / "ops"
_counter = itertools.count()


def require_env(name: str) -> str:
    """The value of ``name``, or a failed test that says how to provide it."""
    value = os.environ.get(name, "").strip()
    if not value:
        pytest.fail(
            f"{name} is not set: this test needs the real service. Run ops/test, or start it with "
            f"ops/postgres start / ops/kafka start / ops/qdrant start and `. ops/env.sh`.",
            pytrace=False,
        )
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 60.0, interval: float = 0.05) -> None:
    """Poll ``condition`` until it holds; fail the test naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}", pytrace=False)
        time.sleep(interval)


class Cluster:
    """A private PostgreSQL cluster driven through ``ops/postgres`` (for restart tests)."""

    def __init__(self, port: int):
        self.env = {**os.environ, "CRP_PG_PORT": str(port)}

    def _ops(self, action: str) -> str:
        done = subprocess.run(
            ["bash", str(OPS / "postgres"), action], env=self.env, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, f"ops/postgres {action}: {done.stderr.strip()}"
        return done.stdout.strip()

    def start(self) -> str:
        return self._ops("start")

    def stop(self) -> None:
        self._ops("stop")

    def reset(self) -> None:
        self._ops("reset")
