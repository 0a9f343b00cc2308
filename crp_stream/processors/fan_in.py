"""A window's fan-in: every branch's report merged into the session, then the loop exits (SPEC-024 §6, §7.2)."""

from __future__ import annotations

from typing import Any, Literal, cast

import numpy as np

from crp_stream import events
from crp_stream.core import cdr, exits, ngram, packing
from crp_stream.core.ids import derive_id
from crp_stream.events.topics import AUDIT, ENVELOPES
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors import assembly
from crp_stream.processors.base import Emitter, Record
from crp_stream.processors.session import CoverageEntry, SessionState, WindowState, vec_from_json


def fan_in(uow: UnitOfWork, state: SessionState, win: WindowState, window: int, record: Record, out: Emitter) -> None:
    """SPEC-027 §1.6 / SPEC-024 §7.2: merge every branch's report into the session, then check the
    loop exits (§6) for this window; an exit closes the window with a closing envelope."""
    addressed: list[str] = []
    for b in range(win.branches):  # branch order: the merge does not depend on arrival order
        held = win.pending.pop(str(b))
        state.coverage.extend(CoverageEntry(**e) for e in held["coverage"])
        addressed.extend(held["addressed"])
        state.blacklist = sorted(ngram.update_ngram_blacklist(frozenset(state.blacklist), held["output_text"]))
    state.residual = cdr.update_residual_set(state.residual, addressed)
    state.backward_summary = packing.backward_summary(state.covered_labels())  # SPEC-024 §4.3
    completeness, safety = win.fan_in()
    state.completeness = completeness
    if safety is not None:
        state.safety_budget = safety
    state.reported = max(state.reported, window)
    if exits.is_terminal(state.status):  # the window's envelope already reached ckf-exhausted
        return
    done = completeness >= exits.COMPLETION_THRESHOLD and residual_done(uow, state, win, record.ts_us)
    status = exits.continuation_status(
        completeness, done, state.reported, state.max_windows, win.mean_ratio, state.safety_budget
    )
    if not exits.is_terminal(status):
        return
    state.status, state.ended_window = status, window
    headers: dict[str, Any] = {
        "CRP-Context-Continuation-Status": status,
        "CRP-Quality-Completeness": _r(completeness),  # SPEC-024 §6 Exit 2: whatever was achieved
        "CRP-Context-Coverage-Depth": len(state.coverage),
    }
    labels = [s.label for s in state.residual_states()]
    closing = events.EnvelopeAssembled(
        request_id=win.request_id,
        session_id=state.session_id,
        window=window,
        status=cast(Any, status),
        facts=[],
        notes=[],
        residual_anchor=packing.residual_task_anchor(labels),
        headers=headers,
        closing=True,
    )
    out.emit(ENVELOPES, state.session_id, events.encode(closing))
    if status == exits.SAFETY_BUDGET_DEPLETED:  # SPEC-024 §6 Exit 4: oversight escalation
        kind: Literal["SAFETY_BUDGET_DEPLETED"] = "SAFETY_BUDGET_DEPLETED"
        details = {
            "session_id": state.session_id,
            "window": window,
            "safety_budget": state.safety_budget,
            "floor": exits.SAFETY_BUDGET_FLOOR,
            "action": "oversight escalation (SPEC-012 §2.3): review the session before any "
            "further generation; the session accepts no further window",
        }
        eid = derive_id(out.cause, kind, state.session_id, str(window))
        uow.repo.append_audit(eid, kind, record.ts_us, state.session_id, details)
        msg = events.AuditRecorded(event_id=eid, audit_type=kind, at=record.at, details=details)
        out.emit(AUDIT, state.session_id, events.encode(msg), record_id=eid)


def residual_done(uow: UnitOfWork, state: SessionState, win: WindowState, now_us: int) -> bool:
    """SPEC-024 §6 Exit 1: the Residual Set is empty or holds only marginal items, those whose best
    live fact is below the window's relevance gate (``exits.marginal_residual``)."""
    residual = state.residual_states()
    if not residual:
        return True
    probes = [vec_from_json(s.embedding) for s in residual]
    best = [
        max((float(score) for _f, score in hits), default=-np.inf)
        for hits in uow.vectors.search_many(probes, 1, now_us / 1e6, assembly.EXCLUDED, state.tenant)
    ]
    gate = win.min_relevance if win.min_relevance is not None else uow.thresholds().min_relevance
    return exits.residual_done(exits.marginal_residual(best, gate))


def _r(x: Any) -> float:
    return round(float(x), 6)
