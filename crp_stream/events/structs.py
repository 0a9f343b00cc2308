"""msgspec mirrors of the events decoded on the hot path: the input events and the changelog's records.

The pydantic models stay the contract (their JSON Schemas are ``schemas/v1``); these Structs check, in
C, what those models check per field: types (strict: a string is never a number, a bool never an
int), lengths, ranges and enums. What a Struct cannot say (times, durations, the tenant pattern, a
scalar's bounds, the rules across fields) ``codec_fast`` checks in Python. A field left out of the
record is ``UNSET``, so the model's set of given fields is known. Unknown fields are refused here:
such a record takes the pydantic path, which keeps them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from crp_stream.core.durations import MAX_DURATION_CHARS
from crp_stream.events.common import (
    ID_MAX,
    LABEL_MAX,
    LIST_MAX,
    MAX_SUB_QUERIES,
    OUTPUT_TEXT_MAX,
    TEXT_MAX,
    VALUE_MAX,
    VECTOR_MAX,
    Command,
    FactStatus,
    OnOff,
    SourceType,
)
from crp_stream.events.inputs import MAX_WINDOW

Id = Annotated[str, Meta(min_length=1, max_length=ID_MAX)]
Text = Annotated[str, Meta(min_length=1, max_length=TEXT_MAX)]
Label = Annotated[str, Meta(min_length=1, max_length=LABEL_MAX)]
Reason = Annotated[str, Meta(max_length=VALUE_MAX)]
Fraction = Annotated[float, Meta(ge=0.0, le=1.0)]
Vector = Annotated[list[float], Meta(min_length=1, max_length=VECTOR_MAX)]
# Checked after decoding (codec_fast): the text of a time, a duration, a tenant; a scalar's bounds.
Time = Annotated[str, Meta(extra={"check": "time"})]
Ttl = Annotated[str, Meta(max_length=MAX_DURATION_CHARS, extra={"check": "ttl"})]
Tenant = Annotated[str, Meta(extra={"check": "tenant"})]
Scalar = str | int | float


class Base(Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Strict, no unknown fields (the pydantic path keeps those); ``UNSET`` marks a field not given."""


# --- inputs -----------------------------------------------------------------------------------------


class FactInput(Base, kw_only=True):
    fact_id: Id | UnsetType | None = UNSET
    text: Text
    importance: Fraction | UnsetType = UNSET
    subject: Label | UnsetType | None = UNSET
    attribute: Label | UnsetType | None = UNSET
    value: Scalar | UnsetType | None = UNSET
    unit: Label | UnsetType | None = UNSET
    embedding: Vector | UnsetType | None = UNSET
    ttl: Ttl | UnsetType | None = UNSET


class DocumentPublished(Base, kw_only=True):
    type: Literal["DocumentPublished"] | UnsetType = UNSET
    event_id: Id
    source: Id
    tenant: Tenant | UnsetType | None = UNSET
    source_type: SourceType
    trust: Fraction | UnsetType | None = UNSET
    document_id: Id | UnsetType | None = UNSET
    title: Label | UnsetType | None = UNSET
    section: Label | UnsetType | None = UNSET
    modified_at: Time | UnsetType | None = UNSET
    ttl: Ttl | UnsetType | None = UNSET
    embedding_model: Id | UnsetType | None = UNSET
    facts: list[FactInput] | UnsetType | None = UNSET  # count checked after (``max_facts`` is per decode)
    text: Text | UnsetType | None = UNSET


class TelemetryObserved(Base, kw_only=True):
    type: Literal["TelemetryObserved"] | UnsetType = UNSET
    event_id: Id
    tenant: Tenant | UnsetType | None = UNSET
    source: Id
    trust: Fraction | UnsetType | None = UNSET
    observed_at: Time
    subject: Label
    attribute: Label
    value: Scalar
    unit: Label | UnsetType | None = UNSET
    text: Text | UnsetType | None = UNSET
    embedding: Vector | UnsetType | None = UNSET
    embedding_model: Id | UnsetType | None = UNSET


class QuerySpec(Base, kw_only=True):
    text: Text
    embedding: Vector | UnsetType | None = UNSET


ExpectedWords = Annotated[int, Meta(ge=1, le=10_000_000)] | Annotated[list[Label], Meta(max_length=LIST_MAX)]


class SubQuery(Base, kw_only=True):
    id: Id
    text: Text
    label: Label | UnsetType | None = UNSET
    embedding: Vector | UnsetType | None = UNSET
    expected_words: ExpectedWords | UnsetType | None = UNSET


class Policy(Base, kw_only=True):
    graph_retrieval: OnOff | UnsetType = UNSET
    max_hops: Annotated[int, Meta(ge=1, le=3)] | UnsetType = UNSET
    connector_budget: Annotated[float, Meta(ge=0.0, le=0.5)] | UnsetType = UNSET
    min_relevance: Fraction | UnsetType | None = UNSET


class WindowRequested(Base, kw_only=True):
    type: Literal["WindowRequested"] | UnsetType = UNSET
    request_id: Id
    tenant: Tenant | UnsetType | None = UNSET
    session_id: Id
    window: Annotated[int, Meta(ge=1, le=MAX_WINDOW)]
    query: QuerySpec
    sub_queries: Annotated[list[SubQuery], Meta(max_length=MAX_SUB_QUERIES)] | UnsetType | None = UNSET
    fact_budget: Annotated[int, Meta(ge=1, le=1000)] | UnsetType = UNSET
    max_windows: Annotated[int, Meta(ge=1, le=20)] | UnsetType = UNSET
    fanout: Annotated[int, Meta(ge=1, le=16)] | UnsetType = UNSET
    policy: Policy | UnsetType = UNSET
    embedding_model: Id | UnsetType | None = UNSET


class Addressed(Base, kw_only=True):
    id: Id
    depth: Fraction | UnsetType | None = UNSET
    words: Annotated[int, Meta(ge=0, le=10_000_000)] | UnsetType | None = UNSET
    text: Text | UnsetType | None = UNSET
    embedding: Vector | UnsetType | None = UNSET


class WindowReported(Base, kw_only=True):
    type: Literal["WindowReported"] | UnsetType = UNSET
    session_id: Id
    tenant: Tenant | UnsetType | None = UNSET
    window: Annotated[int, Meta(ge=1, le=MAX_WINDOW)]
    branch: Annotated[int, Meta(ge=0, le=15)] | UnsetType | None = UNSET
    addressed: Annotated[list[Addressed], Meta(max_length=LIST_MAX)]
    output_text: Annotated[str, Meta(max_length=OUTPUT_TEXT_MAX)]
    completeness: Fraction
    safety_budget: Fraction | UnsetType | None = UNSET
    embedding_model: Id | UnsetType | None = UNSET


class OperatorCommand(Base, kw_only=True):
    type: Literal["OperatorCommand"] | UnsetType = UNSET
    command_id: Id
    tenant: Tenant | UnsetType | None = UNSET
    command: Command
    target_id: Id
    actor: Id
    reason: Reason | UnsetType | None = UNSET


# --- the changelog (crp.facts): ``type`` is required and picks the Struct ------------------------


class FactRecorded(Base, kw_only=True, tag_field="type", tag="FactRecorded"):
    fact_id: Id
    source: Id
    source_type: SourceType
    trust: Fraction
    epoch: Time
    modified_at: Time
    ttl: Ttl
    text: Text | UnsetType | None = UNSET
    importance: Fraction
    subject: Label | UnsetType | None = UNSET
    attribute: Label | UnsetType | None = UNSET
    value: Scalar | UnsetType | None = UNSET
    unit: Label | UnsetType | None = UNSET
    status: FactStatus
    origin_event_id: Id
    tenant: Tenant | UnsetType | None = UNSET
    sealed: Annotated[str, Meta(min_length=1, max_length=4 * TEXT_MAX)] | UnsetType | None = UNSET


class FactStatusChanged(Base, kw_only=True, tag_field="type", tag="FactStatusChanged"):
    fact_id: Id
    status: FactStatus | Literal["forgotten"]
    reason: Reason
    at: Time
    cause_id: Id | UnsetType | None = UNSET


Changelog = FactRecorded | FactStatusChanged
