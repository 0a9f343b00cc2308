"""The event contract (docs/contract.md): typed events, topics, the edge codec and ``Rejected``.

Import from here; the submodules are its parts (``topics``, ``codec``, ``inputs``, ``outputs``, ``reasons``).
"""

from __future__ import annotations

from crp_stream.events.codec import (
    BASE64_PREFIX,
    MAX_DEPTH,
    MAX_RECORD_BYTES,
    Event,
    deadletter,
    decode_input,
    encode,
    nesting_depth,
    parse_json,
    raw_bytes,
    raw_text,
    to_json_value,
    validate_value,
)
from crp_stream.events.common import DEFAULT_MAX_FACTS, AuditType, Command, FactStatus
from crp_stream.events.common import Event as EventModel
from crp_stream.events.inputs import (
    Addressed,
    DocumentPublished,
    FactInput,
    OperatorCommand,
    Policy,
    QuerySpec,
    SubQuery,
    TelemetryObserved,
    WindowReported,
    WindowRequested,
)
from crp_stream.events.outputs import (
    AuditRecorded,
    EnvelopeAssembled,
    EnvelopeFact,
    EventRejected,
    FactRecorded,
    FactStatusChanged,
    QuarantineCandidate,
    RefreshRequested,
)
from crp_stream.events.rejected import Rejected
from crp_stream.events.topics import (
    ALL_TOPICS,
    DEFAULT_PREFIX,
    EVENT_MODELS,
    INPUT_TOPICS,
    OUTPUT_TOPICS,
    TOPICS,
    TopicSpec,
    topic_name,
    topic_spec,
)

__all__ = [
    "ALL_TOPICS",
    "BASE64_PREFIX",
    "DEFAULT_MAX_FACTS",
    "DEFAULT_PREFIX",
    "EVENT_MODELS",
    "INPUT_TOPICS",
    "MAX_DEPTH",
    "MAX_RECORD_BYTES",
    "OUTPUT_TOPICS",
    "TOPICS",
    "Addressed",
    "AuditRecorded",
    "AuditType",
    "Command",
    "DocumentPublished",
    "EnvelopeAssembled",
    "EnvelopeFact",
    "Event",
    "EventModel",
    "EventRejected",
    "FactInput",
    "FactRecorded",
    "FactStatus",
    "FactStatusChanged",
    "OperatorCommand",
    "Policy",
    "QuarantineCandidate",
    "QuerySpec",
    "RefreshRequested",
    "Rejected",
    "SubQuery",
    "TelemetryObserved",
    "TopicSpec",
    "WindowReported",
    "WindowRequested",
    "deadletter",
    "decode_input",
    "encode",
    "nesting_depth",
    "parse_json",
    "raw_bytes",
    "raw_text",
    "to_json_value",
    "topic_name",
    "topic_spec",
    "validate_value",
]
