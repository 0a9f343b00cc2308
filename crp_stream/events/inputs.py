"""Input events (docs/contract.md "Input topics"): what producers, generators and operators publish.

On an input topic ``type`` may be omitted (the topic implies it); when present it must match.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from crp_stream.events.common import (
    DEFAULT_MAX_FACTS,
    LIST_MAX,
    MAX_SUB_QUERIES,
    OUTPUT_TEXT_MAX,
    Command,
    Event,
    FieldError,
    Fraction,
    Id,
    Label,
    OnOff,
    Part,
    Reason,
    Scalar,
    SourceType,
    Tenant,
    Text,
    Time,
    Ttl,
    Vector,
    first_vector,
)

MAX_WINDOW = 10_000  # far past any max_windows; keeps window numbers in a 64-bit column


def _needs_model(embedding_model: str | None, vectors: dict[str, list[float] | None]) -> None:
    """docs/contract.md: ``embedding_model`` is required when any vector is given."""
    path = first_vector(vectors)
    if path is not None and embedding_model is None:
        raise FieldError("embedding_model", f"required when a vector is given ({path})")


class FactInput(Part):
    """One fact of a ``DocumentPublished``."""

    fact_id: Id | None = None
    text: Text
    importance: Fraction = 1.0
    subject: Label | None = None
    attribute: Label | None = None
    value: Scalar | None = None
    unit: Label | None = None
    embedding: Vector | None = None
    ttl: Ttl | None = None


class DocumentPublished(Event):
    """``crp.documents``, key = source: a document's facts, or its text to split into sentence facts."""

    type: Literal["DocumentPublished"] = "DocumentPublished"
    event_id: Id
    source: Id
    tenant: Tenant | None = None
    source_type: SourceType
    trust: Fraction | None = None
    document_id: Id | None = None
    # Optional structure: the title names the document (facts embed as "title: sentence"
    # and other documents' facts that name it link to it); the section is kept with its facts.
    title: Label | None = Field(
        default=None, description='the document\'s name: facts embed as "title: sentence"; facts naming it link to it'
    )
    section: Label | None = Field(default=None, description="the part of the document its facts come from")
    modified_at: Time | None = None
    ttl: Ttl | None = None
    embedding_model: Id | None = None
    facts: list[FactInput] | None = Field(
        default=None, json_schema_extra={"minItems": 1, "maxItems": DEFAULT_MAX_FACTS}
    )
    text: Text | None = None

    @field_validator("facts", mode="before")
    @classmethod
    def _fact_count(cls, value: Any, info: ValidationInfo) -> Any:
        """A fact list is non-empty and at most ``max_facts`` long (checked before its items)."""
        if isinstance(value, list):
            limit = (info.context or {}).get("max_facts", DEFAULT_MAX_FACTS)
            if not value:
                raise ValueError("list is empty; give at least one fact, or text")
            if len(value) > limit:
                raise ValueError(f"{len(value):,} facts, over the limit of {limit:,}")
        return value

    @model_validator(mode="after")
    def _rules(self) -> DocumentPublished:
        if self.facts is None and self.text is None:
            raise FieldError("facts", "one of facts or text is required")
        if self.text is not None and not self.text.strip():
            raise FieldError("text", "must not be blank")
        vectors = {f"facts[{i}].embedding": f.embedding for i, f in enumerate(self.facts or [])}
        _needs_model(self.embedding_model, vectors)
        return self


class TelemetryObserved(Event):
    """``crp.telemetry``, key = source: one observation, stored as one fact."""

    type: Literal["TelemetryObserved"] = "TelemetryObserved"
    event_id: Id
    tenant: Tenant | None = None
    source: Id
    trust: Fraction | None = None
    observed_at: Time
    subject: Label
    attribute: Label
    value: Scalar
    unit: Label | None = None
    text: Text | None = None
    embedding: Vector | None = None
    embedding_model: Id | None = None

    @model_validator(mode="after")
    def _rules(self) -> TelemetryObserved:
        _needs_model(self.embedding_model, {"embedding": self.embedding})
        return self


class QuerySpec(Part):
    """The window's query."""

    text: Text
    embedding: Vector | None = None


class SubQuery(Part):
    """One sub-query of the task decomposition (an entry of the Residual Set)."""

    id: Id
    text: Text
    label: Label | None = None
    embedding: Vector | None = None
    # SPEC-024 §3.2: how many words this sub-query is expected to produce (a report's ``words`` / this).
    # A list of words (this field's earlier form) is still accepted, and gives no count.
    expected_words: (
        Annotated[int, Field(ge=1, le=10_000_000)] | Annotated[list[Label], Field(max_length=LIST_MAX)] | None
    ) = None


class Policy(Part):
    """Graph-retrieval policy of a window (SPEC-025)."""

    graph_retrieval: OnOff = "on"
    max_hops: int = Field(default=2, ge=1, le=3)
    connector_budget: float = Field(default=0.30, ge=0.0, le=0.5)
    min_relevance: Fraction | None = None


class WindowRequested(Event):
    """``crp.window.requests``, key = session_id: assemble the envelope of one window."""

    type: Literal["WindowRequested"] = "WindowRequested"
    request_id: Id
    tenant: Tenant | None = None
    session_id: Id
    window: int = Field(ge=1, le=MAX_WINDOW)
    query: QuerySpec
    sub_queries: Annotated[list[SubQuery], Field(max_length=MAX_SUB_QUERIES)] | None = None
    fact_budget: int = Field(default=35, ge=1, le=1000)
    max_windows: int = Field(default=5, ge=1, le=20)
    fanout: int = Field(default=1, ge=1, le=16)
    policy: Policy = Field(default_factory=Policy)
    embedding_model: Id | None = None

    @model_validator(mode="after")
    def _rules(self) -> WindowRequested:
        subs = self.sub_queries or []
        if self.window == 1 and not subs:
            raise FieldError("sub_queries", "required on window 1 (the task decomposition)")
        seen: set[str] = set()
        for i, sq in enumerate(subs):
            if sq.id in seen:
                raise FieldError(f"sub_queries[{i}].id", f"duplicate id {sq.id!r}")
            seen.add(sq.id)
        vectors = {"query.embedding": self.query.embedding}
        vectors.update({f"sub_queries[{i}].embedding": sq.embedding for i, sq in enumerate(subs)})
        _needs_model(self.embedding_model, vectors)
        return self


class Addressed(Part):
    """A sub-query the generator addressed in a window, and how deeply: ``depth`` (0..1), or ``words``
    written on it (SPEC-024 §3.2: depth from the ratio to the sub-query's ``expected_words``); 0.5 if
    neither is given."""

    id: Id
    depth: Fraction | None = None
    words: int | None = Field(default=None, ge=0, le=10_000_000)
    text: Text | None = None
    embedding: Vector | None = None


class WindowReported(Event):
    """``crp.window.reports``, key = session_id: what the generator produced for a window."""

    type: Literal["WindowReported"] = "WindowReported"
    session_id: Id
    tenant: Tenant | None = None
    window: int = Field(ge=1, le=MAX_WINDOW)
    branch: int | None = Field(default=None, ge=0, le=15)
    addressed: Annotated[list[Addressed], Field(max_length=LIST_MAX)]
    output_text: str = Field(max_length=OUTPUT_TEXT_MAX)
    completeness: Fraction
    safety_budget: Fraction | None = None
    embedding_model: Id | None = None

    @model_validator(mode="after")
    def _rules(self) -> WindowReported:
        vectors = {f"addressed[{i}].embedding": a.embedding for i, a in enumerate(self.addressed)}
        _needs_model(self.embedding_model, vectors)
        return self


class OperatorCommand(Event):
    """``crp.operator.commands``, key = subject or source: an operator's decision."""

    type: Literal["OperatorCommand"] = "OperatorCommand"
    command_id: Id
    tenant: Tenant | None = None
    command: Command
    target_id: Id
    actor: Id
    reason: Reason | None = None


INPUT_MODELS: tuple[type[Event], ...] = (
    DocumentPublished,
    TelemetryObserved,
    WindowRequested,
    WindowReported,
    OperatorCommand,
)
