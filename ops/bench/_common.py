"""Shared helpers of the retrieval benchmarks (ops/bench/retrieval_speed.py, retrieval_quality.py).

- ``Pipeline``: ``crp_stream.testing.Pipeline`` on a fresh fabric, one record a millisecond from
  ``T0_US``; a benchmark sends a record, reads the outputs, and sends the next.
- ``EmbeddingCache``: the default embedder's vectors of dataset texts, cached under
  ``~/.cache/crp-stream/bench`` (override: CRP_BENCH_CACHE) so reruns skip embedding.
- ``server_collection`` / ``copy_to_server`` / ``on_server`` / ``drop_collection``: a benchmark's vectors
  on a Qdrant server (``--qdrant URL``, e.g. ``ops/qdrant start``), a new collection per run, dropped after it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from crp_stream import testing
from crp_stream.config import Settings
from crp_stream.fabric.embedders.port import DEFAULT_MODEL_ID
from crp_stream.fabric.vectors.port import VectorItem

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATASETS = REPO.parent / "shared" / "datasets"
CACHE_DIR = Path(os.environ.get("CRP_BENCH_CACHE", Path.home() / ".cache" / "crp-stream" / "bench"))
T0_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z: the log-append time of the first record
# Vectors of the default model, carried in the records: the pipeline sees exactly the vectors the
# default embedder would compute, and the thresholds calibrated for that model id apply.
MINILM_PRECOMPUTED = f"precomputed:{DEFAULT_MODEL_ID}"


def server_collection(url: str, tag: str) -> str:
    """The vector spec of a new collection on the Qdrant server at ``url`` (http(s):// or grpc(s)://)."""
    return f"{url}{'&' if '?' in url else '?'}collection=bench_{tag}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def drop_collection(spec: str) -> None:
    from crp_stream.fabric.vectors.qdrant import QdrantVectorIndex

    with QdrantVectorIndex(url=spec) as index:
        index.delete_all()


def copy_to_server(settings: Settings, spec: str) -> int:
    """Every point of the fabric's embedded vector store (``settings``: a data dir on qdrant-edge)
    written to the collection ``spec`` with the same payloads; returns how many. The rows and edges
    stay where they are, so the fabric is the same with its vectors on the server."""
    from sqlalchemy import text

    from crp_stream.fabric.sql.db import make_engine
    from crp_stream.fabric.vectors.edge import EdgeVectorIndex
    from crp_stream.fabric.vectors.qdrant import QdrantVectorIndex

    engine = make_engine(settings.database)
    with engine.connect() as conn:
        sources = {str(f): str(s) for f, s in conn.execute(text("SELECT fact_id, source FROM facts"))}
    engine.dispose()
    with EdgeVectorIndex(settings.vectors.removeprefix("edge:")) as edge, QdrantVectorIndex(url=spec) as server:
        points = edge._scan()
        for start in range(0, len(points), 2000):
            server.upsert(
                [VectorItem(f, v, st, exp, sources.get(f, "")) for f, v, st, exp in points[start : start + 2000]]
            )
        return server.count()


@contextmanager
def on_server(settings: Settings, url: str | None, tag: str) -> Iterator[Settings]:
    """``settings`` as they are without ``url``; with it, the same fabric with its vectors copied into a
    new collection of the Qdrant server at ``url`` (``copy_to_server``), dropped on the way out."""
    if not url:
        yield settings
        return
    spec = server_collection(url, tag)
    try:
        t0 = time.perf_counter()
        copied = copy_to_server(settings, spec)
        print(f"vectors on the Qdrant server {spec}: {copied:,} points copied in {time.perf_counter() - t0:.0f} s")
        yield replace(settings, qdrant=spec)
    finally:
        drop_collection(spec)


def scratch_root() -> str | None:
    """tmpfs when there is one: the fabric commits once per record and fsync would dominate."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=prefix, dir=scratch_root()) as tmp:
        yield Path(tmp)


def code_version() -> str:
    """The commit measured, and whether crp_stream/ had uncommitted changes (with a digest of them)."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return ""

    head = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    diff = git("diff", "HEAD", "--", "crp_stream")
    if not diff:
        return f"commit {head}"
    digest = hashlib.sha256(diff.encode()).hexdigest()[:12]
    return f"commit {head} + uncommitted crp_stream changes (diff sha256 {digest})"


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def vec(v: np.ndarray) -> list[float]:
    """The float32 values of ``v`` as Python floats (what a JSON request carries)."""
    out: list[float] = np.asarray(v, dtype=np.float32).tolist()
    return out


# --- embeddings ------------------------------------------------------------------------------------


class EmbeddingCache:
    """Default-model vectors of texts, keyed by sha256 of the text, persisted as one .npz per name."""

    def __init__(self, name: str, cache_dir: Path = CACHE_DIR):
        self.path = cache_dir / f"{name}.{DEFAULT_MODEL_ID}.npz"
        self._rows: dict[str, int] = {}
        self._vecs = np.zeros((0, 384), dtype=np.float32)
        self._embedder: Any = None
        self.computed = 0
        if self.path.exists():
            data = np.load(self.path)
            keys = [k.decode() if isinstance(k, bytes) else str(k) for k in data["keys"]]
            self._vecs = data["vecs"].astype(np.float32)
            self._rows = {k: i for i, k in enumerate(keys)}

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self._rows}.items())
        if todo:
            if self._embedder is None:
                from crp_stream.fabric.embedders.port import OnnxMiniLMEmbedder

                self._embedder = OnnxMiniLMEmbedder(batch_size=64)
            for start in range(0, len(todo), 2048):  # saved as it goes: an interrupted run keeps its work
                part = todo[start : start + 2048]
                new = self._embedder.embed([t for _, t in part])
                base = self._vecs.shape[0]
                self._vecs = np.vstack([self._vecs, new]) if base else new
                for i, (k, _) in enumerate(part):
                    self._rows[k] = base + i
                self.computed += len(part)
                self._save()
        if not keys:
            return np.zeros((0, 384), dtype=np.float32)
        return self._vecs[[self._rows[k] for k in keys]]

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(sorted(self._rows, key=self._rows.__getitem__), dtype="S64")
        # one temporary file per process: two benches sharing the cache must not rename each other's
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, keys=keys, vecs=self._vecs)
        tmp.replace(self.path)


# --- the pipeline ----------------------------------------------------------------------------------


class Rejected(RuntimeError):
    pass


class Pipeline(testing.Pipeline):
    """``crp_stream.testing.Pipeline`` on a fresh fabric under ``workdir``, one record a millisecond."""

    def __init__(self, workdir: Path, embedder: str = MINILM_PRECOMPUTED, **settings: Any):
        super().__init__(Settings(data_dir=workdir, embedder=embedder, **settings), clock=testing.ManualClock(T0_US))

    @property
    def now(self) -> int:
        return self.clock.now_us

    @now.setter
    def now(self, ts_us: int) -> None:
        self.clock.now_us = ts_us

    def publish(  # type: ignore[override]  # the benchmarks read decoded (topic, value) pairs
        self, topic: str, key: str | None, value: dict[str, Any], step_us: int = 1_000
    ) -> list[tuple[str, dict[str, Any]]]:
        """Append one record ``step_us`` after the previous, run every handler, return the outputs."""
        outs = super().publish(topic, key, value, ts_us=self.clock.now_us + step_us)
        return [(self.settings.base_topic(o.topic), json.loads(o.value)) for o in outs]

    def request(self, value: dict[str, Any]) -> dict[str, Any]:
        """Publish a window request and return its envelope; a dead-lettered request raises."""
        outs = self.publish("crp.window.requests", value["session_id"], value)
        for topic, v in outs:
            if topic == "crp.envelopes":
                return v
        reasons = [v.get("reason") for t, v in outs if t == "crp.deadletter"]
        raise Rejected(f"window request {value['request_id']} produced no envelope: {reasons}")

    def report(self, value: dict[str, Any]) -> dict[str, Any] | None:
        """Publish a window report; returns the window's closing envelope when the report reached a loop
        exit (SPEC-024 §6: the session then accepts no further window), else None."""
        outs = self.publish("crp.window.reports", value["session_id"], value)
        dead = [v.get("reason") for t, v in outs if t == "crp.deadletter"]
        if dead:
            raise Rejected(f"window report {value['session_id']}/{value['window']} rejected: {dead}")
        return next((v for t, v in outs if t == "crp.envelopes" and v.get("closing")), None)


def document(
    event_id: str,
    source: str,
    facts: Sequence[tuple[str, np.ndarray | None]],
    model: str | None = DEFAULT_MODEL_ID,
    source_type: str = "official",
    title: str | None = None,
) -> dict[str, Any]:
    """A DocumentPublished with explicit facts; vectors are carried when given. With a title, the
    vectors carried must be those of "title: sentence" (what the default embedder would compute)."""
    items = []
    for text, v in facts:
        item: dict[str, Any] = {"text": text}
        if v is not None:
            item["embedding"] = vec(v)
        items.append(item)
    doc: dict[str, Any] = {
        "event_id": event_id,
        "source": source,
        "source_type": source_type,
        "document_id": event_id,
        "facts": items,
    }
    if title is not None:
        doc["title"] = title
    if model is not None and any(v is not None for _, v in facts):
        doc["embedding_model"] = model
    return doc


def window_request(
    request_id: str,
    session_id: str,
    window: int,
    query: str,
    query_vec: np.ndarray | None,
    sub_queries: Sequence[tuple[str, str, np.ndarray | None]] | None,
    budget: int,
    graph: bool,
    max_windows: int = 5,
    model: str | None = DEFAULT_MODEL_ID,
) -> dict[str, Any]:
    q: dict[str, Any] = {"text": query}
    if query_vec is not None:
        q["embedding"] = vec(query_vec)
    req: dict[str, Any] = {
        "request_id": request_id,
        "session_id": session_id,
        "window": window,
        "query": q,
        "fact_budget": budget,
        "max_windows": max_windows,
        "policy": {"graph_retrieval": "on" if graph else "off"},
    }
    if sub_queries is not None:
        subs = []
        for sid, text, v in sub_queries:
            s: dict[str, Any] = {"id": sid, "text": text}
            if v is not None:
                s["embedding"] = vec(v)
            subs.append(s)
        req["sub_queries"] = subs
    if query_vec is not None and model is not None:
        req["embedding_model"] = model
    return req
