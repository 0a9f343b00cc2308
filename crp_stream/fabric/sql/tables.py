"""Relational schema of the fabric (SQLAlchemy Core). The same tables run on PostgreSQL and SQLite.

Times are stored as integer microseconds since the Unix epoch (UTC): exact on both databases, and
byte-stable for replay. JSON documents are stored as canonical text so both backends agree.
"""

from __future__ import annotations

import sys

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    }
)

ID = String(64)


def column_names(table: Table) -> tuple[str, ...]:
    """A table's column names as plain interned ``str``, for row dicts. SQLAlchemy's names are
    ``quoted_name`` (a str subclass with a ``__dict__``): a dict keyed by them is tracked by the cyclic
    collector, which walked every cached fact row again and again, and a lookup by a literal key
    compared strings instead of matching the same object."""
    return tuple(sys.intern(str(col.key)) for col in table.c)


facts = Table(
    "facts",
    metadata,
    Column("fact_id", ID, primary_key=True),
    Column("source", String(256), nullable=False),
    Column("source_type", String(32), nullable=False),
    Column("trust", Float, nullable=False),
    Column("importance", Float, nullable=False),
    Column("epoch_us", BigInteger, nullable=False),
    Column("modified_at_us", BigInteger, nullable=False),
    Column("ttl_s", Float, nullable=True),  # NULL: never expires
    Column("expires_at_us", BigInteger, nullable=True),
    Column("text", Text, nullable=False),
    Column("subject", String(512), nullable=True),
    Column("attribute", String(512), nullable=True),
    Column("value", String(1024), nullable=True),
    Column("unit", String(64), nullable=True),
    Column("claim_key", String(1100), nullable=True),
    Column("status", String(16), nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("document_id", String(256), nullable=True),
    Column("position", Integer, nullable=False),
    Column("origin_event_id", String(256), nullable=False),
    Column("kind", String(16), nullable=False),  # document | telemetry
    Column("extra", Text, nullable=True),  # unknown producer fields, kept
    Column("tenant", String(64), nullable=False, server_default="default"),  # core.tenants
    Index("ix_facts_source_status", "source", "status"),
    Index("ix_facts_claim_key", "claim_key"),
    Index("ix_facts_source_document", "source", "document_id"),
    Index("ix_facts_tenant_source", "tenant", "source"),
)

sources = Table(
    "sources",
    metadata,
    Column("source", String(256), primary_key=True),
    Column("source_type", String(32), nullable=False),
    Column("trust", Float, nullable=False),
    Column("first_seen_us", BigInteger, nullable=False),
    Column("last_seen_us", BigInteger, nullable=False),
)

edges = Table(
    "edges",
    metadata,
    Column("src", ID, primary_key=True),
    Column("dst", ID, primary_key=True),
    Column("weight", Float, nullable=False),
    Column("kind", String(16), primary_key=True, server_default="similarity"),  # core.graph_rank.EDGE_KINDS
    sqlite_with_rowid=False,  # one B-tree by the key: ingest writes and reads edges by it (migration 0006)
)

# Documents with a title or section: a text that names a title links to the lead fact.
documents = Table(
    "documents",
    metadata,
    Column("source", String(256), primary_key=True),
    Column("document_id", String(256), primary_key=True),
    Column("title", String(1024), nullable=True),
    Column("title_key", String(1024), nullable=True),  # core.graph_rank.title_key
    Column("section", String(1024), nullable=True),
    Column("lead_fact_id", ID, nullable=False),
    Index("ix_documents_title_key", "title_key"),
)

sessions = Table(
    "sessions",
    metadata,
    Column("session_id", String(256), primary_key=True),
    Column("embedding_model", String(256), nullable=False),
    Column("window_count", Integer, nullable=False),
    Column("max_windows", Integer, nullable=False),
    Column("state", Text, nullable=False),  # coverage set, residual set, sub-queries, blacklist (JSON)
    Column("updated_at_us", BigInteger, nullable=False),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("event_id", ID, nullable=False, unique=True),
    Column("audit_type", String(48), nullable=False),
    Column("at_us", BigInteger, nullable=False),
    Column("key", String(512), nullable=False),
    Column("details", Text, nullable=False),
    Index("ix_audit_log_type", "audit_type"),
)

refresh_requests = Table(
    "refresh_requests",
    metadata,
    Column("request_id", ID, primary_key=True),
    Column("claim_key", String(1100), nullable=False),
    Column("source", String(256), nullable=False),
    Column("status", String(16), nullable=False),  # open | resolved | rejected
    Column("payload", Text, nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    Column("resolved_at_us", BigInteger, nullable=True),
    Column("resolved_by", String(256), nullable=True),
    Index("ix_refresh_requests_status", "status"),
    Index("ix_refresh_requests_claim_key_status", "claim_key", "status"),  # the arbiter's read per changed verdict
)

quarantine_candidates = Table(
    "quarantine_candidates",
    metadata,
    Column("candidate_id", ID, primary_key=True),
    Column("claim_key", String(1100), nullable=False),
    Column("source", String(256), nullable=False),
    Column("status", String(16), nullable=False),  # pending | confirmed | released
    Column("payload", Text, nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    Column("decided_at_us", BigInteger, nullable=True),
    Column("decided_by", String(256), nullable=True),
    Index("ix_quarantine_candidates_status", "status"),
    Index("ix_quarantine_candidates_claim_key", "claim_key"),  # the arbiter's read per poisoning verdict
)

claims = Table(
    "claims",
    metadata,
    Column("claim_key", String(1100), primary_key=True),
    Column("verdict", String(32), nullable=False),
    Column("fingerprint", ID, nullable=False),
    Column("details", Text, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
)

# Each fact's unit float32 vector, written with the fact where workers keep their own embedded index
# (qdrant-edge on a shared PostgreSQL): what a worker loads at start to project the log's facts.
fact_vectors = Table(
    "fact_vectors",
    metadata,
    Column("fact_id", ID, primary_key=True),
    Column("vector", LargeBinary, nullable=False),
)

# The words of each fact's text (``core.graph_rank.title_words``): a document whose title is new to
# the fabric finds the facts that name it under one word of the title, not by scanning every text.
fact_words = Table(
    "fact_words",
    metadata,
    Column("word", String(64), primary_key=True),
    Column("fact_id", ID, primary_key=True),
    sqlite_with_rowid=False,
)

processed_events = Table(
    "processed_events",
    metadata,
    Column("consumer", String(64), primary_key=True),
    Column("event_id", String(256), primary_key=True),
    Column("content_hash", String(64), nullable=False),
    Column("topic", String(256), nullable=False),
    Column("offset", BigInteger, nullable=False),
)

consumer_offsets = Table(
    "consumer_offsets",
    metadata,
    Column("consumer", String(64), primary_key=True),
    Column("topic", String(256), primary_key=True),
    Column("partition", Integer, primary_key=True),
    Column("next_offset", BigInteger, nullable=False),
)

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

# ``sealed`` input records (docs/security.md "The log forgets"): one key per (tenant, source, document).
# ``forget`` destroys a key by setting it to NULL; the row stays, so a record sealed with a destroyed
# key is known as forgotten rather than as sealed with a key nobody issued.
sealing_keys = Table(
    "sealing_keys",
    metadata,
    Column("key_id", ID, primary_key=True),
    Column("tenant", String(64), nullable=False),
    Column("source", String(256), nullable=False),
    Column("document", String(256), nullable=False),
    Column("key", LargeBinary, nullable=True),
    Index("ix_sealing_keys_scope", "tenant", "source", "document"),
)
