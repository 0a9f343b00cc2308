"""Operator decisions from ``crp.operator.commands``.

``resolve_refresh`` closes a refresh request; ``acknowledge_refresh`` records that an operator took it
(audit only: the request stays open, so the arbiter still resolves it when the source catches up);
``reject_refresh`` closes it as ``rejected`` (the source was not stale) and returns the source's facts
it had marked ``stale`` to ``active``; ``confirm_quarantine`` quarantines a candidate's facts;
``release_quarantine`` returns a candidate's (or one fact's) quarantined facts to ``active``;
``forget`` removes a tenant's document, source or every fact (``processors.forget``). Every
command names its actor, who is written into the audit event; the audit log keeps the history. A
command that cannot apply is rejected with the reason (dead-letter plus EVENT_REJECTED audit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crp_stream import events
from crp_stream.core.ids import derive_id
from crp_stream.core.tenants import command_reaches
from crp_stream.events import AuditType, Rejected
from crp_stream.events.topics import OPERATOR_COMMANDS
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors.base import Emitter, Handler, Record
from crp_stream.processors.effects import audit, change_status, quarantine_candidate
from crp_stream.processors.forget import forget


def _reaches(cmd: events.OperatorCommand, uow: UnitOfWork, claim_key: str) -> bool:
    """A command acts on its own tenant's requests and candidates only (``core.tenants.command_reaches``)."""
    return command_reaches(cmd.tenant, uow.repo.claim_tenant(claim_key))


def _in(cmd: events.OperatorCommand) -> str:
    return "" if cmd.tenant is None else f" in tenant {cmd.tenant}"


def _by(row: Mapping[str, Any], field: str) -> str:
    who = row.get(field)
    return f" by {who}" if who else ""


class OperatorHandler(Handler[events.OperatorCommand]):
    group = "operator"
    topics = (OPERATOR_COMMANDS,)

    def handle(self, event: events.OperatorCommand, record: Record, uow: UnitOfWork, out: Emitter) -> None:
        if not isinstance(event, events.OperatorCommand):
            return
        actor = event.actor.strip()
        if not actor:
            raise Rejected("actor: an operator command must name the actor who decides it")
        if event.command == "resolve_refresh":
            self._resolve_refresh(event, actor, record, uow, out)
        elif event.command in ("acknowledge_refresh", "reject_refresh"):
            self._acknowledge_or_reject(event, actor, record, uow, out)
        elif event.command == "confirm_quarantine":
            self._confirm(event, actor, record, uow, out)
        elif event.command == "forget":
            forget(event, actor, record, uow, out)
        else:
            self._release(event, actor, record, uow, out)

    def _resolve_refresh(
        self, cmd: events.OperatorCommand, actor: str, record: Record, uow: UnitOfWork, out: Emitter
    ) -> None:
        req = uow.repo.refresh_request(cmd.target_id)
        if req is None or not _reaches(cmd, uow, req["claim_key"]):
            raise Rejected(f"target_id: no refresh request {cmd.target_id!r}{_in(cmd)}")
        if req["status"] != "open":
            raise Rejected(
                f"target_id: refresh request {cmd.target_id!r} is already {req['status']}{_by(req, 'resolved_by')}"
            )
        uow.repo.resolve_refresh(cmd.target_id, record.ts_us, actor)
        p = req["payload"]
        audit_id = derive_id("audit", "REFRESH_RESOLVED", cmd.target_id, cmd.command_id)
        audit(
            uow,
            out,
            audit_id,
            "REFRESH_RESOLVED",
            req["source"],
            record.ts_us,
            {
                "request_id": cmd.target_id,
                "source": req["source"],
                "claim": req["claim_key"],
                "subject": p.get("subject"),
                "attribute": p.get("attribute"),
                "stale_value": p.get("stale_value"),
                "observed_value": p.get("observed_value"),
                "resolved_by": actor,
                "actor": actor,
                "reason": cmd.reason,
                "command_id": cmd.command_id,
            },
        )

    def _acknowledge_or_reject(
        self, cmd: events.OperatorCommand, actor: str, record: Record, uow: UnitOfWork, out: Emitter
    ) -> None:
        req = uow.repo.refresh_request(cmd.target_id)
        if req is None or not _reaches(cmd, uow, req["claim_key"]):
            raise Rejected(f"target_id: no refresh request {cmd.target_id!r}{_in(cmd)}")
        if req["status"] != "open":
            raise Rejected(
                f"target_id: refresh request {cmd.target_id!r} is already {req['status']}{_by(req, 'resolved_by')}"
            )
        details: dict[str, Any] = {
            "request_id": cmd.target_id,
            "source": req["source"],
            "claim": req["claim_key"],
            "actor": actor,
            "reason": cmd.reason,
            "command_id": cmd.command_id,
        }
        kind: AuditType = "REFRESH_ACKNOWLEDGED"
        if cmd.command == "reject_refresh":
            kind = "REFRESH_REJECTED"
            uow.repo.resolve_refresh(cmd.target_id, record.ts_us, actor, status="rejected")
            stale = [
                f["fact_id"]
                for f in uow.repo.facts_for_claim(req["claim_key"])
                if f["source"] == req["source"] and f["status"] == "stale"
            ]
            details["fact_ids"] = change_status(
                uow,
                out,
                stale,
                "active",
                cmd.reason or f"refresh request rejected by {actor}",
                record.ts_us,
                cmd.command_id,
                ("stale",),
            )
        audit(
            uow,
            out,
            derive_id("audit", kind, cmd.target_id, cmd.command_id),
            kind,
            req["source"],
            record.ts_us,
            details,
        )

    def _confirm(self, cmd: events.OperatorCommand, actor: str, record: Record, uow: UnitOfWork, out: Emitter) -> None:
        cand = uow.repo.candidate(cmd.target_id)
        if cand is None or not _reaches(cmd, uow, cand["claim_key"]):
            raise Rejected(f"target_id: no quarantine candidate {cmd.target_id!r}{_in(cmd)}")
        if cand["status"] == "confirmed":
            raise Rejected(
                f"target_id: quarantine candidate {cmd.target_id!r} is already confirmed{_by(cand, 'decided_by')}"
            )
        quarantine_candidate(
            uow,
            out,
            cmd.target_id,
            cand["source"],
            cand["payload"]["fact_ids"],
            record.ts_us,
            actor=actor,
            reason=cmd.reason,
            cause_id=cmd.command_id,
        )

    def _release(self, cmd: events.OperatorCommand, actor: str, record: Record, uow: UnitOfWork, out: Emitter) -> None:
        cand = uow.repo.candidate(cmd.target_id)
        if cand is not None and not _reaches(cmd, uow, cand["claim_key"]):
            cand = None  # another tenant's: as if there were none
        if cand is not None:
            if cand["status"] == "released":
                raise Rejected(
                    f"target_id: quarantine candidate {cmd.target_id!r} is already released{_by(cand, 'decided_by')}"
                )
            fact_ids = list(cand["payload"]["fact_ids"])
            source = cand["source"]
            uow.repo.decide_candidate(cmd.target_id, "released", record.ts_us, actor)
        else:
            fact = uow.repo.facts_by_ids([cmd.target_id]).get(cmd.target_id)
            if fact is None or not command_reaches(cmd.tenant, fact["tenant"]):
                raise Rejected(f"target_id: no quarantine candidate or fact {cmd.target_id!r}{_in(cmd)}")
            if fact["status"] != "quarantined":
                raise Rejected(f"target_id: fact {cmd.target_id!r} is not quarantined (status {fact['status']})")
            fact_ids = [cmd.target_id]
            source = fact["source"]
        reason = cmd.reason or f"quarantine released by {actor}"
        changed = change_status(uow, out, fact_ids, "active", reason, record.ts_us, cmd.command_id, ("quarantined",))
        audit(
            uow,
            out,
            derive_id("audit", "QUARANTINE_RELEASED", cmd.target_id, cmd.command_id),
            "QUARANTINE_RELEASED",
            source,
            record.ts_us,
            {
                "target_id": cmd.target_id,
                "candidate_id": cand["candidate_id"] if cand else None,
                "source": source,
                "fact_ids": changed,
                "actor": actor,
                "reason": cmd.reason,
                "command_id": cmd.command_id,
            },
        )


__all__ = ["OperatorHandler"]
