"""Session state of the retrieval worker: Coverage Set, Residual Set, n-gram blacklist, windows.

Kept in the relational store (SPEC-024 §3, SPEC-007 session token) as canonical JSON, so a restarted
worker continues the session and replays reproduce it byte for byte. Embeddings are stored as base64
of their float32 bytes (little-endian): the same values as a list of floats, which states written
before are and still load as, at a fraction of the JSON encoding and decoding time.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crp_stream.core import memo
from crp_stream.core.tenants import DEFAULT_TENANT
from crp_stream.fabric.sql.rows import SessionRow

Embedding = str | list[float]  # base64 of float32 little-endian; a float list in older states


def vec_to_json(v: np.ndarray) -> str:
    return base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii")


def vec_from_json(v: Embedding) -> np.ndarray:
    """The embedding as float32; from base64 text a shared read-only array (``_decoded``)."""
    if isinstance(v, str):
        return _decoded(v)
    return np.asarray(v, dtype=np.float32)


@memo.text_memo(0.02)  # ~1,000 entries of ~3.5 KB: a session's sub-queries and coverage
def _decoded(text: str) -> np.ndarray:
    """A stored embedding's floats: the same sub-queries and Coverage Set are decoded again in
    every window of a session (gather, the fan-out, ``coverage_arrays``). Read only, as it is shared."""
    v = np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)
    v.flags.writeable = False
    return v


@dataclass
class SubQueryState:
    id: str
    text: str
    label: str
    embedding: Embedding
    expected_words: int | None = None  # SubQuery.expected_words: words expected (SPEC-024 §3.2)


@dataclass
class CoverageEntry:
    """SPEC-024 §2.1: an addressed sub-query's embedding, its depth weight and window number."""

    id: str
    embedding: Embedding
    depth: float
    window: int
    branch: int | None = None


@dataclass
class WindowState:
    request_id: str
    branches: int
    partitions: list[list[str]]
    fact_ids: list[list[str]]
    reported: list[int] = field(default_factory=list)
    # per fan-out branch (key: branch index as text), held until fan-in
    completeness: dict[str, float] = field(default_factory=dict)
    safety: dict[str, float] = field(default_factory=dict)
    # per branch: its Coverage Set additions, addressed ids and output, merged only at fan-in
    # (SPEC-027 §1.5: no branch's additions are visible before every branch reported)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    mean_ratio: float = 1.0  # SPEC-024 §6 Exit 3 over the window's envelopes
    min_relevance: float | None = None  # the relevance gate the window ran with (marginal items)

    @property
    def fanned_in(self) -> bool:
        return len(self.reported) == self.branches

    def fan_in(self) -> tuple[float, float | None]:
        """SPEC-027 §1.6 fan-in: the window's completeness is its branches' completeness weighted by
        partition size (each branch answers for its own sub-queries); the safety budget is the lowest
        any branch reported (a safety condition is never averaged away), None if none reported one.
        """
        sizes = [max(len(p), 1) for p in self.partitions]
        total = sum(sizes[b] * self.completeness[str(b)] for b in range(self.branches))
        safety = min(self.safety.values()) if self.safety else None
        return total / sum(sizes), safety


@dataclass
class SessionState:
    session_id: str
    embedding_model: str
    max_windows: int
    sub_queries: list[SubQueryState]
    residual: list[str]
    coverage: list[CoverageEntry] = field(default_factory=list)
    blacklist: list[str] = field(default_factory=list)
    windows: dict[str, WindowState] = field(default_factory=dict)
    requested: int = 0  # last window requested
    reported: int = 0  # window_count: windows whose report arrived
    completeness: float = 0.0
    safety_budget: float | None = None
    status: str = "in-progress"  # a terminal status (SPEC-024 §6) ends the session's window loop
    ended_window: int | None = None  # the window that reached it
    # SPEC-024 §4.3: the backward summary ("Previously covered: ..."), kept, not sent by default
    backward_summary: str = ""
    tenant: str = DEFAULT_TENANT  # a session is one tenant's: its windows read that tenant's facts only

    def sub_query(self, sid: str) -> SubQueryState | None:
        return next((s for s in self.sub_queries if s.id == sid), None)

    def residual_states(self) -> list[SubQueryState]:
        by_id = {s.id: s for s in self.sub_queries}
        return [by_id[r] for r in self.residual if r in by_id]

    def to_json(self) -> dict[str, Any]:
        return {
            "sub_queries": [vars(s) for s in self.sub_queries],
            "residual": list(self.residual),
            "coverage": [vars(c) for c in self.coverage],
            "blacklist": sorted(self.blacklist),
            "windows": {k: vars(w) for k, w in sorted(self.windows.items(), key=lambda kv: int(kv[0]))},
            "requested": self.requested,
            "completeness": self.completeness,
            "safety_budget": self.safety_budget,
            "status": self.status,
            "ended_window": self.ended_window,
            "backward_summary": self.backward_summary,
        } | ({} if self.tenant == DEFAULT_TENANT else {"tenant": self.tenant})

    @classmethod
    def from_row(cls, row: SessionRow) -> SessionState:
        st = row["state"]
        return cls(
            session_id=row["session_id"],
            embedding_model=row["embedding_model"],
            max_windows=row["max_windows"],
            sub_queries=[SubQueryState(**s) for s in st["sub_queries"]],
            residual=list(st["residual"]),
            coverage=[CoverageEntry(**c) for c in st["coverage"]],
            blacklist=list(st["blacklist"]),
            windows={k: WindowState(**w) for k, w in st["windows"].items()},
            requested=int(st["requested"]),
            reported=int(row["window_count"]),
            completeness=float(st["completeness"]),
            safety_budget=st["safety_budget"],
            status=st.get("status", "in-progress"),
            ended_window=st.get("ended_window"),
            backward_summary=st.get("backward_summary", ""),
            tenant=st.get("tenant", DEFAULT_TENANT),
        )

    def covered_labels(self) -> list[tuple[int, str]]:
        """(window, label) of every Coverage Set entry, in the order they were merged."""
        label = {s.id: s.label for s in self.sub_queries}
        return [(c.window, label.get(c.id, c.id)) for c in self.coverage]

    def coverage_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.coverage:
            return np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.float64)
        vecs = np.stack([vec_from_json(c.embedding) for c in self.coverage])
        return vecs, np.asarray([c.depth for c in self.coverage], dtype=np.float64)
