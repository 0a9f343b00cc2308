"""Ingestion: crp.documents and crp.telemetry become facts (SPEC-009 fact shape, CONTRACT).

The ingestion epoch is the record's log-append time and nothing else; ``modified_at`` is the
producer's claim and feeds recency only. Fact ids derive from source, document, position and
content, so a redelivered event changes nothing and a changed sentence supersedes the old one.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from crp_stream import events
from crp_stream.core.claim_values import claim_key
from crp_stream.core.durations import format_duration, parse_duration
from crp_stream.core.ids import derive_id
from crp_stream.core.sentences import split_sentences
from crp_stream.events import Rejected
from crp_stream.events.common import SourceType
from crp_stream.fabric.embedding_prefetch import EmbeddingPrefetch
from crp_stream.fabric.fabric import Fabric, UnitOfWork
from crp_stream.fabric.rows import FactRow
from crp_stream.fabric.vectors import VectorItem
from crp_stream.processors import doc_graph
from crp_stream.processors.base import Emitter, Handler, Record, dt_to_us, rfc3339, us_to_dt
from crp_stream.processors.provenance import admit
from crp_stream.processors.similarity import write_similarity_edges

log = logging.getLogger(__name__)

FACTS = "crp.facts"


@dataclass
class _Draft:
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
    vector: list[float] | None
    extra: dict[str, Any] | None


class IngestHandler(Handler[events.DocumentPublished | events.TelemetryObserved]):
    group = "ingest"
    topics = ("crp.documents", "crp.telemetry")

    def lookahead(self, records: Sequence[Record], fabric: Fabric) -> None:
        """Announce each input's sentences to an ``EmbeddingPrefetch`` embedder, one job per record in
        log order: the model embeds the next documents while this thread handles the current one."""
        emb = fabric.embedder
        if not isinstance(emb, EmbeddingPrefetch):
            return
        s = fabric.settings
        for record in records:
            try:
                event = events.decode_input(
                    record.topic, record.value, max_bytes=s.max_record_bytes, max_facts=s.max_facts_per_document
                )
            except events.Rejected:
                continue  # dispatch dead-letters it
            if isinstance(event, events.DocumentPublished | events.TelemetryObserved):
                emb.announce(texts_to_embed(event))

    def handle(
        self, event: events.DocumentPublished | events.TelemetryObserved, record: Record, uow: UnitOfWork, out: Emitter
    ) -> None:
        # Provenance first: an unproven source is dead-lettered, or ingested as ``unproven``.
        admission = admit(event, record, uow, out)
        event = admission.event
        if isinstance(event, events.TelemetryObserved):
            kind = "telemetry"
            source_type: SourceType = "telemetry"
            drafts = [self._telemetry_draft(event, uow)]
            modified_us = dt_to_us(event.observed_at)
            document_id = None
        else:
            kind = "document"
            source_type = event.source_type
            drafts = self._document_drafts(event, uow)
            modified_us = dt_to_us(event.modified_at) if event.modified_at else record.ts_us
            document_id = event.document_id
        epoch_us = record.ts_us
        trust = (
            admission.trust
            if admission.trust is not None
            else uow.settings.trust_for(event.source, source_type, event.trust)
        )
        vectors = self._vectors(event, drafts, uow)

        existing = uow.repo.existing_fact_ids([d.fact_id for d in drafts])
        fresh = [(d, v) for d, v in zip(drafts, vectors, strict=True) if d.fact_id not in existing]
        if not fresh:
            return
        rows: list[FactRow] = []
        items = []
        for d, vec in fresh:
            expires_us = None
            factor = uow.settings.expire_after_ttls
            if factor is not None and d.ttl_s is not None:
                expires_us = modified_us + int(d.ttl_s * factor * 1_000_000)
            rows.append(
                {
                    "fact_id": d.fact_id,
                    "source": event.source,
                    "source_type": source_type,
                    "trust": trust,
                    "importance": d.importance,
                    "epoch_us": epoch_us,
                    "modified_at_us": modified_us,
                    "ttl_s": d.ttl_s,
                    "expires_at_us": expires_us,
                    "text": d.text,
                    "subject": d.subject,
                    "attribute": d.attribute,
                    "value": d.value,
                    "unit": d.unit,
                    "claim_key": claim_key(d.subject, d.attribute) if d.subject and d.attribute else None,
                    "status": "active",
                    "content_hash": hashlib.sha256(d.text.encode()).hexdigest(),
                    "document_id": document_id,
                    "position": d.position,
                    "origin_event_id": event.event_id,
                    "kind": kind,
                    "extra": None,
                }
            )
            items.append(
                VectorItem(
                    fact_id=d.fact_id,
                    vector=vec,
                    status="active",
                    expires_at=None if expires_us is None else expires_us / 1e6,
                    source=event.source,
                )
            )
        superseded = self._superseded(uow, event.source, document_id, [d for d, _ in fresh])
        uow.vectors.upsert(items)
        if superseded:
            uow.vectors.set_status(sorted(superseded), "superseded")
        edges = self._edges(uow, items)
        uow.repo.insert_facts(rows)
        # Each fact keeps its K nearest (SPEC-025 §1.3): an older fact that just gained a nearer
        # neighbour drops its farthest one (that direction only), so no list grows past K. Our graph
        # cache is left holding these facts' edges as written.
        touched = write_similarity_edges(uow, edges, uow.fabric.thresholds().edge_k)
        structure: set[str] = set()
        if isinstance(event, events.DocumentPublished):
            structure = doc_graph.structure_edges(
                uow, event, document_id, [d.fact_id for d in drafts], {d.fact_id: d.text for d, _ in fresh}
            )
        if touched or structure:  # other processes' caches see a new generation; ours holds what was written
            gen = uow.repo.increment_meta("graph_generation")  # atomic: concurrent workers never share one
            uow.fabric.graph.written(str(gen - 1), str(gen), ())
        uow.repo.touch_source(event.source, source_type, trust, epoch_us)
        for row, (draft, _vec) in zip(rows, fresh, strict=True):
            fact = events.FactRecorded(
                fact_id=row["fact_id"],
                source=row["source"],
                source_type=source_type,
                trust=row["trust"],
                epoch=record.at,
                modified_at=us_to_dt(row["modified_at_us"]),
                ttl=draft.ttl_text,
                text=row["text"],
                importance=row["importance"],
                subject=row["subject"],
                attribute=row["attribute"],
                value=row["value"],
                unit=row["unit"],
                status="active",
                origin_event_id=event.event_id,
            )
            out.emit(FACTS, row["fact_id"], events.encode(fact))
        for fid in sorted(superseded):
            gen = uow.repo.set_fact_status([fid], "superseded")
            uow.fabric.facts.written(gen - 1, gen, [fid])
            change = events.FactStatusChanged(
                fact_id=fid,
                status="superseded",
                reason="a newer version of the document replaced this sentence",
                at=record.at,
                cause_id=event.event_id,
            )
            out.emit(FACTS, fid, events.encode(change))

    # drafts -----------------------------------------------------------------------------------
    def _ttl(self, uow: UnitOfWork, source_type: str, *candidates: str | None) -> tuple[float | None, str]:
        for c in candidates:
            if c is not None:
                try:
                    return parse_duration(c), c
                except ValueError as exc:
                    raise Rejected(f"ttl: {exc}") from None
        default = uow.settings.ttl_by_type.get(source_type)
        return default, "none" if default is None else format_duration(default)

    def _document_drafts(self, event: events.DocumentPublished, uow: UnitOfWork) -> list[_Draft]:
        doc = event.document_id or event.event_id
        drafts: list[_Draft] = []
        items = fact_inputs(event)
        if not items:
            raise Rejected("text: contains no sentence to record")
        if len(items) > uow.settings.max_facts_per_document:
            raise Rejected(f"facts: {len(items)} facts, over the limit of {uow.settings.max_facts_per_document}")
        for pos, f in enumerate(items):
            ttl_s, ttl_text = self._ttl(uow, event.source_type, f.ttl, event.ttl)
            ident = f.fact_id or str(pos)
            content = hashlib.sha256(f.text.encode()).hexdigest()[:16]
            drafts.append(
                _Draft(
                    fact_id=derive_id("fact", event.source, doc, ident, content),
                    text=f.text,
                    position=pos,
                    importance=1.0 if f.importance is None else f.importance,
                    subject=f.subject,
                    attribute=f.attribute,
                    value=None if f.value is None else str(f.value),
                    unit=f.unit,
                    ttl_s=ttl_s,
                    ttl_text=ttl_text,
                    vector=f.embedding,
                    extra=None,
                )
            )
        return drafts

    def _telemetry_draft(self, event: events.TelemetryObserved, uow: UnitOfWork) -> _Draft:
        ttl_s, ttl_text = self._ttl(uow, "telemetry")
        value = str(event.value)
        text = telemetry_text(event)
        return _Draft(
            fact_id=derive_id("telemetry", event.source, event.event_id),
            text=text,
            position=0,
            importance=1.0,
            subject=event.subject,
            attribute=event.attribute,
            value=value,
            unit=event.unit,
            ttl_s=ttl_s,
            ttl_text=ttl_text,
            vector=event.embedding,
            extra=None,
        )

    def _vectors(
        self, event: events.DocumentPublished | events.TelemetryObserved, drafts: list[_Draft], uow: UnitOfWork
    ) -> list[np.ndarray]:
        emb = uow.embedder
        model = getattr(event, "embedding_model", None)
        given = [d.vector is not None for d in drafts]
        if model is not None and model != emb.model_id:
            raise Rejected(f"embedding_model: {model!r} does not match the fabric's embedder {emb.model_id!r}")
        if any(given) and model is None:
            raise Rejected("embedding_model: required when a vector is given")
        if emb.requires_vectors:
            missing = [i for i, g in enumerate(given) if not g]
            if missing:
                field = "embedding" if record_is_telemetry(event) else f"facts[{missing[0]}].embedding"
                raise Rejected(f"{field}: required with --embedder precomputed:{emb.model_id}")
        vecs: list[np.ndarray | None] = [None] * len(drafts)
        for i, d in enumerate(drafts):
            if d.vector is not None:
                try:
                    vecs[i] = emb.validate(d.vector) if hasattr(emb, "validate") else _normalise(d.vector)
                except ValueError as exc:
                    field = "embedding" if record_is_telemetry(event) else f"facts[{i}].embedding"
                    raise Rejected(f"{field}: {exc}") from None
        todo = [i for i, v in enumerate(vecs) if v is None]
        if todo:
            title = getattr(event, "title", None)
            computed = emb.embed([doc_graph.embedding_text(title, drafts[i].text) for i in todo])
            for i, v in zip(todo, computed, strict=True):
                vecs[i] = v
        dim = int(vecs[0].shape[0]) if vecs and vecs[0] is not None else emb.dim
        for i, v in enumerate(vecs):
            assert v is not None
            if v.shape[0] != dim:
                raise Rejected(f"facts[{i}].embedding: dimension {v.shape[0]} differs from {dim}")
        reason = uow.fabric.check_model(uow, emb.model_id, dim)
        if reason:
            raise Rejected(reason)
        doc_graph.record_convention(uow)
        return [v for v in vecs if v is not None]

    def _superseded(self, uow: UnitOfWork, source: str, document_id: str | None, drafts: list[_Draft]) -> set[str]:
        if document_id is None:
            return set()
        positions = {d.position for d in drafts}
        new_ids = {d.fact_id for d in drafts}
        return {
            f["fact_id"]
            for f in uow.repo.document_facts(source, document_id)
            if f["position"] in positions and f["fact_id"] not in new_ids and f["status"] == "active"
        }

    def _edges(self, uow: UnitOfWork, items: list[VectorItem]) -> list[tuple[str, str, float]]:
        """SPEC-025 §1.3: the K nearest neighbours with cosine >= the edge threshold, one batched query."""
        th = uow.fabric.thresholds()
        hits = uow.vectors.neighbours_many(
            [it.vector for it in items], th.edge_k, th.edge_threshold, [it.fact_id for it in items]
        )
        return [
            (it.fact_id, other, round(float(score), 6))
            for it, found in zip(items, hits, strict=True)
            for other, score in found
        ]


def telemetry_text(event: events.TelemetryObserved) -> str:
    value = str(event.value)
    return event.text or f"{event.subject} {event.attribute} is {value}{' ' + event.unit if event.unit else ''}"


def texts_to_embed(event: events.DocumentPublished | events.TelemetryObserved) -> list[str]:
    """What ``handle`` gives the embedder for ``event`` (the facts without a vector), without a fabric."""
    if isinstance(event, events.TelemetryObserved):
        return [] if event.embedding is not None else [telemetry_text(event)]
    return [doc_graph.embedding_text(event.title, f.text) for f in fact_inputs(event) if f.embedding is None]


def fact_inputs(event: events.DocumentPublished) -> list[events.FactInput]:
    """A document's facts: as given, or one per sentence of its text."""
    if event.facts:
        return list(event.facts)
    return [events.FactInput(text=s) for s in split_sentences(event.text or "")]


def record_is_telemetry(event: events.DocumentPublished | events.TelemetryObserved) -> bool:
    return getattr(event, "observed_at", None) is not None


def _normalise(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    if not np.all(np.isfinite(a)):
        raise ValueError("contains NaN or inf")
    n = float(np.linalg.norm(a))
    if n == 0.0:
        raise ValueError("is the zero vector")
    return a / n


__all__ = ["IngestHandler", "rfc3339"]
