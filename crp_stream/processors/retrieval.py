"""The retrieval worker: window requests in, context envelopes and audit events out.

Window requests assemble envelopes (SPEC-027 §4 pipeline, in ``assembly``); window reports update
the session's Coverage Set, Residual Set, n-gram blacklist and window count (SPEC-024 §3, §5.1).
"""

from __future__ import annotations

import logging
from typing import Any, Literal, cast

import numpy as np

from crp_stream import events
from crp_stream.core import cdgr, cdr, conflicts, exits, fanout, ngram, packing, recency
from crp_stream.core.ids import derive_id
from crp_stream.events import Rejected
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors import assembly
from crp_stream.processors.base import Emitter, Handler, Record, us_to_dt
from crp_stream.processors.session import (
    CoverageEntry,
    SessionState,
    SubQueryState,
    WindowState,
    vec_from_json,
    vec_to_json,
)

log = logging.getLogger(__name__)

ENVELOPES = "crp.envelopes"
AUDIT = "crp.audit"
ONBOARDING_HINT = "ingest-more-documents-for-continued-quality"


class RetrievalHandler(Handler[events.WindowRequested | events.WindowReported]):
    group = "retrieval"
    topics = ("crp.window.requests", "crp.window.reports")

    def handle(
        self, event: events.WindowRequested | events.WindowReported, record: Record, uow: UnitOfWork, out: Emitter
    ) -> None:
        if isinstance(event, events.WindowRequested):
            self._request(event, record, uow, out)
        else:
            self._report(event, record, uow, out)

    # embeddings -------------------------------------------------------------------------------
    def _vectors(
        self, uow: UnitOfWork, texts: list[str], given: list[list[float] | None], fields: list[str], model: str | None
    ) -> list[np.ndarray]:
        emb = uow.embedder
        fabric_model = uow.repo.get_meta("embedding_model") or emb.model_id
        if model is not None and model != fabric_model:
            raise Rejected(f"embedding_model: {model!r} does not match the fabric's model {fabric_model!r}")
        if emb.model_id != fabric_model:
            raise Rejected(f"embedder {emb.model_id!r} does not match the fabric's model {fabric_model!r}")
        dim = int(uow.repo.get_meta("embedding_dim") or emb.dim or 0)
        out: list[np.ndarray | None] = []
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
    def _request(self, ev: events.WindowRequested, record: Record, uow: UnitOfWork, out: Emitter) -> None:
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
            self._check_next_window(ev, state)
        qvec = self._vectors(uow, [ev.query.text], [ev.query.embedding], ["query.embedding"], ev.embedding_model)[0]
        th = uow.fabric.thresholds(uow.repo)
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
            )
            for part in partitions
        ]
        sels, shared = self._select_branches(uow, ev, th, branches)
        window_state = WindowState(
            request_id=ev.request_id,
            branches=len(partitions),
            partitions=[[s.id for s in p] for p in partitions],
            fact_ids=[],
            min_relevance=float(min_rel),
        )
        envs: list[dict[str, Any]] = []
        ratios: list[np.ndarray] = []
        for b, (cands, part, sel) in enumerate(zip(branches, partitions, sels, strict=True)):
            env, r = self._envelope(
                uow,
                ev,
                record,
                out,
                state,
                cands,
                sel,
                part,
                b if fanned else None,
                fanout.coverage_partitions_header(groups) if fanned else None,
            )
            if fanned:
                mine = {f["fact_id"] for f in env["facts"]}
                env["assignments"] = [a for a in shared if a["fact_id"] in mine]
            window_state.fact_ids.append([f["fact_id"] for f in env["facts"]])
            envs.append(env)
            ratios.append(r)
        # SPEC-024 §6, evaluated on this window's envelope(s): a previous window's exit would have
        # closed the session, so only Exit 3 (ckf-exhausted) can be reached here.
        window_state.mean_ratio = exits.mean_novelty_ratio(np.concatenate(ratios))
        status = exits.continuation_status(
            state.completeness,
            not state.residual,
            state.reported,
            state.max_windows,
            window_state.mean_ratio,
            state.safety_budget,
        )
        for env in envs:
            self._set_status(env, status, ev.policy.graph_retrieval)
            if record.fabric_lag_ms is not None:  # served before the inputs before it were all in
                env["headers"]["CRP-Context-Fabric-Lag"] = record.fabric_lag_ms
            out.emit(ENVELOPES, ev.session_id, events.encode(events.EnvelopeAssembled(**env)))
        if exits.is_terminal(status):
            state.status, state.ended_window = status, ev.window
        state.requested = ev.window
        state.windows[str(ev.window)] = window_state
        self._save(uow, state, record)

    @staticmethod
    def _check_next_window(ev: Any, state: SessionState) -> None:
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

    @staticmethod
    def _set_status(env: dict[str, Any], status: str, graph: str) -> None:
        h = env["headers"]
        env["status"] = h["CRP-Context-Continuation-Status"] = status
        h["CRP-Context-Mode"] = (
            "ckf-exhausted" if status == exits.CKF_EXHAUSTED else ("cdgr" if graph == "on" else "cdr")
        )
        if status == exits.CKF_EXHAUSTED:
            h["CRP-Onboarding-Hint"] = ONBOARDING_HINT

    def _select_branches(
        self, uow: UnitOfWork, ev: Any, th: Any, branches: list[assembly.Candidates]
    ) -> tuple[list[assembly.Selection], list[dict[str, Any]]]:
        """Select every branch's facts so that no fact is in two branches (SPEC-027 §1.3, §1.6).

        A candidate several branches retrieved belongs to the branch that scores it higher (its
        partition pulls it harder); the others never select it. Facts outside every candidate set
        (connectors reached through the graph) are settled the same way once selected: the lower
        scoring branch drops the fact and selects again, until the branches are disjoint.
        """
        owners = self._owners(branches)
        exclude: list[set[str]] = []
        eligible: list[list[int]] = []
        for b, c in enumerate(branches):
            elig, members = assembly.collapse_duplicates(c)
            eligible.append(elig)
            dups = {c.ids[m] for rep, g in members.items() for m in g if m != rep}
            exclude.append(dups | {f for f, o in owners.items() if o != b})

        def pick(b: int) -> assembly.Selection:
            return assembly.select(uow, branches[b], eligible[b], ev.fact_budget, ev.policy, th, exclude[b])

        sels = [pick(b) for b in range(len(branches))]
        id_sets = [set(c.ids) for c in branches]
        wanted = {f: {b for b, ids in enumerate(id_sets) if f in ids} for f in owners}
        while len(branches) > 1:
            chosen = [{branches[b].ids[i] for i in sel.chosen()} for b, sel in enumerate(sels)]
            both = sorted({f for b in range(len(sels)) for f in chosen[b] if sum(f in ch for ch in chosen) > 1})
            if not both:
                break
            redo: set[int] = set()
            for f in both:
                holders = [b for b in range(len(sels)) if f in chosen[b]]
                owner = max(holders, key=lambda b: (self._score(branches[b], f), -b))
                owners[f] = owner
                wanted[f] = wanted.get(f, set()) | set(holders)
                for b in holders:
                    if b != owner:
                        exclude[b].add(f)
                        redo.add(b)
            for b in sorted(redo):
                sels[b] = pick(b)
        shared = [
            {
                "fact_id": f,
                "branch": owners[f],
                "wanted_by": sorted(wanted[f]),
                "score": _r(self._score(branches[owners[f]], f)),
            }
            for f in sorted(owners)
            if len(wanted.get(f, ())) > 1
        ]
        return sels, shared

    @staticmethod
    def _score(c: assembly.Candidates, fact_id: str) -> float:
        return float(c.score[c.ids.index(fact_id)])

    @staticmethod
    def _owners(branches: list[assembly.Candidates]) -> dict[str, int]:
        """SPEC-027 §1.6: a fact two branches want goes to the branch that scores it higher."""
        if len(branches) < 2:
            return {}
        all_ids = sorted({f for c in branches for f in c.ids})
        col = {f: i for i, f in enumerate(all_ids)}
        m = np.full((len(branches), len(all_ids)), -np.inf)
        for b, c in enumerate(branches):
            for i, f in enumerate(c.ids):
                m[b, col[f]] = c.score[i]
        owner = fanout.assign_shared_facts(m)
        return {f: int(owner[col[f]]) for f in all_ids}

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
        )

    def _envelope(
        self,
        uow: UnitOfWork,
        ev: Any,
        record: Record,
        out: Emitter,
        state: SessionState,
        c: assembly.Candidates,
        sel: assembly.Selection,
        part: list[SubQueryState],
        branch: int | None,
        partitions: int | None,
    ) -> tuple[dict[str, Any], np.ndarray]:
        anchors = sel.anchors
        connectors = sel.connectors
        order = packing.pack_envelope(
            [c.ids[i] for i in anchors],
            c.score[anchors],
            [(c.ids[ci], bridged) for ci, bridged, _b, _s in connectors],
            c.graph.edges_of(c.ids[ci] for ci, *_ in connectors),
        )
        index = {fid: i for i, fid in enumerate(c.ids)}
        conn = {c.ids[ci]: (bridged, bridge, score) for ci, bridged, bridge, score in connectors}
        facts = []
        for fid in order:
            i = index[fid]
            r = c.rows[i]
            v = c.views[i]
            auth = float(conflicts.fact_authority(v))
            entry: dict[str, Any] = {
                "fact_id": fid,
                "text": r["text"],
                "role": "connector" if fid in conn else "anchor",
                "score": _r(conn[fid][2] if fid in conn else c.score[i]),
                "relevance": _r(c.relevance[i]),
                "novelty": _r(c.novelty[i]),
                "recency": _r(c.recency[i]),
                "authority": _r(auth),
                "source": r["source"],
                "source_type": r["source_type"],
                "epoch": us_to_dt(r["epoch_us"]),
                "modified_at": us_to_dt(r["modified_at_us"]),
                "support": int(c.support[i]),
            }
            if fid in conn:
                entry["bridges"] = list(conn[fid][0])
            entry["via"] = sel.via.get(i, "similarity")
            entry["rank"] = sel.rank[i]
            facts.append(entry)
        idx = [index[f] for f in order]
        ratios = assembly.novelty_ratios(c, idx, [f in conn for f in order])
        self._audit_conflicts(uow, ev, record, out, sel, branch)
        bridges = [b for _ci, _br, b, _s in connectors]
        cov_score = exits.coverage_score_header(ratios)
        activations = ngram.ngram_guard_activations(c.penalty)
        notes = list(sel.notes)
        diagnostic = ngram.ngram_guard_diagnostic(activations, len(c.ids))
        headers: dict[str, Any] = {
            "CRP-Context-Coverage-Score": _r(cov_score) if cov_score is not None else 0.0,
            "CRP-Context-Coverage-Depth": len(state.coverage),
            "CRP-Context-NGram-Guard-Activations": activations,
            "CRP-Context-Continuation-Status": exits.IN_PROGRESS,  # set for the window by _set_status
            "CRP-Context-Graph-Hops": sel.hops if ev.policy.graph_retrieval == "on" else 0,
            "CRP-Context-Connectors-Included": cdgr.connectors_included_header(len(connectors), len(facts)),
            "CRP-Context-Bridge-Score": _r(cdgr.bridge_score_header(bridges)),
            "CRP-Context-Conflicts-Resolved": conflicts.conflicts_resolved_header(sel.detected, sel.unresolved),
            "CRP-Context-Recency-Penalised": recency.recency_penalised_count(c.recency),
        }
        if partitions is not None:
            headers["CRP-Context-Coverage-Partitions"] = partitions
        if diagnostic is not None:  # SPEC-024 §5.3: the operator should ingest more documents
            notes.append(diagnostic)
            headers["CRP-Onboarding-Hint"] = ONBOARDING_HINT
        labels = [s.label for s in (part if branch is not None else state.residual_states())]
        env: dict[str, Any] = {
            "request_id": ev.request_id,
            "session_id": ev.session_id,
            "window": ev.window,
            "status": exits.IN_PROGRESS,
            "facts": facts,
            "notes": notes,
            "residual_anchor": packing.residual_task_anchor(labels),
            "headers": headers,
        }
        if branch is not None:
            env["branch"] = branch
            env["partition"] = [s.id for s in part]
        return env, ratios

    def _audit_conflicts(
        self, uow: UnitOfWork, ev: Any, record: Record, out: Emitter, sel: assembly.Selection, branch: int | None
    ) -> None:
        for res in sel.resolutions:
            kind: Literal["CONTRADICTION_UNRESOLVED", "CONTRADICTION_RESOLVED"] = (
                "CONTRADICTION_UNRESOLVED" if res["tie"] else "CONTRADICTION_RESOLVED"
            )
            details = {
                "kept": res["kept"],
                "suppressed": res["suppressed"],
                "pattern": res["pattern"],
                "authority_kept": res["authority_kept"],
                "authority_suppressed": res["authority_suppressed"],
                "session_id": ev.session_id,
                "window": ev.window,
            }
            if res["tie"]:
                details = {
                    "facts": sorted(res["pair"]),
                    "pattern": res["pattern"],
                    "authority": res["authority_kept"],
                    "session_id": ev.session_id,
                    "window": ev.window,
                }
            if branch is not None:
                details["branch"] = branch
            eid = derive_id(out.cause, kind, *sorted(res["pair"]), str(branch))
            uow.repo.append_audit(eid, kind, record.ts_us, ev.session_id, details)
            msg = events.AuditRecorded(event_id=eid, audit_type=kind, at=record.at, details=details)
            out.emit(AUDIT, ev.session_id, events.encode(msg), record_id=eid)

    # reports ----------------------------------------------------------------------------------
    def _report(self, ev: events.WindowReported, record: Record, uow: UnitOfWork, out: Emitter) -> None:
        row = uow.repo.get_session(ev.session_id)
        if row is None:
            raise Rejected(f"session_id: {ev.session_id!r} is unknown (no window was requested)")
        state = SessionState.from_row(row)
        win = state.windows.get(str(ev.window))
        if win is None:
            raise Rejected(f"window: window {ev.window} of session {ev.session_id!r} was never requested")
        if win.branches > 1 and (ev.branch is None or ev.branch >= win.branches):
            raise Rejected(f"branch: window {ev.window} fanned out to {win.branches} branches; got branch {ev.branch}")
        if win.branches == 1 and ev.branch not in (None, 0):
            raise Rejected(f"branch: window {ev.window} has no branch {ev.branch}")
        branch = ev.branch or 0
        if branch in win.reported:
            raise Rejected(f"window: window {ev.window} branch {branch} was already reported")
        unknown = [a.id for a in ev.addressed if state.sub_query(a.id) is None]
        if unknown:
            raise Rejected(f"addressed: unknown sub-query id {unknown[0]!r}")
        try:
            given = [a.embedding for a in ev.addressed]
            texts = [a.text or state.sub_query(a.id).text for a in ev.addressed]  # type: ignore[union-attr]
            fields = [f"addressed[{i}].embedding" for i in range(len(ev.addressed))]
            vecs: list[np.ndarray | None] = [None] * len(ev.addressed)
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
        held = []
        for a, v in zip(ev.addressed, vecs, strict=True):
            sq = state.sub_query(a.id)
            assert sq is not None
            emb = vec_to_json(v) if v is not None else sq.embedding
            depth = exits.report_depth(a.depth, a.words, sq.expected_words)
            held.append(vars(CoverageEntry(id=a.id, embedding=emb, depth=depth, window=ev.window, branch=ev.branch)))
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
            self._fan_in(uow, state, win, ev.window, record, out)
        self._save(uow, state, record)

    def _fan_in(
        self, uow: UnitOfWork, state: SessionState, win: WindowState, window: int, record: Record, out: Emitter
    ) -> None:
        """SPEC-027 §1.6 / SPEC-024 §7.2: merge every branch's report into the session, then check the
        loop exits (§6) for this window; an exit closes the window with a closing envelope."""
        addressed: list[str] = []
        for b in range(win.branches):  # branch order: the merge does not depend on arrival order
            held = win.pending.pop(str(b))
            state.coverage.extend(CoverageEntry(**e) for e in held["coverage"])
            addressed.extend(held["addressed"])
            state.blacklist = sorted(ngram.update_ngram_blacklist(frozenset(state.blacklist), held["output_text"]))
        state.residual = cdr.update_residual_set(state.residual, addressed)
        completeness, safety = win.fan_in()
        state.completeness = completeness
        if safety is not None:
            state.safety_budget = safety
        state.reported = max(state.reported, window)
        if exits.is_terminal(state.status):  # the window's envelope already reached ckf-exhausted
            return
        done = completeness >= exits.COMPLETION_THRESHOLD and self._residual_done(uow, state, win, record.ts_us)
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

    @staticmethod
    def _residual_done(uow: UnitOfWork, state: SessionState, win: WindowState, now_us: int) -> bool:
        """SPEC-024 §6 Exit 1: the Residual Set is empty or holds only marginal items, those whose best
        live fact is below the window's relevance gate (``exits.marginal_residual``)."""
        residual = state.residual_states()
        if not residual:
            return True
        probes = [vec_from_json(s.embedding) for s in residual]
        best = [
            max((float(score) for _f, score in hits), default=-np.inf)
            for hits in uow.vectors.search_many(probes, 1, now_us / 1e6, assembly.EXCLUDED)
        ]
        gate = win.min_relevance if win.min_relevance is not None else uow.fabric.thresholds(uow.repo).min_relevance
        return exits.residual_done(exits.marginal_residual(best, gate))

    def _save(self, uow: UnitOfWork, state: SessionState, record: Record) -> None:
        uow.repo.put_session(
            state.session_id, state.embedding_model, state.reported, state.max_windows, state.to_json(), record.ts_us
        )


def _r(x: Any) -> float:
    return round(float(x), 6)
