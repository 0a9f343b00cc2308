"""Forgetting (``crp-stream forget``): a tenant's documents, a source or the whole tenant leave the
fabric's tables: facts, their stored vectors, edges, claims and what names them (refresh requests,
quarantine candidates, document titles). Rows are deleted, never marked: the text must not survive in the database."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, delete, select

from crp_stream.core.tenants import scoped_key
from crp_stream.fabric.sql import tables as t

_CHUNK = 500  # ids in one IN list


class Forgotten(NamedTuple):
    """One ``forget`` applied in a transaction: what a runtime removes from its log after the commit."""

    tenant: str
    kind: str
    target: str | None
    needles: list[bytes]  # ``core.forget.forgotten_needles``
    topic: str  # the command's record: the log forgets what came before it
    offset: int


class ForgetRecords:
    conn: Connection
    _rows: dict[str, Any]

    def flush(self) -> None:
        raise NotImplementedError  # Repository's

    def delete_fact_words(self, facts: Sequence[tuple[str, str]]) -> None:
        raise NotImplementedError  # Repository's (``WordRecords``)

    def forgettable(self, tenant: str, kind: str, target: str | None) -> list[dict[str, Any]]:
        """The facts ``forget`` removes, ``(fact_id, source, document_id, claim_key, text)`` each: the
        tenant's document ``target`` (any source; a document without an id is named by its event
        id), its source ``target``, or every fact of the tenant (``kind`` "all")."""
        f = t.facts.c
        q = select(f.fact_id, f.source, f.document_id, f.claim_key, f.text).where(f.tenant == tenant)
        if kind == "document":
            assert target is not None
            q = q.where(
                (f.document_id == scoped_key(tenant, target))
                | ((f.kind == "document") & f.document_id.is_(None) & (f.origin_event_id == target))
            )
        elif kind == "source":
            q = q.where(f.source == target)
        return [dict(r._mapping) for r in self.conn.execute(q.order_by(f.fact_id))]

    def erase_facts(self, facts: Sequence[dict[str, Any]], tenant: str, whole_sources: Sequence[str]) -> dict[str, int]:
        """Delete ``facts`` and what derives from them; counts by table. A claim that loses a member
        is deleted whole (its details quote the members' values); the arbiter derives it again from
        the facts left on their next change. ``whole_sources``: sources of the tenant none of whose
        facts is left (their row of trust and first-seen time goes too)."""
        self.flush()  # buffered claim and session writes first: nothing re-inserts what is deleted here
        ids = sorted({str(r["fact_id"]) for r in facts})
        keys = sorted({str(r["claim_key"]) for r in facts if r["claim_key"] is not None})
        docs = sorted({(str(r["source"]), str(r["document_id"])) for r in facts if r["document_id"] is not None})
        counts = {"facts": 0, "edges": 0, "claims": 0, "documents": 0, "refresh_requests": 0, "quarantine": 0}
        for part in _chunks(ids):
            counts["edges"] += self._delete(delete(t.edges).where(t.edges.c.src.in_(part) | t.edges.c.dst.in_(part)))
            counts["documents"] += self._delete(delete(t.documents).where(t.documents.c.lead_fact_id.in_(part)))
            counts["facts"] += self._delete(delete(t.facts).where(t.facts.c.fact_id.in_(part)))
            self._delete(delete(t.fact_vectors).where(t.fact_vectors.c.fact_id.in_(part)))  # the workers' projection
        self.delete_fact_words([(str(r["fact_id"]), str(r["text"])) for r in facts])  # words of their text
        for source, doc in docs:
            d = t.documents.c
            counts["documents"] += self._delete(
                delete(t.documents).where((d.source == source) & (d.document_id == doc))
            )
        for part in _chunks(keys):
            counts["claims"] += self._delete(delete(t.claims).where(t.claims.c.claim_key.in_(part)))
            r, qc = t.refresh_requests.c, t.quarantine_candidates.c
            counts["refresh_requests"] += self._delete(delete(t.refresh_requests).where(r.claim_key.in_(part)))
            counts["quarantine"] += self._delete(delete(t.quarantine_candidates).where(qc.claim_key.in_(part)))
        for source in whole_sources:
            left = self.conn.execute(select(t.facts.c.fact_id).where(t.facts.c.source == source).limit(1)).first()
            if left is None:  # no other tenant's fact names it either
                self._delete(delete(t.sources).where(t.sources.c.source == source))
        for fid in ids:
            self._rows.pop(fid, None)
        return counts

    def _delete(self, statement: Any) -> int:
        return int(self.conn.execute(statement).rowcount or 0)


def _chunks(ids: Sequence[Any]) -> list[list[Any]]:
    return [list(ids[i : i + _CHUNK]) for i in range(0, len(ids), _CHUNK)]
