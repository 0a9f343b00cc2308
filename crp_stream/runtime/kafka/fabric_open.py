"""The Kafka worker's fabric: a pooled engine, and the vector index guarded by the worker's journal."""

from __future__ import annotations

from crp_stream.config import Settings
from crp_stream.fabric.fabric import Fabric, open_vector_index
from crp_stream.fabric.sql import db
from crp_stream.runtime.vector_guard import GuardedVectors, VectorJournal

PING_IDLE_S = 1.0  # a pooled connection idle longer is pinged at checkout; busy ones are not


def open_fabric(settings: Settings, journal: VectorJournal) -> Fabric:
    """The fabric, its vector index guarded by ``journal``; an endpoint embedder is probed now."""
    engine = db.make_engine(settings.database, ping_idle_s=PING_IDLE_S)
    fabric = Fabric(
        settings,
        engine=engine,
        vectors=GuardedVectors(open_vector_index(settings.vectors), journal),
        wrap=lambda v: GuardedVectors(v, journal),  # another model's store, after a reembed
    )
    if not fabric.embedder.requires_vectors:
        _ = fabric.embedder.dim
    return fabric


__all__ = ["PING_IDLE_S", "open_fabric"]
