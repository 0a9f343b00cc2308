"""Records and synthetic vectors for the retrieval worker's integration tests.

Every fact, query and sub-query carries a synthetic vector (``--embedder precomputed:test-model``),
so each relevance, coverage score and edge is exactly what a test chose. ``run`` drives the real
embedded runtime through ``runtime.replay.replay_records`` and sorts the outputs by topic.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from crp_stream.config import Settings
from crp_stream.processors.base import dt_to_us
from crp_stream.runtime.embedded import open_fabric
from crp_stream.testing import replay as replay_records

MODEL = "test-model"
DIM = 32
DAY_US = 86_400 * 1_000_000
T0 = dt_to_us(datetime(2026, 11, 1, tzinfo=UTC))
Rec = tuple[str, str | None, int, bytes]


# --- vectors ---------------------------------------------------------------------------------------


def unit(parts: dict[int, float]) -> np.ndarray:
    v = np.zeros(DIM)
    for axis, w in parts.items():
        v[axis] += w
    return v / np.linalg.norm(v)


def rel_vec(relevance: float, *others: tuple[int, float]) -> np.ndarray:
    """A unit vector with cosine ``relevance`` to the query axis 0; the rest spread over ``others``
    (the last axis takes whatever norm is left, so the vector is exactly unit length)."""
    v = np.zeros(DIM)
    v[0] = relevance
    for axis, w in others[:-1]:
        v[axis] = w
    left = 1.0 - float(v @ v)
    assert left >= 0.0
    v[others[-1][0]] = math.sqrt(left)
    return v


def from_gram(names: list[str], gram: list[list[float]]) -> dict[str, np.ndarray]:
    """Unit vectors whose pairwise cosines are exactly ``gram`` (which must be PSD)."""
    g = np.asarray(gram, dtype=np.float64)
    w, v = np.linalg.eigh(g)
    assert w.min() > -1e-9, "gram matrix is not positive semi-definite"
    x = v * np.sqrt(np.clip(w, 0.0, None))
    out = np.zeros((len(names), DIM))
    out[:, : len(names)] = x
    return {n: out[i] for i, n in enumerate(names)}


Q = unit({0: 1.0})


# --- records -----------------------------------------------------------------------------------------


def iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record_of(topic: str, key: str, ts: int, value: dict[str, Any]) -> Rec:
    return topic, key, ts, json.dumps(value, separators=(",", ":")).encode()


def fact(text: str, vec: np.ndarray, **kw: Any) -> dict[str, Any]:
    return {"text": text, "embedding": [float(x) for x in vec], **kw}


def doc(
    event_id: str,
    facts: list[dict[str, Any]],
    ts: int = T0,
    *,
    source: str = "docs",
    source_type: str = "official",
    **kw: Any,
) -> Rec:
    value = {
        "event_id": event_id,
        "source": source,
        "source_type": source_type,
        "embedding_model": MODEL,
        "facts": facts,
        **kw,
    }
    return record_of("crp.documents", source, ts, value)


def sub(sid: str, vec: np.ndarray, label: str | None = None) -> dict[str, Any]:
    return {"id": sid, "text": f"sub-query {sid}", "label": label or sid.upper(), "embedding": [float(x) for x in vec]}


def request(
    window: int,
    ts: int,
    *,
    session: str = "s",
    query: np.ndarray = Q,
    subs: list[dict[str, Any]] | None = None,
    model: str | None = MODEL,
    query_text: str = "the task",
    **kw: Any,
) -> Rec:
    value: dict[str, Any] = {
        "request_id": f"{session}-req-{window}-{ts}",
        "session_id": session,
        "window": window,
        "query": {"text": query_text, "embedding": [float(x) for x in query]},
        **kw,
    }
    if subs is not None:
        value["sub_queries"] = subs
    if model is not None:
        value["embedding_model"] = model
    return record_of("crp.window.requests", session, ts, value)


def report(
    window: int,
    ts: int,
    addressed: list[tuple[str, float]],
    *,
    session: str = "s",
    output_text: str = "",
    completeness: float = 0.5,
    **kw: Any,
) -> Rec:
    value = {
        "session_id": session,
        "window": window,
        "addressed": [{"id": i, "depth": d} for i, d in addressed],
        "output_text": output_text,
        "completeness": completeness,
        **kw,
    }
    return record_of("crp.window.reports", session, ts, value)


def settings(**kw: Any) -> Settings:
    return Settings(embedder=f"precomputed:{MODEL}", **kw)


class Run:
    """The output records of one replay, by topic."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.records = [json.loads(line) for line in lines]

    def values(self, topic: str) -> list[dict[str, Any]]:
        return [r["value"] for r in self.records if r["topic"] == topic]

    @property
    def envelopes(self) -> list[dict[str, Any]]:
        return self.values("crp.envelopes")

    @property
    def dead(self) -> list[dict[str, Any]]:
        return self.values("crp.deadletter")

    def audits(self, audit_type: str) -> list[dict[str, Any]]:
        return [a for a in self.values("crp.audit") if a["audit_type"] == audit_type]

    def envelope(self, window: int, branch: int | None = None) -> dict[str, Any]:
        """The envelope that answered window ``window``'s request (not a closing envelope)."""
        found = [
            e for e in self.envelopes if e["window"] == window and e.get("branch") == branch and not e.get("closing")
        ]
        assert len(found) == 1, f"expected one envelope for window {window} branch {branch}, got {len(found)}"
        return found[0]

    def closing(self, window: int) -> dict[str, Any]:
        """The closing envelope of window ``window``: its reports reached a loop exit (SPEC-024 §6)."""
        found = [e for e in self.envelopes if e["window"] == window and e.get("closing")]
        assert len(found) == 1, f"expected one closing envelope for window {window}, got {len(found)}"
        return found[0]


def run(records: list[Rec], tmp_path: Path, **kw: Any) -> Run:
    return Run(replay_records(records, settings(**kw), tmp_path))


def by_text(env: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["text"]: f for f in env["facts"]}


def session_row(tmp_path: Path, session: str = "s", **kw: Any) -> dict[str, Any] | None:
    s = replace(settings(**kw), data_dir=tmp_path, database_url=None, qdrant=None, broker=None)
    fabric = open_fabric(s)
    try:
        with fabric.unit_of_work() as uow:
            return uow.repo.get_session(session)
    finally:
        fabric.close()
