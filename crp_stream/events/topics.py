"""The topics of the contract (docs/contract.md): names, the events each carries, and their keys.

The one place a topic's name is written: every other module imports it from here (a unit test,
``tests/unit/events/test_topic_names.py``, fails on a topic name spelled out anywhere else in the package).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

from crp_stream.events.common import Event as EventModel
from crp_stream.events.inputs import (
    INPUT_MODELS,
    DocumentPublished,
    OperatorCommand,
    TelemetryObserved,
    WindowReported,
    WindowRequested,
)
from crp_stream.events.outputs import (
    OUTPUT_MODELS,
    AuditRecorded,
    EnvelopeAssembled,
    EventRejected,
    FactRecorded,
    FactStatusChanged,
    QuarantineCandidate,
    RefreshRequested,
)

DEFAULT_PREFIX = "crp."

# inputs
DOCUMENTS = "crp.documents"
TELEMETRY = "crp.telemetry"
WINDOW_REQUESTS = "crp.window.requests"
WINDOW_REPORTS = "crp.window.reports"
OPERATOR_COMMANDS = "crp.operator.commands"
# outputs
FACTS = "crp.facts"
ENVELOPES = "crp.envelopes"
AUDIT = "crp.audit"
REFRESH_REQUESTS = "crp.refresh.requests"
QUARANTINE_CANDIDATES = "crp.quarantine.candidates"
DEADLETTER = "crp.deadletter"


@dataclass(frozen=True)
class TopicSpec:
    """A topic of docs/contract.md: its default name, the events it carries, and what its key is."""

    name: str
    models: tuple[type[EventModel], ...]
    is_input: bool
    key: str

    @property
    def model(self) -> type[EventModel]:
        """The single event model of this topic (``crp.facts`` carries two: use ``models``)."""
        if len(self.models) != 1:
            raise TypeError(f"topic {self.name} carries {len(self.models)} event types")
        return self.models[0]

    @cached_property  # read for every record decoded
    def names(self) -> tuple[str, ...]:
        return tuple(m.__name__ for m in self.models)


def _spec(name: str, is_input: bool, key: str, *models: type[EventModel]) -> tuple[str, TopicSpec]:
    return name, TopicSpec(name, models, is_input, key)


TOPICS: Mapping[str, TopicSpec] = MappingProxyType(
    dict(
        [
            _spec(DOCUMENTS, True, "source", DocumentPublished),
            _spec(TELEMETRY, True, "source", TelemetryObserved),
            _spec(WINDOW_REQUESTS, True, "session_id", WindowRequested),
            _spec(WINDOW_REPORTS, True, "session_id", WindowReported),
            _spec(OPERATOR_COMMANDS, True, "subject or source", OperatorCommand),
            _spec(FACTS, False, "fact_id", FactRecorded, FactStatusChanged),
            _spec(ENVELOPES, False, "session_id", EnvelopeAssembled),
            _spec(AUDIT, False, "subject, session or source", AuditRecorded),
            _spec(REFRESH_REQUESTS, False, "stale source", RefreshRequested),
            _spec(QUARANTINE_CANDIDATES, False, "suspect source", QuarantineCandidate),
            _spec(DEADLETTER, False, "the rejected record's key", EventRejected),
        ]
    )
)
INPUT_TOPICS: tuple[str, ...] = tuple(n for n, s in TOPICS.items() if s.is_input)
OUTPUT_TOPICS: tuple[str, ...] = tuple(n for n, s in TOPICS.items() if not s.is_input)
ALL_TOPICS: tuple[str, ...] = INPUT_TOPICS + OUTPUT_TOPICS
EVENT_MODELS: Mapping[str, type[EventModel]] = MappingProxyType(
    {m.__name__: m for m in (*INPUT_MODELS, *OUTPUT_MODELS)}
)


def topic_name(base: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The topic name under ``prefix``: ``topic_name("documents", "acme.")`` == ``"acme.documents"``.

    ``base`` may also be a default name (``"crp.documents"``), whose ``crp.`` is replaced.
    """
    return prefix + base.removeprefix(DEFAULT_PREFIX)


def topic_spec(topic: str, prefix: str = DEFAULT_PREFIX) -> TopicSpec | None:
    """The contract topic behind ``topic`` (a default name, or a name under ``prefix``), or None."""
    if topic.startswith(prefix):
        found = TOPICS.get(DEFAULT_PREFIX + topic[len(prefix) :])
        if found is not None:
            return found
    return TOPICS.get(topic)
