"""What the operator console needs from a runtime (crp_stream/console): reads through the fabric's
repository and the topics, writes as operator commands. The embedded runtime and the Kafka worker each
provide one (``console.backend.EmbeddedBackend``, ``runtime.kafka.console.KafkaConsoleBackend``)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from crp_stream.config import Settings
from crp_stream.events import Command
from crp_stream.fabric.sql.repository import Repository

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class TopicRow:
    """One topic: its end offset and, per consumer group that reads it, the committed offset and lag."""

    topic: str
    end: int
    consumers: dict[str, tuple[int, int]] = field(default_factory=dict)  # group -> (committed, lag)


@dataclass(frozen=True)
class CommandResult:
    command_id: str
    rejected: str | None  # the handler's reason when the command was dead-lettered
    pending: bool = False  # published, but not processed within the wait (a worker is behind or down)


@dataclass(frozen=True)
class TopicRecord:
    key: str | None
    value: bytes
    headers: Headers
    record_id: str | None  # the derived id of an output (the crp-id header on Kafka)


class ConsoleBackend(Protocol):
    settings: Settings

    def repo(self) -> AbstractContextManager[Repository]: ...

    def topics(self) -> list[TopicRow]: ...

    def records(self, topic: str, key: str | None = None, limit: int = 1000) -> Sequence[TopicRecord]: ...

    def model(self) -> dict[str, Any]: ...

    def vector_count(self) -> int: ...

    def publish_command(
        self, command: Command, target_id: str, key: str, actor: str, reason: str | None, tenant: str | None = None
    ) -> CommandResult: ...

    def record_denied(self, details: dict[str, Any]) -> str: ...

    def close(self) -> None: ...


def thresholds_view(fabric: Any, repo: Repository) -> dict[str, Any]:
    """The fabric's model and the thresholds in force, as the fabric page shows them."""
    th = fabric.thresholds(repo)
    names = ("min_relevance", "edge_threshold", "edge_k", "contradiction_threshold", "min_connector_relevance")
    return {
        "fabric_model": repo.get_meta("embedding_model"),
        "embedder": fabric.embedder.model_id,
        "thresholds": {k: getattr(th, k) for k in names},
    }
