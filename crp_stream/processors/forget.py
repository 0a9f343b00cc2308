"""``forget`` (an operator command, ``crp-stream forget``, the console): a tenant's document, one of
its sources, or the whole tenant leaves the fabric for good.

Facts, their vectors, similarity and structure edges, claims (with the refresh requests and
quarantine candidates that quote them) and cache entries go; a ``FACTS_FORGOTTEN`` audit event
records what was removed by counts, never by text. The embedded runtime then removes the records
that carry the forgotten text from its log (``Forgotten``), so ``rebuild`` cannot bring them back.
"""

from __future__ import annotations

from crp_stream import events
from crp_stream.core.forget import forget_target, forgotten_needles
from crp_stream.core.ids import derive_id
from crp_stream.core.tenants import tenant_name
from crp_stream.events import Rejected
from crp_stream.events.topics import FACTS
from crp_stream.fabric.caches.graph import GRAPH_GENERATION
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.fabric.sql.records.forget import Forgotten
from crp_stream.fabric.sql.repository import FACTS_GENERATION
from crp_stream.processors.base import Emitter, Record
from crp_stream.processors.effects import audit


def forget(cmd: events.OperatorCommand, actor: str, record: Record, uow: UnitOfWork, out: Emitter) -> None:
    tenant = tenant_name(cmd.tenant)
    try:
        kind, target = forget_target(cmd.target_id)
    except ValueError as exc:
        raise Rejected(f"target_id: {exc}") from None
    facts = uow.repo.forgettable(tenant, kind, target)
    ids = [str(r["fact_id"]) for r in facts]
    sources = sorted({str(r["source"]) for r in facts}) if kind != "document" else []
    counts = uow.repo.erase_facts(facts, tenant, sources)
    uow.vectors.delete(ids)
    keys = uow.repo.destroy_sealing_keys(tenant, kind, target)  # sealed records on the log: unreadable now
    if uow.repo.claims is not None:
        uow.repo.claims.invalidate_facts([{"fact_id": r["fact_id"], "claim_key": r["claim_key"]} for r in facts])
    # every process's caches: the counters move (other workers reload), this one's are emptied
    uow.repo.increment_meta(GRAPH_GENERATION)
    uow.repo.increment_meta(FACTS_GENERATION)
    uow.repo._claims_written()
    uow.fabric.graph.clear()
    uow.fabric.facts.clear()
    needles = forgotten_needles(ids, [str(r["text"]) for r in facts])
    # the changelog says so, by id only: every worker's own vector index drops the points
    # (runtime/kafka/projection.py), and a consumer of crp.facts learns the fact is gone
    for fid in ids:
        change = events.FactStatusChanged(
            fact_id=fid,
            status="forgotten",
            reason="forgotten by operator command",
            at=record.at,
            cause_id=cmd.command_id,
        )
        out.emit(FACTS, fid, events.encode(change))
    uow.forgotten.append(Forgotten(tenant, kind, target, needles, record.topic, record.offset))
    audit(
        uow,
        out,
        derive_id("audit", "FACTS_FORGOTTEN", cmd.command_id),
        "FACTS_FORGOTTEN",
        tenant,
        record.ts_us,
        {
            "tenant": tenant,
            "target": kind if target is None else f"{kind}:{target}",
            "facts": counts["facts"],
            "edges": counts["edges"],
            "claims": counts["claims"],
            "documents": counts["documents"],
            "refresh_requests": counts["refresh_requests"],
            "quarantine_candidates": counts["quarantine"],
            "vectors": len(ids),
            "sealing_keys": keys,
            "actor": actor,
            "command_id": cmd.command_id,
        },
    )


__all__ = ["forget"]
