"""The embedded runtime (the default): the durable in-process log, SQLite, qdrant-edge, no servers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy import Engine

from crp_stream.config import Settings
from crp_stream.fabric.embedders.prefetch import EmbeddingPrefetch
from crp_stream.fabric.fabric import Fabric, open_vector_index
from crp_stream.fabric.vectors.port import VectorIndex
from crp_stream.processors import all_handlers
from crp_stream.processors.base import AnyHandler
from crp_stream.runtime.embedded.log import Append, EmbeddedLog, LogRecord
from crp_stream.runtime.embedded.runtime import EmbeddedRuntime, system_clock
from crp_stream.runtime.vector_guard import GuardedVectors, VectorJournal

Clock = Callable[[], int]


def journal_path(log_path: Path) -> Path:
    """The vector journal sits beside the log it belongs to."""
    return log_path.with_name(log_path.name + ".vector-journal")


def open_fabric(
    settings: Settings, *, engine: Engine | None = None, migrate: bool = True, vectors: VectorIndex | None = None
) -> Fabric:
    """The fabric with its vector index guarded: writes journaled, failures transient (vector_guard)."""
    journal = VectorJournal(journal_path(settings.log_path))
    inner = vectors if vectors is not None else open_vector_index(settings.vectors)
    return Fabric(
        settings,
        engine=engine,
        migrate=migrate,
        vectors=GuardedVectors(inner, journal),
        wrap=lambda v: GuardedVectors(v, journal),  # another model's store, after a reembed
    )


def open_runtime(
    settings: Settings,
    *,
    clock: Clock = system_clock,
    fabric: Fabric | None = None,
    handlers: Sequence[AnyHandler] | None = None,
    on_output: Callable[[LogRecord], None] | None = None,
    batch_size: int | None = None,
    rederive: bool = False,
) -> EmbeddedRuntime:
    """Fabric + log + every handler: the one way a process (or a test) assembles the embedded pipeline."""
    fabric = fabric or open_fabric(settings)
    if fabric.embedder.costly and not isinstance(fabric.embedder, EmbeddingPrefetch):
        fabric.embedder = EmbeddingPrefetch(fabric.embedder)  # the model runs ahead, on its own thread
    fabric.warm()  # a large fabric's ANN cache and the similarity graph are loaded now, not on the first requests
    log_ = EmbeddedLog(settings.log_path, clock)
    return EmbeddedRuntime(
        fabric,
        log_,
        list(handlers) if handlers is not None else all_handlers(),
        on_output=on_output,
        batch_size=batch_size or settings.batch_size,
        rederive=rederive,
    )


__all__ = [
    "Append",
    "Clock",
    "EmbeddedLog",
    "EmbeddedRuntime",
    "LogRecord",
    "journal_path",
    "open_fabric",
    "open_runtime",
    "system_clock",
]
