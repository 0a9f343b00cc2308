"""A real OpenAI-compatible embeddings endpoint on loopback: ``POST /v1/embeddings`` answered with the
default model's vectors (``make_embedder("default")``), a bearer token checked, and failures on demand.

The stdlib ``ThreadingHTTPServer`` in a thread: the embedder under test talks HTTP to it over a socket.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from crp_stream.fabric.embedders.port import Embedder, make_embedder

_MODEL: list[Embedder] = []
_MODEL_LOCK = threading.Lock()


def default_model() -> Embedder:
    with _MODEL_LOCK:
        if not _MODEL:
            _MODEL.append(make_embedder("default"))
        return _MODEL[0]


@dataclass
class EmbedServer:
    token: str | None = "sk-test-0123456789"
    model: str = "all-minilm"
    fail_first: list[int] = field(default_factory=list)  # statuses answered before any success, in order
    retry_after: str | None = None  # the Retry-After header of those failures
    batches: list[int] = field(default_factory=list)  # texts per successful request
    statuses: list[int] = field(default_factory=list)  # every answer's status, in order
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], dict[str, Any]]:
        if handler.path != "/v1/embeddings":
            return 404, {}, {"error": {"message": f"no route {handler.path}"}}
        if self.token is not None and handler.headers.get("Authorization") != f"Bearer {self.token}":
            return 401, {}, {"error": {"message": "Incorrect API key provided"}}
        with self._lock:
            if self.fail_first:
                status = self.fail_first.pop(0)
                headers = {"Retry-After": self.retry_after} if self.retry_after else {}
                return status, headers, {"error": {"message": "try again later"}}
        body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
        if body.get("model") != self.model:
            return 404, {}, {"error": {"message": f"model {body.get('model')!r} not found"}}
        texts = body["input"]
        vectors = default_model().embed(texts)
        with self._lock:
            self.batches.append(len(texts))
        # the items in reverse order: a client must place them by "index"
        data = [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in vectors[i]]} for i in range(len(texts))
        ]
        return 200, {}, {"object": "list", "data": data[::-1], "model": self.model}


def _handler(server: EmbedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            status, headers, payload = server.answer(self)
            with server._lock:
                server.statuses.append(status)
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@pytest.fixture
def embed_server() -> Iterator[EmbedServer]:
    state = EmbedServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, name="embed-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
