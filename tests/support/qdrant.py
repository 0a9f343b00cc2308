"""The Qdrant server the suite needs (``ops/qdrant``). A test that needs it FAILS without it, never skips:
``ops/test`` and ``.ci/run`` start it and export its REST and gRPC addresses (``ops/env.sh``).

Every test works on a collection of its own (``?collection=`` of the vector spec), so tests never share
state; a test that restarts or kills the server runs a private one (``QdrantServer``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from crp_stream.fabric.vectors.qdrant import QdrantVectorIndex
from tests.support.services import OPS, free_port, require_env

TRANSPORTS = ("http", "grpc")


def server_url(transport: str = "http") -> str:
    """The suite's server: ``http://H:P`` (CRP_TEST_QDRANT) or ``grpc://H:P`` (CRP_TEST_QDRANT_GRPC)."""
    if transport == "grpc":
        return require_env("CRP_TEST_QDRANT_GRPC")
    return require_env("CRP_TEST_QDRANT")


def collection_name(tag: str = "t") -> str:
    return f"{tag}_{os.getpid()}_{uuid.uuid4().hex[:10]}"


def with_collection(url: str, collection: str) -> str:
    return f"{url.rstrip('/')}?collection={collection}"


def fresh_spec(transport: str = "http", tag: str = "t") -> str:
    """A vector spec (``--qdrant``) on the suite's server, on a new collection."""
    return with_collection(server_url(transport), collection_name(tag))


def drop(spec: str) -> None:
    """Delete the spec's collection (a test's cleanup; the server keeps nothing between tests)."""
    with QdrantVectorIndex(url=spec) as index:
        index.delete_all()


def _alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet is not: its ports are closed)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class QdrantServer:
    """A private Qdrant server driven through ``ops/qdrant`` on free ports, storage under ``run_dir``."""

    def __init__(self, run_dir: Path):
        self.port = free_port()
        self.grpc_port = next(p for p in iter(free_port, None) if p != self.port)
        self.env = {
            **os.environ,
            "CRP_QDRANT_PORT": str(self.port),
            "CRP_QDRANT_GRPC_PORT": str(self.grpc_port),
            "CRP_QDRANT_RUN": str(run_dir),
        }
        self.started = False

    def url(self, transport: str = "http") -> str:
        port = self.grpc_port if transport == "grpc" else self.port
        return f"{transport}://127.0.0.1:{port}"

    def _ops(self, action: str) -> str:
        done = subprocess.run(
            ["bash", str(OPS / "qdrant"), action], env=self.env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"ops/qdrant {action}: {done.stderr.strip()}"
        return done.stdout.strip()

    def start(self) -> str:
        self.started = True
        return self._ops("start")

    def stop(self) -> None:
        self._ops("stop")

    def pid(self) -> int:
        return int(self._ops("pid"))

    def kill(self) -> None:
        """``kill -9`` the server, and wait until it is gone (its ports closed)."""
        pid = self.pid()
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(pid), f"qdrant pid {pid} survived kill -9"

    def close(self) -> None:
        if self.started:
            self._ops("stop")


__all__ = [
    "TRANSPORTS",
    "QdrantServer",
    "collection_name",
    "drop",
    "fresh_spec",
    "server_url",
    "with_collection",
]
