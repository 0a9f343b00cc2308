"""Ingestion: crp.documents and crp.telemetry become facts (SPEC-009 fact shape, CONTRACT).

The ingestion epoch is the record's log-append time and nothing else; ``modified_at`` is the
producer's claim and feeds recency only. Fact ids derive from source, document, position and
content, so a redelivered event changes nothing and a changed sentence supersedes the old one.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

from crp_stream import events
from crp_stream.core.claim_values import claim_key
from crp_stream.core.tenants import DEFAULT_TENANT, scoped_claim_key, scoped_key
from crp_stream.events import Rejected, topics
from crp_stream.fabric.embedders.prefetch import EmbeddingPrefetch
from crp_stream.fabric.fabric import Fabric, UnitOfWork
from crp_stream.fabric.sql.rows import FactRow
from crp_stream.fabric.vectors.port import VectorItem
from crp_stream.processors import doc_graph
from crp_stream.processors.base import BatchItem, Emitter, Handler, Record, rfc3339, us_to_dt
from crp_stream.processors.batch_edges import tenant_neighbours
from crp_stream.processors.ingest_plan import (
    Draft,
    Plan,
    check_vectors,
    fact_inputs,
    plan,
    telemetry_text,
    texts_to_compute,
    texts_to_embed,
)
from crp_stream.processors.provenance import audit_unproven
from crp_stream.processors.sealed import sealing_of
from crp_stream.processors.similarity import write_similarity_edges

log = logging.getLogger(__name__)

FACTS = topics.FACTS


class IngestHandler(Handler[events.DocumentPublished | events.TelemetryObserved]):
    """Documents and telemetry become facts, a micro-batch at a time: every record is planned and
    checked (a bad one rejected alone), then the batch's facts are written together: one embedder
    call, one vector upsert, one k-NN search and one matrix product for the similarity edges, one
    insert per table."""

    group = "ingest"
    topics = (topics.DOCUMENTS, topics.TELEMETRY)
    batch_native = True

    def lookahead(self, records: Sequence[Record], fabric: Fabric) -> None:
        """Announce the inputs' sentences to an ``EmbeddingPrefetch`` embedder, one job for them all
        (the model batches them by length, across documents): the model embeds the next batch while
        this thread writes the current one."""
        emb = fabric.embedder
        if not isinstance(emb, EmbeddingPrefetch):
            return
        s = fabric.settings
        texts: list[str] = []
        for record in records:
            try:
                event = events.decode_input(
                    record.topic, record.value, max_bytes=s.max_record_bytes, max_facts=s.max_facts_per_document
                )
            except events.Rejected:
                continue  # dispatch dead-letters it
            if isinstance(event, events.DocumentPublished | events.TelemetryObserved):
                texts.extend(texts_to_embed(event))
        emb.announce(texts)

    def handle(
        self, event: events.DocumentPublished | events.TelemetryObserved, record: Record, uow: UnitOfWork, out: Emitter
    ) -> None:
        item = BatchItem(event, record, out)
        self.handle_batch([item], uow)
        if item.rejection is not None:
            raise item.rejection

    def handle_batch(
        self, items: Sequence[BatchItem[events.DocumentPublished | events.TelemetryObserved]], uow: UnitOfWork
    ) -> int:
        uow.fabric.follow(uow.repo)  # a reembed switched the active model: taken up without a restart
        plans: list[Plan | None] = []
        for item in items:
            try:
                plans.append(plan(item.event, item.record, uow))
            except Rejected as exc:
                item.reject(exc)
                plans.append(None)
        taken = self._take(plans, uow)
        group = [(n, items[n], p) for n, p in enumerate(plans[:taken]) if p is not None]
        self._vectors([p for _n, _i, p in group], uow)
        ready: list[tuple[BatchItem[events.DocumentPublished | events.TelemetryObserved], Plan]] = []
        for n, item, p in group:
            try:
                check_vectors(p, uow)
            except Rejected as exc:
                if n:  # nothing is written yet: the batch ends before it (it comes first in the next)
                    taken = n
                    break
                item.reject(exc)
                continue
            ready.append((item, p))
        if ready:
            self._write(ready, uow)
        return taken

    def _take(self, plans: Sequence[Plan | None], uow: UnitOfWork) -> int:
        """How many of ``plans`` form one batch, and which of their drafts are new. The batch ends
        before a document it holds already, before a fact id it holds already, past
        ``batch_facts`` new facts, before a record whose log time does not follow the last one's
        (event time then orders every fact of the batch: what the arbiter knows at an epoch is what
        record by record had stored), and before a document that replaces sentences of an earlier
        version (that one starts the next batch: what the facts before it cause, the arbiter's
        statuses among them, is applied first, as record by record)."""
        live = [p for p in plans if p is not None]
        existing = uow.repo.existing_fact_ids([d.fact_id for p in live for d in p.drafts])
        known = uow.repo.documents_facts([k for p in live if (k := p.doc_key) is not None])
        docs: set[tuple[str, str]] = set()
        ids: set[str] = set()
        facts = 0
        last_ts: int | None = None
        cap = uow.settings.batch_facts
        for n, p in enumerate(plans):
            if p is None:  # rejected: its dead letter stands after what the records before it cause
                if n:
                    return n
                continue
            key = p.doc_key
            p.fresh = [d for d in p.drafts if d.fact_id not in existing]
            p.superseded = _superseded(known.get(key, ()) if key else (), p.fresh)
            if n and (
                (key is not None and key in docs)
                or any(d.fact_id in ids for d in p.drafts)
                or p.superseded
                or (facts and facts + len(p.fresh) > cap)
                or (last_ts is not None and p.record.ts_us <= last_ts)
            ):
                return n
            last_ts = p.record.ts_us
            if key is not None:
                docs.add(key)
            ids.update(d.fact_id for d in p.drafts)
            facts += len(p.fresh)
        return len(plans)

    def _vectors(self, group: Sequence[Plan], uow: UnitOfWork) -> None:
        """The batch's missing vectors in one embedder call (it batches by the model's own size)."""
        todo = [x for p in group for x in texts_to_compute(p)]
        if not todo:
            return
        computed = uow.embedder.embed([text for _d, text in todo])
        for (draft, _text), v in zip(todo, computed, strict=True):
            draft.vector = v

    def _write(
        self,
        ready: Sequence[tuple[BatchItem[events.DocumentPublished | events.TelemetryObserved], Plan]],
        uow: UnitOfWork,
    ) -> None:
        rows: list[FactRow] = []
        vitems: list[VectorItem] = []
        owner: list[int] = []  # per new fact: its plan's place in ``ready``
        factor = uow.settings.expire_after_ttls
        for n, (_item, p) in enumerate(ready):
            for d in p.fresh:
                expires_us = None
                if factor is not None and d.ttl_s is not None:
                    expires_us = p.modified_us + int(d.ttl_s * factor * 1_000_000)
                rows.append(_row(p, d, expires_us))
                assert d.vector is not None
                vitems.append(
                    VectorItem(
                        fact_id=d.fact_id,
                        vector=d.vector,
                        status="active",
                        expires_at=None if expires_us is None else expires_us / 1e6,
                        source=p.source,
                        tenant=p.event.tenant,
                    )
                )
                owner.append(n)
        superseded = sorted({f for _i, p in ready if p.fresh for f in p.superseded})
        th = uow.fabric.thresholds()
        edges = tenant_neighbours(uow.vectors, vitems, owner, th.edge_k, th.edge_threshold)  # before the upsert
        place = {it.fact_id: i for i, it in enumerate(vitems)}
        uow.vectors.upsert(vitems)
        if superseded:
            uow.vectors.set_status(superseded, "superseded")
        uow.repo.insert_facts(rows)
        if uow.fabric.stores_vectors:
            uow.repo.insert_fact_vectors(vitems)
        uow.unreleased.update(it.fact_id for it in vitems)  # until the runtime releases their records
        # Each fact keeps its K nearest (SPEC-025 §1.3): an older fact that just gained a nearer
        # neighbour drops its farthest one (that direction only), so no list grows past K.
        write_similarity_edges(uow, edges, th.edge_k)
        documents = [(n, p) for n, (_i, p) in enumerate(ready) if isinstance(p.event, events.DocumentPublished)]
        structure = doc_graph.structure_edges(
            uow,
            [
                doc_graph.DocumentFacts(
                    p.event,
                    p.document_id or scoped_key(p.event.tenant, p.event.event_id),
                    [d.fact_id for d in p.drafts],
                    {d.fact_id: d.text for d in p.fresh},
                )
                for _n, p in documents
                if p.fresh and isinstance(p.event, events.DocumentPublished)
            ],
        )
        # the graph generation moves once per record that wrote edges, as record by record: other
        # processes' caches see a new generation; ours holds what was written
        linked = {owner[place[a]] for a, b, _w in edges if a != b} | {
            n for (n, p), ends in zip([d for d in documents if d[1].fresh], structure, strict=True) if ends
        }
        if linked:
            gen = uow.repo.increment_meta("graph_generation", len(linked))  # atomic: concurrent workers never share one
            uow.fabric.graph.written(str(gen - len(linked)), str(gen), ())
        _touch_sources(uow, [p for _i, p in ready if p.fresh])
        for item, p in ready:
            audit_unproven(p.admission, item.record, uow, item.out)
            self._emit(item, p, uow)

    def _emit(
        self, item: BatchItem[events.DocumentPublished | events.TelemetryObserved], p: Plan, uow: UnitOfWork
    ) -> None:
        if not p.fresh:
            return
        at = item.record.at
        modified = us_to_dt(p.modified_us)
        seal = sealing_of(p.event, uow)
        for d in p.fresh:
            fact = events.FactRecorded(
                fact_id=d.fact_id,
                source=p.source,
                source_type=p.source_type,
                trust=p.trust,
                epoch=at,
                modified_at=modified,
                ttl=d.ttl_text,
                text=None if seal else d.text,
                sealed=seal(d.fact_id, d.text) if seal else None,
                importance=d.importance,
                subject=d.subject,
                attribute=d.attribute,
                value=d.value,
                unit=d.unit,
                status="active",
                origin_event_id=p.event.event_id,
                tenant=None if p.tenant == DEFAULT_TENANT else p.tenant,
            )
            item.out.emit(FACTS, d.fact_id, events.encode(fact))
        for fid in sorted(p.superseded):
            gen = uow.repo.set_fact_status([fid], "superseded")
            uow.fabric.facts.written(gen - 1, gen, [fid])
            change = events.FactStatusChanged(
                fact_id=fid,
                status="superseded",
                reason="a newer version of the document replaced this sentence",
                at=at,
                cause_id=p.event.event_id,
            )
            item.out.emit(FACTS, fid, events.encode(change))


def _row(p: Plan, d: Draft, expires_us: int | None) -> FactRow:
    return {
        "fact_id": d.fact_id,
        "source": p.source,
        "source_type": p.source_type,
        "trust": p.trust,
        "importance": d.importance,
        "epoch_us": p.record.ts_us,
        "modified_at_us": p.modified_us,
        "ttl_s": d.ttl_s,
        "expires_at_us": expires_us,
        "text": d.text,
        "subject": d.subject,
        "attribute": d.attribute,
        "value": d.value,
        "unit": d.unit,
        "claim_key": scoped_claim_key(p.tenant, claim_key(d.subject, d.attribute))
        if d.subject and d.attribute
        else None,
        "status": "active",
        "content_hash": hashlib.sha256(d.text.encode()).hexdigest(),
        "document_id": p.document_id,
        "position": d.position,
        "origin_event_id": p.event.event_id,
        "kind": p.kind,
        "extra": None,
        "tenant": p.tenant,
    }


def _superseded(known: Sequence[FactRow], drafts: Sequence[Draft]) -> set[str]:
    """The document's active facts at the positions of ``drafts`` that none of them is."""
    if not known:
        return set()
    positions = {d.position for d in drafts}
    new_ids = {d.fact_id for d in drafts}
    return {
        f["fact_id"]
        for f in known
        if f["position"] in positions and f["fact_id"] not in new_ids and f["status"] == "active"
    }


def _touch_sources(uow: UnitOfWork, plans: Sequence[Plan]) -> None:
    """``touch_source`` as record by record leaves it: a source's first record of the batch inserts
    it (its first-seen time), its last one sets what the row ends with."""
    first: dict[str, Plan] = {}
    last: dict[str, Plan] = {}
    for p in plans:
        first.setdefault(p.source, p)
        last[p.source] = p
    for source, p in first.items():
        uow.repo.touch_source(source, p.source_type, p.trust, p.record.ts_us)
        q = last[source]
        if q is not p:
            uow.repo.touch_source(source, q.source_type, q.trust, q.record.ts_us)


__all__ = ["IngestHandler", "fact_inputs", "rfc3339", "telemetry_text", "texts_to_embed"]
