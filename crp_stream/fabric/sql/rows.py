"""The shapes of the rows the repository returns (one TypedDict per table, as the handlers read them).

``total=False`` where a read may name only some columns (``Repository.fact_rows``)."""

from __future__ import annotations

from typing import Any, TypedDict


class FactRow(TypedDict, total=False):
    fact_id: str
    source: str
    source_type: str
    trust: float
    importance: float
    epoch_us: int
    modified_at_us: int
    ttl_s: float | None
    expires_at_us: int | None
    text: str
    subject: str | None
    attribute: str | None
    value: str | None
    unit: str | None
    claim_key: str | None
    status: str
    content_hash: str
    document_id: str | None
    position: int
    origin_event_id: str
    kind: str  # document | telemetry
    extra: str | None
    tenant: str


class SourceRow(TypedDict):
    source: str
    source_type: str
    trust: float
    first_seen_us: int
    last_seen_us: int


class SessionRow(TypedDict):
    session_id: str
    embedding_model: str
    window_count: int
    max_windows: int
    state: dict[str, Any]  # decoded JSON: coverage set, residual set, sub-queries, blacklist
    updated_at_us: int


class AuditRow(TypedDict):
    seq: int
    event_id: str
    audit_type: str
    at_us: int
    key: str
    details: dict[str, Any]  # decoded JSON


class RefreshRow(TypedDict):
    request_id: str
    claim_key: str
    source: str
    status: str  # open | resolved | rejected
    payload: dict[str, Any]  # decoded JSON
    created_at_us: int
    resolved_at_us: int | None
    resolved_by: str | None


class CandidateRow(TypedDict):
    candidate_id: str
    claim_key: str
    source: str
    status: str  # pending | confirmed | released
    payload: dict[str, Any]  # decoded JSON
    created_at_us: int
    decided_at_us: int | None
    decided_by: str | None


class ClaimRow(TypedDict):
    claim_key: str
    verdict: str
    fingerprint: str
    details: dict[str, Any]  # decoded JSON
    updated_at_us: int
