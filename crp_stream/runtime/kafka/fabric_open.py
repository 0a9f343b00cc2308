"""The Kafka worker's fabric: its vector index guarded, its database migrated once per cluster start."""

from __future__ import annotations

from sqlalchemy import text

from crp_stream.config import Settings
from crp_stream.fabric import db
from crp_stream.fabric.fabric import Fabric, open_vector_index
from crp_stream.runtime.vector_guard import GuardedVectors, VectorJournal

MIGRATION_LOCK = 0x637270  # pg advisory lock: workers starting together migrate one at a time


def open_fabric(settings: Settings, journal: VectorJournal) -> Fabric:
    """The fabric with its vector index guarded by ``journal``, migrated once even when several
    workers start together on one PostgreSQL."""
    engine = db.make_engine(settings.database)
    vectors = GuardedVectors(open_vector_index(settings.vectors), journal)
    if engine.dialect.name != "postgresql":
        return Fabric(settings, engine=engine, vectors=vectors)
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK})
        try:
            return Fabric(settings, engine=engine, vectors=vectors)
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK})
