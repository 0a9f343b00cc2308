"""What one document or telemetry record will write, checked before anything is written.

Ingest applies a micro-batch in two steps: every record is planned here (provenance, drafts, TTLs,
given vectors), and a record that fails a check is rejected alone, having written nothing; the
records that pass are written together (``processors.ingest``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crp_stream import events
from crp_stream.core.durations import format_duration, parse_duration
from crp_stream.core.ids import derive_id
from crp_stream.core.sentences import split_sentences
from crp_stream.core.tenants import scoped_id_parts, scoped_key, tenant_name
from crp_stream.events import Rejected
from crp_stream.events.common import SourceType
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors import doc_graph
from crp_stream.processors.base import Record, dt_to_us
from crp_stream.processors.provenance import Admission, admit


@dataclass
class Draft:
    fact_id: str
    text: str
    position: int
    importance: float
    subject: str | None
    attribute: str | None
    value: str | None
    unit: str | None
    ttl_s: float | None
    ttl_text: str
    given: list[float] | None  # the producer's vector, as sent
    vector: np.ndarray | None = None  # the given one checked, or computed before the write


@dataclass
class Plan:
    """One admitted input: its facts as drafts, and where they go."""

    event: events.DocumentPublished | events.TelemetryObserved
    record: Record
    admission: Admission
    kind: str
    source_type: SourceType
    document_id: str | None
    modified_us: int
    trust: float
    drafts: list[Draft]
    fresh: list[Draft] = field(default_factory=list)  # the drafts not in the fabric yet
    superseded: set[str] = field(default_factory=set)  # active facts of the document these replace

    @property
    def source(self) -> str:
        return self.event.source

    @property
    def tenant(self) -> str:
        return tenant_name(self.event.tenant)

    @property
    def doc_key(self) -> tuple[str, str] | None:
        return None if self.document_id is None else (self.event.source, self.document_id)


def plan(event: events.DocumentPublished | events.TelemetryObserved, record: Record, uow: UnitOfWork) -> Plan:
    """Check one input and draft its facts; raises ``Rejected`` (having written nothing)."""
    admission = admit(event, record, uow)  # an unproven source: dead-lettered, or relabelled
    event = admission.event
    source_type: SourceType
    if isinstance(event, events.TelemetryObserved):
        kind, source_type = "telemetry", "telemetry"
        drafts = [_telemetry_draft(event, uow)]
        modified_us = dt_to_us(event.observed_at)
        document_id = None
    else:
        kind, source_type = "document", event.source_type
        drafts = _document_drafts(event, uow)
        modified_us = dt_to_us(event.modified_at) if event.modified_at else record.ts_us
        document_id = None if event.document_id is None else scoped_key(event.tenant, event.document_id)
    trust = (
        admission.trust
        if admission.trust is not None
        else uow.settings.trust_for(event.source, source_type, event.trust, event.tenant)
    )
    _given_vectors(event, drafts, uow)
    return Plan(event, record, admission, kind, source_type, document_id, modified_us, trust, drafts)


def check_vectors(p: Plan, uow: UnitOfWork) -> None:
    """Once every draft has its vector: one dimension, and the fabric's model (SPEC-024 §2.5)."""
    vecs = [(i, d.vector) for i, d in enumerate(p.drafts) if d.vector is not None]
    emb = uow.embedder
    dim = int(vecs[0][1].shape[0]) if vecs else emb.dim
    for i, v in vecs:
        if v.shape[0] != dim:
            raise Rejected(f"facts[{i}].embedding: dimension {v.shape[0]} differs from {dim}")
    reason = uow.fabric.check_model(uow, emb.model_id, dim)
    if reason:
        raise Rejected(reason)
    doc_graph.record_convention(uow)


def texts_to_compute(p: Plan) -> list[tuple[Draft, str]]:
    """The fresh drafts without a vector, with what the embedder reads for each."""
    title = getattr(p.event, "title", None)
    return [(d, doc_graph.embedding_text(title, d.text)) for d in p.fresh if d.vector is None]


def _ttl(uow: UnitOfWork, source_type: str, *candidates: str | None) -> tuple[float | None, str]:
    for c in candidates:
        if c is not None:
            try:
                return parse_duration(c), c
            except ValueError as exc:
                raise Rejected(f"ttl: {exc}") from None
    default = uow.settings.ttl_by_type.get(source_type)
    return default, "none" if default is None else format_duration(default)


def _document_drafts(event: events.DocumentPublished, uow: UnitOfWork) -> list[Draft]:
    doc = event.document_id or event.event_id
    items = fact_inputs(event)
    if not items:
        raise Rejected("text: contains no sentence to record")
    if len(items) > uow.settings.max_facts_per_document:
        raise Rejected(f"facts: {len(items)} facts, over the limit of {uow.settings.max_facts_per_document}")
    drafts: list[Draft] = []
    for pos, f in enumerate(items):
        ttl_s, ttl_text = _ttl(uow, event.source_type, f.ttl, event.ttl)
        content = hashlib.sha256(f.text.encode()).hexdigest()[:16]
        drafts.append(
            Draft(
                fact_id=derive_id(
                    "fact", *scoped_id_parts(event.tenant, event.source, doc, f.fact_id or str(pos), content)
                ),
                text=f.text,
                position=pos,
                importance=1.0 if f.importance is None else f.importance,
                subject=f.subject,
                attribute=f.attribute,
                value=None if f.value is None else str(f.value),
                unit=f.unit,
                ttl_s=ttl_s,
                ttl_text=ttl_text,
                given=f.embedding,
            )
        )
    return drafts


def _telemetry_draft(event: events.TelemetryObserved, uow: UnitOfWork) -> Draft:
    ttl_s, ttl_text = _ttl(uow, "telemetry")
    return Draft(
        fact_id=derive_id("telemetry", *scoped_id_parts(event.tenant, event.source, event.event_id)),
        text=telemetry_text(event),
        position=0,
        importance=1.0,
        subject=event.subject,
        attribute=event.attribute,
        value=str(event.value),
        unit=event.unit,
        ttl_s=ttl_s,
        ttl_text=ttl_text,
        given=event.embedding,
    )


def _given_vectors(
    event: events.DocumentPublished | events.TelemetryObserved, drafts: list[Draft], uow: UnitOfWork
) -> None:
    """The producer's vectors: checked against the embedder, each made a unit vector."""
    emb = uow.embedder
    model = getattr(event, "embedding_model", None)
    given = [d.given is not None for d in drafts]
    if model is not None and model != emb.model_id:
        raise Rejected(f"embedding_model: {model!r} does not match the fabric's embedder {emb.model_id!r}")
    if any(given) and model is None:
        raise Rejected("embedding_model: required when a vector is given")
    telemetry = isinstance(event, events.TelemetryObserved)
    if emb.requires_vectors:
        missing = [i for i, g in enumerate(given) if not g]
        if missing:
            field_ = "embedding" if telemetry else f"facts[{missing[0]}].embedding"
            raise Rejected(f"{field_}: required with --embedder precomputed:{emb.model_id}")
    validate: Any = getattr(emb, "validate", None)
    many: Any = getattr(emb, "validate_many", None)
    carried = [d for d in drafts if d.given is not None]
    if many is not None and len(carried) > 1:
        try:
            for d, v in zip(carried, many([d.given for d in carried]), strict=True):
                d.vector = v
            return
        except ValueError:
            pass  # named below, with its fact's place
    for i, d in enumerate(drafts):
        if d.given is None:
            continue
        try:
            d.vector = validate(d.given) if validate is not None else _normalise(d.given)
        except ValueError as exc:
            field_ = "embedding" if telemetry else f"facts[{i}].embedding"
            raise Rejected(f"{field_}: {exc}") from None


def telemetry_text(event: events.TelemetryObserved) -> str:
    value = str(event.value)
    return event.text or f"{event.subject} {event.attribute} is {value}{' ' + event.unit if event.unit else ''}"


def texts_to_embed(event: events.DocumentPublished | events.TelemetryObserved) -> list[str]:
    """What ingest gives the embedder for ``event`` (the facts without a vector), without a fabric."""
    if isinstance(event, events.TelemetryObserved):
        return [] if event.embedding is not None else [telemetry_text(event)]
    return [doc_graph.embedding_text(event.title, f.text) for f in fact_inputs(event) if f.embedding is None]


def fact_inputs(event: events.DocumentPublished) -> list[events.FactInput]:
    """A document's facts: as given, or one per sentence of its text."""
    if event.facts:
        return list(event.facts)
    return [events.FactInput(text=s) for s in split_sentences(event.text or "")]


def _normalise(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    if not np.all(np.isfinite(a)):
        raise ValueError("contains NaN or inf")
    n = float(np.linalg.norm(a))
    if n == 0.0:
        raise ValueError("is the zero vector")
    return a / n


__all__ = [
    "Draft",
    "Plan",
    "check_vectors",
    "fact_inputs",
    "plan",
    "telemetry_text",
    "texts_to_compute",
    "texts_to_embed",
]
