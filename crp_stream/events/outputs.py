"""Output events (docs/contract.md "Output topics"): what crp-stream publishes.

Every output value carries ``type`` on the wire; the models default it so code can build them
without repeating the name, and ``encode`` always writes it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from crp_stream.events.common import (
    LIST_MAX,
    TEXT_MAX,
    VALUE_MAX,
    AuditType,
    EnvelopeStatus,
    Event,
    FactStatus,
    Fraction,
    Id,
    Ids,
    Label,
    Part,
    Reason,
    Role,
    Scalar,
    SourceType,
    Tenant,
    Text,
    Time,
    Ttl,
    Via,
    require_type,
)


class OutputEvent(Event):
    """Base of output events: ``type`` is required in their JSON Schema."""

    model_config = ConfigDict(json_schema_extra=require_type)


class FactRecorded(OutputEvent):
    """``crp.facts`` (changelog), key = fact_id: a fact entered the fabric."""

    type: Literal["FactRecorded"] = "FactRecorded"
    fact_id: Id
    source: Id
    source_type: SourceType
    trust: Fraction
    epoch: Time
    modified_at: Time
    ttl: Ttl
    text: Text | None = None  # omitted when ``sealed`` carries it
    importance: Fraction
    subject: Label | None = None
    attribute: Label | None = None
    value: Scalar | None = None
    unit: Label | None = None
    status: FactStatus
    origin_event_id: Id
    tenant: Tenant | None = None  # omitted for the default tenant
    # the text of a fact from a sealed input under its document's key, ``KEY_ID:NONCE:DATA`` (base64;
    # one string, so the changelog's records stay objects of scalars; docs/security.md "The log forgets")
    sealed: Annotated[str, Field(min_length=1, max_length=4 * TEXT_MAX)] | None = None


class FactStatusChanged(OutputEvent):
    """``crp.facts`` (changelog), key = fact_id: a fact's lifecycle status changed."""

    type: Literal["FactStatusChanged"] = "FactStatusChanged"
    fact_id: Id
    # ``forgotten``: ``crp-stream forget`` removed the fact (every worker drops its point; no text here)
    status: FactStatus | Literal["forgotten"]
    reason: Reason
    at: Time
    cause_id: Id | None = None


class EnvelopeFact(Part):
    """One fact of an envelope, in reading order."""

    fact_id: Id
    text: Text
    role: Role
    score: float
    relevance: float
    novelty: float
    recency: float
    authority: float
    source: Id
    source_type: SourceType
    epoch: Time
    modified_at: Time
    support: int = Field(ge=1)
    bridges: Ids | None = None
    # Why the fact is here: found by vector similarity, or reached over a graph edge of
    # that kind; ``rank`` orders the facts by expected value (1 = best), whatever the packed order.
    via: Via | None = Field(default=None, description="vector search, or the graph edge kind that reached it")
    rank: int | None = Field(default=None, ge=1, description="1 = best expected value; cut a long envelope by rank")


class EnvelopeAssembled(OutputEvent):
    """``crp.envelopes``, key = session_id: one per window (one per branch when fanout > 1)."""

    type: Literal["EnvelopeAssembled"] = "EnvelopeAssembled"
    request_id: Id
    session_id: Id
    window: int = Field(ge=1)
    branch: int | None = Field(default=None, ge=0)
    partition: Ids | None = None
    status: EnvelopeStatus
    facts: Annotated[list[EnvelopeFact], Field(max_length=LIST_MAX)]
    notes: Annotated[list[Reason], Field(max_length=LIST_MAX)] = Field(default_factory=list)
    residual_anchor: str = Field(max_length=TEXT_MAX)
    headers: dict[str, Scalar]
    # the window's closing envelope: its reports reached a loop exit (SPEC-024 §6); no facts
    closing: bool | None = None


class AuditRecorded(OutputEvent):
    """``crp.audit``, key = subject, session or source."""

    type: Literal["AuditRecorded"] = "AuditRecorded"
    event_id: Id
    audit_type: AuditType
    at: Time
    details: dict[str, Any] = Field(default_factory=dict)


class RefreshRequested(OutputEvent):
    """``crp.refresh.requests``, key = stale source: a high-trust source is stale (drift, not poisoning)."""

    type: Literal["RefreshRequested"] = "RefreshRequested"
    request_id: Id
    source: Id
    subject: Label
    attribute: Label
    stale_value: Scalar
    observed_value: Scalar
    evidence: Ids
    high_trust_epoch: Time
    divergent_epoch: Time
    corroborating_partitions: int = Field(ge=0)
    requested_at: Time


class QuarantineCandidate(OutputEvent):
    """``crp.quarantine.candidates``, key = suspect source: a poisoning candidate for review."""

    type: Literal["QuarantineCandidate"] = "QuarantineCandidate"
    candidate_id: Id
    source: Id
    fact_ids: Ids
    subject: Label
    attribute: Label
    value: Scalar
    reason: Reason


class EventRejected(OutputEvent):
    """``crp.deadletter``: a record that did not validate, kept whole with the reason.

    ``raw`` is the original bytes as UTF-8 text, or ``"base64:"`` + base64 when they are not UTF-8
    (or when the text itself starts with ``"base64:"``, so the prefix is never ambiguous).
    """

    type: Literal["EventRejected"] = "EventRejected"
    topic: str
    key: str | None = None
    raw: str
    reason: str = Field(max_length=VALUE_MAX)
    at: Time


OUTPUT_MODELS: tuple[type[Event], ...] = (
    FactRecorded,
    FactStatusChanged,
    EnvelopeAssembled,
    AuditRecorded,
    RefreshRequested,
    QuarantineCandidate,
    EventRejected,
)
