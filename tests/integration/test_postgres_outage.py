"""PostgreSQL goes away mid-stream: the worker retries with backoff, says so in its log, and
loses nothing. The outage is real at the network level: the worker reaches the test server through a
TCP proxy that drops every connection and refuses new ones for a while (the shared server itself is
never restarted, other tests use it)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from crp_stream.runtime.projections import differences
from tests.support.crash import build_scenario, discover_embedded, embedded_snapshot, run_embedded, seed_log
from tests.support.crash import sqlite_log_size as log_size
from tests.support.services import fresh_postgres_url

pytestmark = pytest.mark.postgres


class Proxy:
    """127.0.0.1:<port> -> target; ``cut()`` drops every connection and refuses new ones until ``restore()``."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.down = False
        self.socks: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.down = True
        with self.lock:
            for s in self.socks:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self.socks.clear()

    def restore(self) -> None:
        self.down = False

    def close(self) -> None:
        self.server.close()
        self.cut()


def test_postgres_outage_mid_stream_loses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    scenario = build_scenario(5, discover_embedded(tmp_path / "scenario"))[:150]
    ref_url = fresh_postgres_url()
    seed_log(tmp_path / "ref", scenario)
    run_embedded(tmp_path / "ref", ref_url)
    want = embedded_snapshot(tmp_path / "ref", ref_url)

    url = make_url(fresh_postgres_url())
    proxy = Proxy(url.host or "127.0.0.1", url.port or 5432)
    proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    data = tmp_path / "outage"
    seed_log(data, scenario)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            run_embedded(data, proxied)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    with caplog.at_level(logging.WARNING, "crp_stream.runtime"):
        thread = threading.Thread(target=worker)
        thread.start()
        size = log_size(data / "log.sqlite")
        deadline = time.monotonic() + 120
        while size() < len(scenario) + 40 and time.monotonic() < deadline:
            time.sleep(0.01)
        proxy.cut()  # mid-stream: the worker is inside a batch
        time.sleep(2.0)
        grown_while_down = size()
        time.sleep(0.5)
        assert size() == grown_while_down or not thread.is_alive()
        proxy.restore()
        thread.join(300)
    proxy.close()
    assert not thread.is_alive() and not errors, errors
    retries = [r.getMessage() for r in caplog.records if "transient error, retrying" in r.getMessage()]
    assert retries and "OperationalError" in retries[0]
    got = embedded_snapshot(data, url.render_as_string(hide_password=False))
    diffs = differences(want, got)
    assert not diffs, "\n".join(diffs)
