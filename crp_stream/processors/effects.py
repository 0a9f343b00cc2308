"""Effects shared by the arbiter and the operator handler: audit events and fact status changes.

Every effect is an event on its topic plus the matching projection write, with an id derived from
its cause, so a redelivered input re-emits nothing new (the audit log and the event log both ignore
a repeated id).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from crp_stream import events
from crp_stream.core.ids import derive_id
from crp_stream.events import AuditType, FactStatus, direct
from crp_stream.events.topics import AUDIT, FACTS
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors.base import Emitter, us_to_dt

REASON_MAX = 4000  # the contract's Reason holds 4096 characters
IDS_MAX = 1000  # the contract's id lists hold 1000 ids
AUTO_POLICY = "auto-quarantine policy"  # the actor of a quarantine the opt-in policy confirms


def short(text: str, limit: int = REASON_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def audit(
    uow: UnitOfWork, out: Emitter, event_id: str, audit_type: AuditType, key: str, at_us: int, details: dict[str, Any]
) -> bool:
    """Append an audit record and emit it on ``crp.audit``; False (and nothing emitted) if already there."""
    at = us_to_dt(at_us)
    # the model only where it would refuse or convert a value; else the same bytes without it
    record = None
    if not direct.audit_direct(event_id, audit_type, details):
        record = events.AuditRecorded(event_id=event_id, audit_type=audit_type, at=at, details=details)
    if not uow.repo.append_audit(event_id, audit_type, at_us, key, details):  # one statement: the id was there
        return False
    raw = events.encode(record) if record is not None else direct.audit_bytes(event_id, audit_type, at, details)
    out.emit(AUDIT, key, raw, record_id=event_id)
    return True


def change_status(
    uow: UnitOfWork,
    out: Emitter,
    fact_ids: Sequence[str],
    status: FactStatus,
    reason: str,
    at_us: int,
    cause_id: str | None,
    from_statuses: Iterable[str],
) -> list[str]:
    """Move the facts currently in ``from_statuses`` to ``status``: fabric row, vector payload and a
    ``FactStatusChanged`` on ``crp.facts``. Returns the ids that changed, sorted."""
    allowed = set(from_statuses)
    rows = uow.repo.facts_by_ids(fact_ids)
    ids = sorted(f for f, row in rows.items() if row["status"] in allowed and row["status"] != status)
    if not ids:
        return []
    gen = uow.repo.set_fact_status(ids, status)
    uow.fabric.facts.written(gen - 1, gen, ids)
    uow.vectors.set_status(ids, status)
    at, text = us_to_dt(at_us), short(reason)
    for fid in ids:
        if direct.status_changed_direct(fid, status, text, cause_id):
            raw = direct.status_changed_bytes(fid, status, text, at, cause_id)
        else:
            change = events.FactStatusChanged(fact_id=fid, status=status, reason=text, at=at, cause_id=cause_id)
            raw = events.encode(change)
        out.emit(FACTS, fid, raw)
    return ids


def quarantine_candidate(
    uow: UnitOfWork,
    out: Emitter,
    candidate_id: str,
    source: str,
    fact_ids: Sequence[str],
    at_us: int,
    actor: str,
    reason: str | None,
    cause_id: str,
) -> list[str]:
    """Quarantine a candidate's facts (operator confirm or the opt-in auto policy) and audit it."""
    changed = change_status(
        uow,
        out,
        fact_ids,
        "quarantined",
        reason or f"quarantine confirmed by {actor}",
        at_us,
        cause_id,
        ("active", "stale"),
    )
    uow.repo.decide_candidate(candidate_id, "confirmed", at_us, actor)
    details: dict[str, Any] = {
        "candidate_id": candidate_id,
        "source": source,
        "fact_ids": changed,
        "actor": actor,
        "reason": reason,
        "cause_id": cause_id,
    }
    if actor == AUTO_POLICY:
        details["policy"] = AUTO_POLICY
    audit(
        uow,
        out,
        derive_id("audit", "FACT_QUARANTINED", candidate_id, cause_id),
        "FACT_QUARANTINED",
        source,
        at_us,
        details,
    )
    return changed


def chunks(ids: Sequence[str], size: int = IDS_MAX) -> list[list[str]]:
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)] or [[]]
