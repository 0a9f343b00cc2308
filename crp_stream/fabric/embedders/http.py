"""``--embedder openai:BASE_URL#MODEL``: any OpenAI-compatible embeddings endpoint (OpenAI, Ollama, vLLM,
Hugging Face TEI, LiteLLM ...): ``POST {BASE_URL}/embeddings`` with ``{"model": MODEL, "input": [...]}``,
answered by ``{"data": [{"index": i, "embedding": [...]}]}``.

- The fabric's model id is ``openai:MODEL``: the base URL is where the model runs, not which vector space
  it makes, so moving the endpoint keeps the fabric; another model is another space (SPEC-024 §2.5).
- Texts go in requests of ``batch`` texts, at most ``concurrency`` of them in flight. A 429 or a 5xx is
  retried with exponential backoff (``Retry-After`` wins when the server sends one), ``retries`` times.
- The key comes from ``CRP_EMBEDDER_API_KEY`` and is sent as ``Authorization: Bearer``; it is
  registered with ``redaction`` so that no log line or error shows it, and never put in a message.
- ``load()`` (start-up, also the first ``dim``) sends one probe: the dimension comes from its answer, and
  an unreachable endpoint, a refused key or a wrong model is a ``ConfigError`` of one line. After that,
  an endpoint that fails is ``EmbedderUnavailable`` (a ``ConnectionError``): the runtimes retry it as
  transient (runtime/transient.py) rather than dead-letter the records. A 4xx about the input (400,
  413, 422) is an ``EmbedderError``: the runtime isolates the record that caused it.
"""

from __future__ import annotations

import email.utils
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from crp_stream import redaction
from crp_stream.config import ConfigError
from crp_stream.fabric.embedders.port import Embedder, EmbedderError, _check_texts, _normalise_rows

API_KEY_ENV = "CRP_EMBEDDER_API_KEY"
PROBE_TEXT = "dimension probe"
MAX_BACKOFF_S = 30.0
_INPUT_STATUSES = (400, 413, 422)  # the request's texts were refused: about a record, not the endpoint


class EmbedderUnavailable(ConnectionError):
    """The endpoint is down, overloaded or refusing us mid-run: transient, the runtime retries."""


@dataclass(frozen=True)
class HttpOptions:
    batch: int = 64  # texts a request
    concurrency: int = 4  # requests in flight
    timeout: float = 30.0  # seconds a request
    retries: int = 5  # further attempts after a 429, a 5xx or a connection error
    backoff: float = 0.5  # seconds before the first retry; doubles each time, at most MAX_BACKOFF_S


def parse_openai_spec(name: str) -> tuple[str, str]:
    """``openai:BASE_URL#MODEL`` -> (base URL without a trailing /, model). Raises EmbedderError."""
    rest = name.removeprefix("openai:")
    base, sep, model = rest.rpartition("#")
    hint = "e.g. openai:http://127.0.0.1:8080/v1#all-minilm"
    if not sep or not base or not model.strip():
        raise EmbedderError(f"embedder {name!r}: openai needs BASE_URL#MODEL, {hint}")
    if not base.startswith(("http://", "https://")):
        raise EmbedderError(f"embedder {name!r}: BASE_URL must start with http:// or https://, {hint}")
    if any(c.isspace() for c in model):
        raise EmbedderError(f"embedder {name!r}: MODEL must not contain spaces")
    try:
        httpx.URL(base)
    except httpx.InvalidURL as exc:
        raise EmbedderError(f"embedder {name!r}: BASE_URL is not a URL ({exc})") from None
    return base.rstrip("/"), model.strip()


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class OpenAIEmbedder(Embedder):
    """An OpenAI-compatible ``/embeddings`` endpoint. Thread-safe (httpx.Client is)."""

    costly = True  # network round trips: worth running ahead of the pipeline (EmbeddingPrefetch)

    def __init__(
        self,
        base_url: str,
        model: str,
        options: HttpOptions | None = None,
        api_key: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.options = options or HttpOptions()
        o = self.options
        if o.batch < 1 or o.concurrency < 1 or o.retries < 0 or not (o.timeout > 0 and math.isfinite(o.timeout)):
            raise EmbedderError(f"openai embedder: bad options {o}")
        self.base_url = base_url
        self.model = model
        self.model_id = f"openai:{model}"
        self.url = f"{base_url}/embeddings"
        key = os.environ.get(API_KEY_ENV) if api_key is None else api_key
        headers = {"Content-Type": "application/json"}
        if key:
            redaction.register([key])
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=o.timeout,
            limits=httpx.Limits(max_connections=o.concurrency, max_keepalive_connections=o.concurrency),
        )
        self._pool = ThreadPoolExecutor(o.concurrency, thread_name_prefix="crp-embed-http")
        self._sleep = sleep
        self._dim: int | None = None
        self._lock = threading.Lock()
        self.requests = 0  # requests sent, retries included (tests and metrics read it)

    @property
    def dim(self) -> int:  # type: ignore[override]  # the endpoint's answer fixes it
        if self._dim is None:
            self.load()
        assert self._dim is not None
        return self._dim

    def load(self) -> None:
        """Probe the endpoint once: its dimension, and a clear start-up error if it cannot serve us."""
        if self._dim is not None:
            return
        try:
            row = self._request([PROBE_TEXT])
        except (EmbedderUnavailable, EmbedderError) as exc:
            raise ConfigError(f"embedder {self.model_id} at {self.url}: {exc}") from None
        with self._lock:
            if self._dim is None:
                self._dim = int(row.shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        b = self.options.batch
        chunks = [items[i : i + b] for i in range(0, len(items), b)]
        # one request on the caller's thread; more, at most `concurrency` in flight on the pool
        parts = [self._request(chunks[0])] if len(chunks) == 1 else list(self._pool.map(self._request, chunks))
        out = np.concatenate(parts, axis=0)
        with self._lock:
            if self._dim is None:
                self._dim = int(out.shape[1])
        if out.shape[1] != self._dim:
            raise EmbedderUnavailable(
                f"{self.model_id}: the endpoint answered {out.shape[1]} dimensions, not {self._dim}"
            )
        return out

    def _request(self, texts: list[str]) -> np.ndarray:
        """One request, retried on 429, 5xx and connection errors; (len(texts), dim) unit rows."""
        body = {"model": self.model, "input": texts}
        delay = self.options.backoff
        for attempt in range(self.options.retries + 1):
            last = attempt == self.options.retries
            wait: float | None = None
            self.requests += 1
            try:
                resp = self._client.post(self.url, json=body)
            except httpx.TimeoutException:
                problem = f"no answer within {self.options.timeout:g} s"
            except httpx.TransportError as exc:
                problem = f"unreachable ({type(exc).__name__}: {redaction.redact(str(exc))[:200]})"
            else:
                status = resp.status_code
                if status == 200:
                    return self._rows(resp, len(texts))
                problem = f"HTTP {status}{_detail(resp)}"
                if status in (401, 403):
                    raise EmbedderUnavailable(f"the endpoint refused the key ({problem}; set {API_KEY_ENV})")
                if status in _INPUT_STATUSES:
                    raise EmbedderError(f"the endpoint refused the texts ({problem})")
                if status != 429 and status < 500:
                    raise EmbedderUnavailable(f"the endpoint answered {problem}")
                wait = retry_after_s(resp.headers.get("Retry-After"))
            if last:
                raise EmbedderUnavailable(f"{problem}, after {self.options.retries + 1} attempts")
            self._sleep(min(MAX_BACKOFF_S, wait if wait is not None else delay))
            delay *= 2
        raise AssertionError("unreachable")  # the loop returns or raises

    def _rows(self, resp: httpx.Response, n: int) -> np.ndarray:
        try:
            data = resp.json()["data"]
            rows: list[Any] = [None] * n
            for item in data:
                rows[int(item["index"])] = item["embedding"]
            arr = np.asarray(rows, dtype=np.float64)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise EmbedderUnavailable(f"the answer is not an embeddings response ({type(exc).__name__})") from None
        if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] == 0 or not np.isfinite(arr).all():
            raise EmbedderUnavailable(f"the answer holds no usable vectors for {n} texts (shape {arr.shape})")
        return unit_rows(arr)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()


def unit_rows(arr: np.ndarray) -> np.ndarray:
    """float32 unit rows. A row already of unit norm (within 1e-6) is kept bit for bit: an endpoint that
    serves normalised vectors gives exactly those (re-dividing by 0.99999994 would move the last bits)."""
    f32 = arr.astype(np.float32)
    norms = np.linalg.norm(arr, axis=1)
    off = np.abs(norms - 1.0) > 1e-6
    if off.any():
        f32[off] = _normalise_rows(arr[off])
    return f32


def _detail(resp: httpx.Response) -> str:
    text = " ".join(resp.text.split())[:160]
    return f": {redaction.redact(text)}" if text else ""


__all__ = ["API_KEY_ENV", "EmbedderUnavailable", "HttpOptions", "OpenAIEmbedder", "parse_openai_spec", "retry_after_s"]
