"""The retrieval worker: window requests in, context envelopes and audit events out.

Window requests assemble envelopes (SPEC-027 §4 pipeline, in ``assembly``); window reports update
the session's Coverage Set, Residual Set, n-gram blacklist and window count (SPEC-024 §3, §5.1).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from crp_stream import events
from crp_stream.core import exits, fanout, reembed
from crp_stream.core.tenants import tenant_name
from crp_stream.events import Rejected
from crp_stream.events.envelope_bytes import envelope_bytes
from crp_stream.events.topics import ENVELOPES, WINDOW_REPORTS, WINDOW_REQUESTS
from crp_stream.fabric.caches.graph import GRAPH_GENERATION
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.fabric.models import ModelView
from crp_stream.fabric.sql.repository import FACTS_GENERATION
from crp_stream.fabric.vectors.ann import KEPT_MAX
from crp_stream.processors import assembly, envelope, fan_in, retrieval_ahead
from crp_stream.processors import branches as branches_mod
from crp_stream.processors.base import BatchItem, Emitter, Handler, Record
from crp_stream.processors.session import (
    CoverageEntry,
    SessionState,
    SubQueryState,
    WindowState,
    vec_from_json,
    vec_to_json,
)

log = logging.getLogger(__name__)

_Event = events.WindowRequested | events.WindowReported


@dataclass
class RequestPlan:
    """A window request checked, its session read (or started) and its question embedded: what is
    left cannot reject it."""

    ev: events.WindowRequested
    record: Record
    state: SessionState
    qvec: assembly.Vectors
    model: ModelView | None  # the retired model the session still reads (``_use_session_model``)


@dataclass
class ReportPlan:
    """A window report checked, with the vectors of what it addressed."""

    ev: events.WindowReported
    record: Record
    state: SessionState
    win: WindowState
    vecs: list[assembly.Vectors | None]
    model: ModelView | None


class RetrievalHandler(Handler[events.WindowRequested | events.WindowReported]):
    group = "retrieval"
    topics = (WINDOW_REQUESTS, WINDOW_REPORTS)
    meta_keys = ("embedding_model", "embedding_dim", FACTS_GENERATION, GRAPH_GENERATION)
    rejects_before_writes = True  # every check precedes the envelope's audit rows and the session write

    batch_native = True  # a micro-batch of requests searches its probes together (``retrieval_ahead``)

    def handle(self, event: _Event, record: Record, uow: UnitOfWork, out: Emitter) -> None:
        uow.fabric.follow(uow.repo)  # a reembed switched the active model: taken up without a restart
        try:
            plan = self._plan(event, record, uow)
            uow.model = plan.model
            self._apply(plan, uow, out)
        finally:
            uow.model = None  # the unit of work serves the batch's other records too

    def handle_batch(self, items: Sequence[BatchItem[_Event]], uow: UnitOfWork) -> int:
        """Every record of the batch is checked first, then the requests' probes are searched in one
        call and their candidates read from the fact cache at once, then each record is served in
        order, exactly as alone. The batch ends before a second record of a session it holds (that
        window must see what the first one wrote), before a rejected record (its dead letter then
        stands after what the records before it caused) and before its probes outgrow the ANN
        cache's kept results."""
        uow.fabric.follow(uow.repo)
        plans: list[RequestPlan | ReportPlan] = []
        sessions: set[str] = set()
        probes = 0
        for n, item in enumerate(items):
            if item.event.session_id in sessions:
                break
            try:
                plan = self._plan(item.event, item.record, uow)
            except Rejected as exc:
                if n:
                    break
                item.reject(exc)
                return 1
            finally:
                uow.model = None
            if isinstance(plan, RequestPlan):
                probes += 1 + len(plan.state.residual)
                if n and probes > KEPT_MAX:
                    break
            sessions.add(item.event.session_id)
            plans.append(plan)
        with retrieval_ahead.searched(uow, [p for p in plans if isinstance(p, RequestPlan)]):
            for item, plan in zip(items, plans, strict=False):
                uow.model = plan.model
                try:
                    self._apply(plan, uow, item.out)
                except Rejected as exc:  # every check precedes the writes (``rejects_before_writes``)
                    raise RuntimeError(f"retrieval rejected a checked record: {exc.reason}") from exc
                finally:
                    uow.model = None
        return len(plans)

    def _plan(self, event: _Event, record: Record, uow: UnitOfWork) -> RequestPlan | ReportPlan:
        if isinstance(event, events.WindowRequested):
            return self._plan_request(event, record, uow)
        return self._plan_report(event, record, uow)

    def _apply(self, plan: RequestPlan | ReportPlan, uow: UnitOfWork, out: Emitter) -> None:
        if isinstance(plan, RequestPlan):
            self._serve(plan, uow, out)
        else:
            self._apply_report(plan, uow, out)

    @staticmethod
    def _use_session_model(uow: UnitOfWork, state: SessionState) -> None:
        """A session finishes on the model it started on: after a reembed switched models, its windows
        embed with the old model and search the old model's vectors (``Fabric.view``)."""
        active = uow.repo.get_meta("embedding_model")
        model = reembed.session_model(state.embedding_model, active)
        if model is None:
            return
        view = uow.fabric.view(model, uow.repo)
        if view is None:
            raise Rejected(
                f"session_id: session {state.session_id!r} started on model {state.embedding_model!r}, "
                f"retired by a reembed (the active model is {active!r}); start a new session"
            )
        uow.model = view

    def session_ids(self, event: events.WindowRequested | events.WindowReported) -> tuple[str, ...]:
        return (event.session_id,)

    # embeddings -------------------------------------------------------------------------------
    def _vectors(
        self, uow: UnitOfWork, texts: list[str], given: list[list[float] | None], fields: list[str], model: str | None
    ) -> list[assembly.Vectors]:
        emb = uow.embedder
        fabric_model = uow.model.model_id if uow.model else (uow.repo.get_meta("embedding_model") or emb.model_id)
        if model is not None and model != fabric_model:
            raise Rejected(f"embedding_model: {model!r} does not match the fabric's model {fabric_model!r}")
        if emb.model_id != fabric_model:
            raise Rejected(f"embedder {emb.model_id!r} does not match the fabric's model {fabric_model!r}")
        dim = int((uow.model.dim if uow.model else uow.repo.get_meta("embedding_dim")) or emb.dim or 0)
        out: list[assembly.Vectors | None] = []
        for g, f in zip(given, fields, strict=True):
            if g is None:
                if emb.requires_vectors:
                    raise Rejected(f"{f}: required with --embedder precomputed:{emb.model_id}")
                out.append(None)
                continue
            if model is None:
                raise Rejected(f"embedding_model: required when {f} is given")
            v = np.asarray(g, dtype=np.float32)
            if dim and v.shape[0] != dim:
                raise Rejected(f"{f}: dimension {v.shape[0]} does not match the fabric's dimension {dim}")
            n = float(np.linalg.norm(v))
            if not np.isfinite(n) or n == 0.0:
                raise Rejected(f"{f}: not a usable vector (zero, NaN or inf)")
            out.append(v / n)
        todo = [i for i, v in enumerate(out) if v is None]
        if todo:
            for i, v in zip(todo, emb.embed([texts[i] for i in todo]), strict=True):
                if dim and v.shape[0] != dim:
                    raise Rejected(f"{fields[i]}: embedder dimension {v.shape[0]} differs from the fabric's {dim}")
                out[i] = v
        return [v for v in out if v is not None]

    # requests ---------------------------------------------------------------------------------
    def _plan_request(self, ev: events.WindowRequested, record: Record, uow: UnitOfWork) -> RequestPlan:
        row = uow.repo.get_session(ev.session_id)
        if uow.repo.get_meta("embedding_model") is None:
            raise Rejected("the fabric holds no facts yet: nothing to retrieve (publish documents first)")
        if row is None:
            if ev.window != 1:
                raise Rejected(f"window: session {ev.session_id!r} is unknown; window 1 must start it, got {ev.window}")
            if not ev.sub_queries:
                raise Rejected("sub_queries: required on window 1 of a new session (the task decomposition)")
            state = self._new_session(ev, uow)
        else:
            state = SessionState.from_row(row)
            _same_tenant(ev, state)
            self._check_next_window(ev, state)
            self._use_session_model(uow, state)
        qvec = self._vectors(uow, [ev.query.text], [ev.query.embedding], ["query.embedding"], ev.embedding_model)[0]
        return RequestPlan(ev, record, state, qvec, uow.model)

    def _serve(self, plan: RequestPlan, uow: UnitOfWork, out: Emitter) -> None:
        ev, record, state, qvec = plan.ev, plan.record, plan.state, plan.qvec
        th = uow.thresholds()
        min_rel = ev.policy.min_relevance if ev.policy.min_relevance is not None else th.min_relevance
        residual = state.residual_states()
        if ev.fanout > 1 and len(residual) > 1:
            groups = fanout.partition_residual_for_fanout(
                np.stack([vec_from_json(s.embedding) for s in residual]), ev.fanout
            )
            partitions = [[residual[i] for i in g] for g in groups]
        else:
            groups = [list(range(len(residual)))]
            partitions = [residual]
        coverage = state.coverage_arrays()  # immutable snapshot for every branch (SPEC-027 §1.5)
        blacklist = frozenset(state.blacklist)
        fanned = len(partitions) > 1
        branches = [
            assembly.gather(
                uow,
                qvec,
                part,
                ev.fact_budget,
                record.ts_us,
                min_rel,
                coverage,
                blacklist,
                branch_scoped=fanned,
                query_text=ev.query.text,
                task=state.sub_queries,
                tenant=state.tenant,
            )
            for part in partitions
        ]
        sels, shared = branches_mod.select_branches(uow, ev, th, branches)
        window_state = WindowState(
            request_id=ev.request_id,
            branches=len(partitions),
            partitions=[[s.id for s in p] for p in partitions],
            fact_ids=[],
            min_relevance=float(min_rel),
        )
        floor = th.min_connector_relevance
        packs = [envelope.pack(cands, sel, floor) for cands, sel in zip(branches, sels, strict=True)]
        # SPEC-024 §6, evaluated on this window's envelope(s): a previous window's exit would have
        # closed the session, so only Exit 3 (ckf-exhausted) can be reached here.
        window_state.mean_ratio = exits.mean_novelty_ratio(np.concatenate([p.ratios for p in packs]))
        status = exits.continuation_status(
            state.completeness,
            not state.residual,
            state.reported,
            state.max_windows,
            window_state.mean_ratio,
            state.safety_budget,
        )
        serve = exits.serves_facts(status)
        envs: list[envelope.Envelope] = []
        for b, (cands, part, sel, packed) in enumerate(zip(branches, partitions, sels, packs, strict=True)):
            env = envelope.build(
                ev=ev,
                state=state,
                c=cands,
                sel=sel,
                packed=packed,
                part=part,
                branch=b if fanned else None,
                partitions=fanout.coverage_partitions_header(groups) if fanned else None,
                status=status,
            )
            if fanned:
                mine = {f["fact_id"] for f in env["facts"]}
                env["assignments"] = [a for a in shared if a["fact_id"] in mine]
            envs.append(env)
        for b, (env, sel) in enumerate(zip(envs, sels, strict=True)):
            if serve:  # the conflicts of what is served are audited; nothing is served on exhaustion
                envelope.audit_conflicts(uow, ev, record, out, sel, b if fanned else None)
            else:
                envelope.withhold(env, window_state.mean_ratio)
            window_state.fact_ids.append([f["fact_id"] for f in env["facts"]])
        for env in envs:
            if record.fabric_lag_ms is not None:  # served before the inputs before it were all in
                env["headers"]["CRP-Context-Fabric-Lag"] = record.fabric_lag_ms
            out.emit(ENVELOPES, ev.session_id, envelope_bytes(env))
        if exits.is_terminal(status):
            state.status, state.ended_window = status, ev.window
        state.requested = ev.window
        state.windows[str(ev.window)] = window_state
        self._save(uow, state, record)

    @staticmethod
    def _check_next_window(ev: events.WindowRequested, state: SessionState) -> None:
        """The session accepts exactly the next window, and only while its loop runs (SPEC-024 §6) and
        once the previous window fanned in (SPEC-027 §1.6: its coverage is merged)."""
        sid = ev.session_id
        if exits.is_terminal(state.status):
            limit = f" (max_windows {state.max_windows})" if state.status == exits.LIMIT_REACHED else ""
            raise Rejected(
                f"window: session {sid!r} ended with {state.status} at window {state.ended_window}"
                f"{limit}; no further window is accepted (SPEC-024 §6)"
            )
        if ev.window != state.requested + 1:
            raise Rejected(f"window: session {sid!r} expects window {state.requested + 1}, got {ev.window}")
        if ev.window > state.max_windows:
            raise Rejected(f"window: {ev.window} exceeds the session's max_windows {state.max_windows}")
        prev = state.windows.get(str(state.requested))
        if prev is not None and not prev.fanned_in:
            raise Rejected(
                f"window: window {state.requested} of session {sid!r} has not fanned in ({len(prev.reported)} of "
                f"{prev.branches} branch reports arrived); request window {ev.window} after every branch "
                "reported (SPEC-027 §1.6)"
            )

    def _new_session(self, ev: events.WindowRequested, uow: UnitOfWork) -> SessionState:
        subs = ev.sub_queries or []
        vecs = self._vectors(
            uow,
            [s.text for s in subs],
            [s.embedding for s in subs],
            [f"sub_queries[{i}].embedding" for i in range(len(subs))],
            ev.embedding_model,
        )
        model = uow.repo.get_meta("embedding_model") or uow.embedder.model_id
        sq = [
            SubQueryState(
                id=s.id,
                text=s.text,
                label=s.label or s.text,
                embedding=vec_to_json(v),
                expected_words=s.expected_words if isinstance(s.expected_words, int) else None,
            )
            for s, v in zip(subs, vecs, strict=True)
        ]
        return SessionState(
            session_id=ev.session_id,
            embedding_model=model,
            max_windows=ev.max_windows,
            sub_queries=sq,
            residual=[s.id for s in sq],
            tenant=tenant_name(ev.tenant),
        )

    # reports ----------------------------------------------------------------------------------
    def _plan_report(self, ev: events.WindowReported, record: Record, uow: UnitOfWork) -> ReportPlan:
        row = uow.repo.get_session(ev.session_id)
        if row is None:
            raise Rejected(f"session_id: {ev.session_id!r} is unknown (no window was requested)")
        state = SessionState.from_row(row)
        _same_tenant(ev, state)
        self._use_session_model(uow, state)
        win = state.windows.get(str(ev.window))
        if win is None:
            raise Rejected(f"window: window {ev.window} of session {ev.session_id!r} was never requested")
        if win.branches > 1 and (ev.branch is None or ev.branch >= win.branches):
            raise Rejected(f"branch: window {ev.window} fanned out to {win.branches} branches; got branch {ev.branch}")
        if win.branches == 1 and ev.branch not in (None, 0):
            raise Rejected(f"branch: window {ev.window} has no branch {ev.branch}")
        if (ev.branch or 0) in win.reported:
            raise Rejected(f"window: window {ev.window} branch {ev.branch or 0} was already reported")
        unknown = [a.id for a in ev.addressed if state.sub_query(a.id) is None]
        if unknown:
            raise Rejected(f"addressed: unknown sub-query id {unknown[0]!r}")
        try:
            given = [a.embedding for a in ev.addressed]
            texts = [a.text or state.sub_query(a.id).text for a in ev.addressed]  # type: ignore[union-attr]
            fields = [f"addressed[{i}].embedding" for i in range(len(ev.addressed))]
            vecs: list[assembly.Vectors | None] = [None] * len(ev.addressed)
            need = [i for i, a in enumerate(ev.addressed) if a.embedding is not None or a.text is not None]
            if need or (ev.embedding_model and ev.embedding_model != state.embedding_model):
                got = self._vectors(
                    uow,
                    [texts[i] for i in need],
                    [given[i] for i in need],
                    [fields[i] for i in need],
                    ev.embedding_model,
                )
                for i, g in zip(need, got, strict=True):
                    vecs[i] = g
        except Rejected as exc:
            raise Rejected(
                exc.reason, "COVERAGE_UPDATE_REJECTED", {"session_id": ev.session_id, "window": ev.window}
            ) from None
        return ReportPlan(ev, record, state, win, vecs, uow.model)

    def _apply_report(self, plan: ReportPlan, uow: UnitOfWork, out: Emitter) -> None:
        ev, record, state, win, vecs = plan.ev, plan.record, plan.state, plan.win, plan.vecs
        held = []
        for a, v in zip(ev.addressed, vecs, strict=True):
            sq = state.sub_query(a.id)
            assert sq is not None
            emb = vec_to_json(v) if v is not None else sq.embedding
            depth = exits.report_depth(a.depth, a.words, sq.expected_words)
            held.append(vars(CoverageEntry(id=a.id, embedding=emb, depth=depth, window=ev.window, branch=ev.branch)))
        branch = ev.branch or 0
        win.pending[str(branch)] = {
            "coverage": held,
            "addressed": [a.id for a in ev.addressed],
            "output_text": ev.output_text,
        }
        win.reported = sorted([*win.reported, branch])
        win.completeness[str(branch)] = float(ev.completeness)
        if ev.safety_budget is not None:
            win.safety[str(branch)] = float(ev.safety_budget)
        if win.fanned_in:
            fan_in.fan_in(uow, state, win, ev.window, record, out)
        self._save(uow, state, record)

    def _save(self, uow: UnitOfWork, state: SessionState, record: Record) -> None:
        uow.repo.put_session(
            state.session_id, state.embedding_model, state.reported, state.max_windows, state.to_json(), record.ts_us
        )


def _same_tenant(ev: events.WindowRequested | events.WindowReported, state: SessionState) -> None:
    """No session mixes tenants: a window of another tenant's session is refused."""
    if tenant_name(ev.tenant) != state.tenant:
        raise Rejected(f"tenant: session {ev.session_id!r} is not a session of tenant {tenant_name(ev.tenant)!r}")
