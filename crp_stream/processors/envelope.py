"""One branch's envelope (SPEC-027 §4 packing, SPEC-024/025 headers) and its conflict audit events."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, NamedTuple, NotRequired, SupportsFloat, TypedDict

import numpy as np

from crp_stream import events
from crp_stream.core import authority, cdgr, conflicts, exits, memo, ngram, packing, recency
from crp_stream.core.ids import derive_id
from crp_stream.events.topics import AUDIT
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors import assembly, graph_select
from crp_stream.processors.base import Emitter, Record, us_to_dt
from crp_stream.processors.branches import Assignment
from crp_stream.processors.session import SessionState, SubQueryState

ONBOARDING_HINT = "ingest-more-documents-for-continued-quality"


class Fact(TypedDict):
    """One fact of an envelope, as ``events.EnvelopeFact`` reads it."""

    fact_id: str
    text: str
    role: str
    score: float
    relevance: float
    novelty: float
    recency: float
    authority: float
    source: str
    source_type: str
    epoch: datetime
    modified_at: datetime
    support: int
    bridges: NotRequired[list[str]]
    via: str
    rank: int


# the SPEC-024/025/027 headers, in the order they are written
Headers = TypedDict(
    "Headers",
    {
        "CRP-Context-Coverage-Score": float,
        "CRP-Context-Coverage-Depth": int,
        "CRP-Context-NGram-Guard-Activations": int,
        "CRP-Context-Continuation-Status": str,
        "CRP-Context-Graph-Hops": int,
        "CRP-Context-Connectors-Included": str,
        "CRP-Context-Bridge-Score": float,
        "CRP-Context-Conflicts-Resolved": str,
        "CRP-Context-Recency-Penalised": int,
        "CRP-Context-Coverage-Partitions": NotRequired[int],
        "CRP-Onboarding-Hint": NotRequired[str],
        "CRP-Context-Mode": str,
        "CRP-Context-Fabric-Lag": NotRequired[int],
    },
)


class Envelope(TypedDict):
    """One branch's envelope, as ``events.EnvelopeAssembled`` reads it."""

    request_id: str
    session_id: str
    window: int
    status: str
    facts: list[Fact]
    notes: list[str]
    residual_anchor: str
    headers: Headers
    branch: NotRequired[int]
    partition: NotRequired[list[str]]
    assignments: NotRequired[list[Assignment]]


class Packed(NamedTuple):
    """One branch's facts in envelope order, and their novelty ratios (SPEC-024 §6 Exit 3)."""

    order: list[str]  # fact ids, as packed (SPEC-027 §4 step 6)
    idx: list[int]  # their candidate indices
    ratios: assembly.Floats


def pack(c: assembly.Candidates, sel: assembly.Selection, relevance_floor: float) -> Packed:
    """The order of one branch's envelope and the novelty ratios the window's status is decided on."""
    connectors = sel.connectors
    order = packing.pack_envelope(
        [c.ids[i] for i in sel.anchors],
        c.score[sel.anchors],
        [(c.ids[ci], bridged) for ci, bridged, _b, _s in connectors],
        # the similarity edges to the anchors (the only ones placing reads): the chain reads in the
        # order of meaning, not of a document's layout
        c.graph.edges_of(
            (c.ids[ci] for ci, *_ in connectors), graph_select.SIMILARITY, among=[c.ids[i] for i in sel.anchors]
        ),
    )
    idx = [c.index[f] for f in order]
    return Packed(order, idx, assembly.novelty_ratios(c, idx, relevance_floor))


def build(
    *,
    ev: events.WindowRequested,
    state: SessionState,
    c: assembly.Candidates,
    sel: assembly.Selection,
    packed: Packed,
    part: list[SubQueryState],
    branch: int | None,
    partitions: int | None,
    status: str,
) -> Envelope:
    """One branch's envelope in the window's continuation status (SPEC-024 §6). Nothing is emitted
    here: the status decides what the envelope serves (``withhold``) and whether its conflicts are
    audited (``audit_conflicts``)."""
    connectors = sel.connectors
    order, idx, ratios = packed
    conn = {c.ids[ci]: (bridged, bridge, score) for ci, bridged, bridge, score in connectors}
    views = [c.views[i] for i in idx]
    # ``authority.fact_authority`` of every fact at once: the rule broadcasts, the same products
    authorities = authority.authority(
        [authority.source_authority(v.source_type, v.trust) for v in views],
        [v.recency for v in views],
        [v.importance for v in views],
    ).tolist()
    facts: list[Fact] = []
    # the floats of the envelope's facts as Python floats once (``_r`` rounds them as it would the numpy ones)
    scores, rel, nov, rec = (a[idx].tolist() for a in (c.score, c.relevance, c.novelty, c.recency))
    support = c.support[idx].tolist()
    via, rank = sel.via, sel.rank
    for k, (fid, i, auth) in enumerate(zip(order, idx, authorities, strict=True)):
        r = c.rows[i]
        link = conn.get(fid)
        entry: Fact = {
            "fact_id": fid,
            "text": r["text"],
            "role": "connector" if link is not None else "anchor",
            "score": round(link[2] if link is not None else scores[k], 6),
            "relevance": round(rel[k], 6),
            "novelty": round(nov[k], 6),
            "recency": round(rec[k], 6),
            "authority": round(auth, 6),
            "source": r["source"],
            "source_type": r["source_type"],
            "epoch": _time(r["epoch_us"]),
            "modified_at": _time(r["modified_at_us"]),
            "support": support[k],
            "via": via.get(i, "similarity"),
            "rank": rank[i],
        }
        if link is not None:
            entry["bridges"] = list(link[0])
        facts.append(entry)
    bridges = [b for _ci, _br, b, _s in connectors]
    cov_score = exits.coverage_score_header(ratios)
    # the candidate set the counting headers describe: what retrieval gathered and what the envelope
    # serves, not the connectors read only to bound the others' scores
    pool = np.union1d(np.arange(c.gathered), np.asarray(idx, dtype=np.int64))
    activations = ngram.ngram_guard_activations(c.penalty[pool])
    notes = list(sel.notes)
    diagnostic = ngram.ngram_guard_diagnostic(activations, pool.shape[0])
    headers: Headers = {
        "CRP-Context-Coverage-Score": _r(cov_score) if cov_score is not None else 0.0,
        "CRP-Context-Coverage-Depth": len(state.coverage),
        "CRP-Context-NGram-Guard-Activations": activations,
        "CRP-Context-Continuation-Status": status,
        "CRP-Context-Graph-Hops": sel.hops if ev.policy.graph_retrieval == "on" else 0,
        "CRP-Context-Connectors-Included": cdgr.connectors_included_header(len(connectors), len(facts)),
        "CRP-Context-Bridge-Score": _r(cdgr.bridge_score_header(bridges)),
        "CRP-Context-Conflicts-Resolved": conflicts.conflicts_resolved_header(sel.detected, sel.unresolved),
        "CRP-Context-Recency-Penalised": recency.recency_penalised_count(c.recency[pool]),
        "CRP-Context-Mode": _mode(status, ev.policy.graph_retrieval),
    }
    if partitions is not None:
        headers["CRP-Context-Coverage-Partitions"] = partitions
    if diagnostic is not None:  # SPEC-024 §5.3: the operator should ingest more documents
        notes.append(diagnostic)
        headers["CRP-Onboarding-Hint"] = ONBOARDING_HINT
    if status == exits.CKF_EXHAUSTED:
        headers["CRP-Onboarding-Hint"] = ONBOARDING_HINT
    labels = [s.label for s in (part if branch is not None else state.residual_states())]
    env: Envelope = {
        "request_id": ev.request_id,
        "session_id": ev.session_id,
        "window": ev.window,
        "status": status,
        "facts": facts,
        "notes": notes,
        "residual_anchor": packing.residual_task_anchor(labels),
        "headers": headers,
    }
    if branch is not None:
        env["branch"] = branch
        env["partition"] = [s.id for s in part]
    return env


def _mode(status: str, graph: str) -> str:
    """``CRP-Context-Mode``: what the window retrieves with, or that the fabric is exhausted."""
    return "ckf-exhausted" if status == exits.CKF_EXHAUSTED else ("cdgr" if graph == "on" else "cdr")


def withhold(env: Envelope, mean_ratio: float) -> None:
    """SPEC-024 §6 Exit 3: "the gateway MUST stop". The exhausted envelope keeps the signal and drops
    what it would have served: no facts, one note saying why, and the headers of what is served
    (connectors, bridge score, conflicts, hops) at zero; the Coverage-Score stays the minimum novelty
    ratio of the withheld facts; the status and mode are the window's, set when it was built."""
    h = env["headers"]
    env["notes"] = [exits.ckf_exhausted_note(mean_ratio, len(env["facts"]))]
    env["facts"] = []
    env.pop("assignments", None)
    h["CRP-Context-Connectors-Included"] = cdgr.connectors_included_header(0, 0)
    h["CRP-Context-Bridge-Score"] = 0.0
    h["CRP-Context-Conflicts-Resolved"] = conflicts.conflicts_resolved_header(0)
    h["CRP-Context-Graph-Hops"] = 0


def audit_conflicts(
    uow: UnitOfWork,
    ev: events.WindowRequested,
    record: Record,
    out: Emitter,
    sel: assembly.Selection,
    branch: int | None,
) -> None:
    for res in sel.resolutions:
        kind: Literal["CONTRADICTION_UNRESOLVED", "CONTRADICTION_RESOLVED"] = (
            "CONTRADICTION_UNRESOLVED" if res.tie else "CONTRADICTION_RESOLVED"
        )
        details: dict[str, object] = {
            "kept": res.kept,
            "suppressed": res.suppressed,
            "pattern": res.pattern,
            "authority_kept": res.authority_kept,
            "authority_suppressed": res.authority_suppressed,
            "session_id": ev.session_id,
            "window": ev.window,
        }
        if res.tie:
            details = {
                "facts": sorted(res.pair),
                "pattern": res.pattern,
                "authority": res.authority_kept,
                "session_id": ev.session_id,
                "window": ev.window,
            }
        if branch is not None:
            details["branch"] = branch
        eid = derive_id(out.cause, kind, *sorted(res.pair), str(branch))
        uow.repo.append_audit(eid, kind, record.ts_us, ev.session_id, details)
        msg = events.AuditRecorded(event_id=eid, audit_type=kind, at=record.at, details=details)
        out.emit(AUDIT, ev.session_id, events.encode(msg), record_id=eid)


@memo.text_memo(0.2)
def _time(us: int) -> datetime:
    """``us_to_dt``, remembered: a fact's times come back window after window, and one datetime
    object for them keeps its hash for ``envelope_bytes._utc_iso`` (datetimes are immutable)."""
    return us_to_dt(us)


def _r(x: SupportsFloat) -> float:
    return round(float(x), 6)
