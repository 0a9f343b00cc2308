"""The drift arbiter (seed 002): a verdict per claim on every change of ``crp.facts``.

Epochs are compared before trust (``core.drift``). Effects are events with derived ids:
STALE_HIGH_TRUST files a refresh request against the stale source and marks its facts ``stale``;
POISONING_CANDIDATE files a quarantine candidate for review (quarantined only by an operator, or by
the opt-in auto-quarantine policy); DRIFT_UNDETERMINED is an audit event and nothing else. A verdict
whose fingerprint equals the stored one emits nothing, so a repeated input, or the arbiter's own
``FactStatusChanged`` coming back on ``crp.facts``, ends the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from crp_stream import events
from crp_stream.core.drift import (
    DRIFT_UNDETERMINED,
    POISONING_CANDIDATE,
    STALE_HIGH_TRUST,
    PartitionView,
    Verdict,
    known_at,
    partition_views,
    quarantine_eligible,
    refresh_resolved,
)
from crp_stream.core.ids import derive_id
from crp_stream.core.tenants import scoped_claim_key
from crp_stream.core.verdict_kept import verdict_kept
from crp_stream.events.topics import FACTS, QUARANTINE_CANDIDATES, REFRESH_REQUESTS
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.fabric.sql.rows import FactRow, RefreshRow
from crp_stream.processors import effects, text_claims
from crp_stream.processors.base import BatchItem, Emitter, Handler, Record, dt_to_us, us_to_dt
from crp_stream.processors.claim_views import claim_records, current_records, known_views
from crp_stream.processors.effects import (
    AUTO_POLICY,
    audit,
    change_status,
    chunks,
    quarantine_candidate,
    short,
)
from crp_stream.processors.verdicts import (
    _KEPT as _KEPT,
)
from crp_stream.processors.verdicts import (
    _claim_key as _claim_key,
)
from crp_stream.processors.verdicts import (
    _fingerprint as _fingerprint,
)
from crp_stream.processors.verdicts import (
    _iso as _iso,
)
from crp_stream.processors.verdicts import (
    choose_verdict as choose_verdict,
)
from crp_stream.processors.verdicts import (
    verdict_details as verdict_details,
)

log = logging.getLogger(__name__)

ARBITER = "arbiter"
_NEWEST = itemgetter("epoch_us", "fact_id")
_CHANGES = (events.FactRecorded, events.FactStatusChanged)  # built once (``A | B`` builds a union per call)


class ArbiterHandler(Handler[events.FactRecorded | events.FactStatusChanged]):
    group = ARBITER
    topics = (FACTS,)
    rejects = False  # never raises Rejected: no savepoint per crp.facts record
    batch_native = True

    def __init__(self) -> None:
        self._preloaded = False

    def handle_batch(
        self, items: Sequence[BatchItem[events.FactRecorded | events.FactStatusChanged]], uow: UnitOfWork
    ) -> int:
        """A micro-batch of changes: the claim index is read once (it is kept in memory), the batch's
        rows, edges and neighbours' rows in one query each, and the writes (claim rows, processed
        marks) are buffered to the batch's end. Each change is still judged on its own, as of its event
        time (seed 002: a verdict is a function of the records known at that time), in arrival order."""
        if not items:
            return 0
        self._preload(uow)
        if len(items) > 1:
            self.prepare([it.event for it in items], uow)
        for it in items:
            self._handle(it.event, it.record, uow, it.out)
        return len(items)

    def _preload(self, uow: UnitOfWork) -> None:
        uow.fabric.follow(uow.repo)  # a reembed switched models: the new one's thresholds, without a restart
        if not self._preloaded:  # the claim index is rebuilt on the first record (inside the runtime's
            uow.fabric.claims.preload(uow.repo)  # retries, unlike start-up: the store may be down then)
            self._preloaded = True

    def prepare(self, events_: Sequence[events.FactRecorded | events.FactStatusChanged], uow: UnitOfWork) -> None:
        """A document's facts arrive as one run: their rows, their similarity edges and their
        neighbours' rows are read in one query each (text claims read all three per fact)."""
        self._read_facts([e.fact_id for e in events_ if isinstance(e, _CHANGES)], uow)

    def read_ahead(self, topic: str, keys: Sequence[str], uow: UnitOfWork) -> None:
        """The facts of a whole ingest micro-batch (crp.facts is keyed by fact id), read as ``prepare``
        reads one run's: once per batch instead of once per document."""
        if topic == FACTS and len(keys) > 1:
            self._read_facts(keys, uow)

    @staticmethod
    def _read_facts(ids: Sequence[str], uow: UnitOfWork) -> None:
        rows = uow.repo.facts_by_ids(ids, copies=False)  # read ahead; only their claim keys are read here
        text = [f for f, r in rows.items() if r["claim_key"] is None]
        if text:
            neighbours = {n for nbs in text_claims.similar_many(uow, text).values() for n in nbs}
            uow.repo.facts_by_ids(neighbours, copies=False)  # only held for the run: no copies
            if uow.repo.has_titles():  # a claim's peers are checked for numbered sibling titles
                uow.repo.fact_titles([*text, *neighbours])

    def handle(
        self, event: events.FactRecorded | events.FactStatusChanged, record: Record, uow: UnitOfWork, out: Emitter
    ) -> None:
        if isinstance(event, _CHANGES):
            self._preload(uow)
            self._handle(event, record, uow, out)

    def _handle(
        self, event: events.FactRecorded | events.FactStatusChanged, record: Record, uow: UnitOfWork, out: Emitter
    ) -> None:
        """``handle`` after ``_preload`` (once per micro-batch: its reads hold for the transaction)."""
        if not isinstance(event, _CHANGES):
            return
        # event time of the change: a new fact's epoch; a status change's time (the arbiter's own carry
        # the time of the evaluation that made them)
        as_of = dt_to_us(event.epoch if isinstance(event, events.FactRecorded) else event.at)
        if isinstance(event, events.FactRecorded) and event.subject and event.attribute:
            self.evaluate(
                scoped_claim_key(event.tenant, _claim_key(event.subject, event.attribute)), record, uow, out, as_of
            )
            return
        key = None
        if isinstance(event, events.FactStatusChanged):
            key = uow.fabric.claims.claim_of(uow.repo, event.fact_id)
        if key is not None:  # held by the claim index: its claim and current row are known
            self.evaluate(key, record, uow, out, as_of)
            return
        row = uow.repo.facts_by_ids([event.fact_id]).get(event.fact_id)
        if row is None:
            return  # a changelog record of another fabric: nothing here to arbitrate
        key = row["claim_key"]
        if key is None:
            if not isinstance(event, events.FactRecorded) or row["status"] != "active":
                return
            key = text_claims.assign_text_claim(uow, row)
            if key is None:
                return
        self.evaluate(str(key), record, uow, out, as_of)

    # --------------------------------------------------------------------------------------------
    def evaluate(self, key: str, record: Record, uow: UnitOfWork, out: Emitter, as_of: int) -> Verdict | None:
        """Re-evaluate one claim as of ``as_of`` (µs); act only when its verdict's fingerprint changed.
        Returns the verdict (when it did not change: its reason empty, and perhaps an earlier verdict
        with the same fingerprint, ``verdict_kept``)."""
        stored, rows, memo = uow.fabric.claims.claim(uow.repo, key)  # members and row, from memory
        if stored is not None:  # never judged as of an earlier time than it already was (status changes
            as_of = max(as_of, int(stored["updated_at_us"]))  # come back later, carrying older times)
        text_claim = key.startswith(text_claims.SIM_PREFIX)
        window = uow.settings.agreement_window  # seconds; None = all records
        known = None if text_claim or window is not None else known_views(rows, memo, as_of)
        if known is None:
            rows = [r for r, ok in zip(rows, known_at([r["epoch_us"] for r in rows], as_of), strict=True) if ok]
            records = claim_records(rows, text_claim, memo)
            views = partition_views(current_records(records, window))
        else:
            rows, records, views = known
        if not views:
            return None
        # most records leave the verdict as it was: proved from the views alone (``verdict_kept``), or
        # evaluated without its reason text, which is built only when the verdict acts
        kept: tuple[tuple[PartitionView, ...], Verdict, str] | None = memo.get(_KEPT)
        if kept is not None and kept[1].claim == key and verdict_kept(kept[1], kept[0], views):
            verdict, fingerprint = kept[1], kept[2]
        else:
            verdict = choose_verdict(views, key, records, explain=False)
            fingerprint = _fingerprint(verdict, memo)
        memo[_KEPT] = (views, verdict, fingerprint)
        if stored is not None and stored["fingerprint"] == fingerprint:
            if as_of > stored["updated_at_us"]:
                uow.repo.touch_claim(stored, as_of)
            return verdict
        verdict = choose_verdict(views, key, records)
        details = verdict_details(verdict, views)
        uow.repo.put_claim(key, verdict.kind, fingerprint, details, as_of)
        subject, attribute = self._names(rows, text_claim, ordered=known is not None)
        ctx = _Ctx(uow, out, record, key, subject, attribute, verdict, fingerprint, details, rows, as_of)
        still_open = self._resolve_refreshes(ctx, views)
        if verdict.kind == STALE_HIGH_TRUST:
            self._stale(ctx, still_open)
        elif verdict.kind == POISONING_CANDIDATE:
            self._poisoning(ctx)
        elif verdict.kind == DRIFT_UNDETERMINED:
            audit(
                uow,
                out,
                derive_id("audit", DRIFT_UNDETERMINED, key, fingerprint),
                "DRIFT_UNDETERMINED",
                subject,
                as_of,
                {**details, "action": "none: the arbiter refuses to act"},
            )
        if verdict.kind != STALE_HIGH_TRUST:
            self._unstale(ctx, views)
        return verdict

    @staticmethod
    def _names(rows: Sequence[FactRow], text_claim: bool, ordered: bool = False) -> tuple[str, str]:
        """``ordered``: ``rows`` are in strictly increasing ``(epoch_us, fact_id)`` order (``known_views``
        checks it), so the newest is the last."""
        if text_claim:
            return text_claims.claim_text(rows), "statement"
        newest = rows[-1] if ordered else max(rows, key=_NEWEST)  # a structured claim's rows are all named
        if not (newest["subject"] and newest["attribute"]):
            newest = max([r for r in rows if r["subject"] and r["attribute"]], key=_NEWEST)
        return str(newest["subject"]), str(newest["attribute"])

    def _resolve_refreshes(self, ctx: _Ctx, views: Sequence[PartitionView]) -> list[RefreshRow]:
        """An open request resolves when the stale source itself now asserts the
        observed value with a record later than the request's high-trust epoch. Returns the claim's
        requests still open, in the store's order."""
        by_source = {v.source: v for v in views}
        still_open = []
        for req in ctx.uow.repo.refresh_requests_for_claim(ctx.key, status="open"):
            payload = req["payload"]
            view = by_source.get(req["source"])
            if view is None or not refresh_resolved(
                view, str(payload["observed_value"]), float(payload["high_trust_epoch_s"])
            ):
                still_open.append(req)
                continue
            ctx.uow.repo.resolve_refresh(req["request_id"], ctx.as_of, ARBITER)
            audit_id = derive_id("audit", "REFRESH_RESOLVED", req["request_id"])
            audit(
                ctx.uow,
                ctx.out,
                audit_id,
                "REFRESH_RESOLVED",
                req["source"],
                ctx.as_of,
                {
                    "request_id": req["request_id"],
                    "source": req["source"],
                    "claim": ctx.key,
                    "subject": payload.get("subject"),
                    "attribute": payload.get("attribute"),
                    "stale_value": payload.get("stale_value"),
                    "observed_value": payload["observed_value"],
                    "resolved_by": ARBITER,
                    "evidence": list(view.fact_ids[: effects.IDS_MAX]),
                    "reason": f"{req['source']} now asserts {payload['observed_value']!r} "
                    f"({view.support} of {view.total} records, latest {_iso(view.latest_epoch)})",
                },
            )
        return still_open

    def _unstale(self, ctx: _Ctx, views: Sequence[PartitionView]) -> None:
        """The high-trust value wins again (e.g. its contradicting records were quarantined): its
        records that an earlier STALE_HIGH_TRUST verdict marked stale, and that still speak for
        their source, become active again."""
        high = next(v for v in views if v.source == ctx.verdict.high_trust_source)
        # the claim's rows hold its facts' statuses (nothing here changed the high source's since they
        # were read): with none of the high partition's facts stale there is nothing to read or change
        status = {r["fact_id"]: r["status"] for r in ctx.rows}
        if all(status.get(f, "stale") != "stale" for f in high.fact_ids):
            return
        change_status(
            ctx.uow,
            ctx.out,
            high.fact_ids,
            "active",
            f"{ctx.verdict.kind}: {high.source}'s {high.value!r} is no longer found stale",
            ctx.as_of,
            derive_id("verdict", ctx.key, ctx.fingerprint),
            ("stale",),
        )

    def _stale(self, ctx: _Ctx, open_requests: Sequence[RefreshRow]) -> None:
        """``open_requests``: the claim's open refresh requests (``_resolve_refreshes``'s)."""
        v = ctx.verdict
        source = v.high_trust_source
        request_id = derive_id("refresh-request", ctx.key, source, ctx.fingerprint)
        assert v.divergent_value is not None and v.divergent_epoch is not None
        for open_req in open_requests:
            same = (
                open_req["source"] == source
                and open_req["payload"]["observed_value"] == v.divergent_value
                and open_req["payload"]["stale_value"] == v.high_trust_value
            )
            if same:  # the source was already asked for this refresh: never a second request
                request_id = open_req["request_id"]
        req = events.RefreshRequested(
            request_id=request_id,
            source=source,
            subject=ctx.subject,
            attribute=ctx.attribute,
            stale_value=v.high_trust_value,
            observed_value=v.divergent_value,
            evidence=list(v.evidence_fact_ids[: effects.IDS_MAX]),
            high_trust_epoch=us_to_dt(round(v.high_trust_epoch * 1e6)),
            divergent_epoch=us_to_dt(round(v.divergent_epoch * 1e6)),
            corroborating_partitions=v.corroborating_partitions,
            requested_at=ctx.record.at,
        )
        payload = {
            **events.to_json_value(req),
            "claim_key": ctx.key,
            "high_trust_epoch_s": v.high_trust_epoch,
            "evidence_total": len(v.evidence_fact_ids),
            "reason": short(v.reason),
        }
        if ctx.uow.repo.put_refresh(request_id, ctx.key, source, payload, ctx.as_of):
            ctx.out.emit(REFRESH_REQUESTS, source, events.encode(req), record_id=request_id)
            audit(
                ctx.uow,
                ctx.out,
                derive_id("audit", STALE_HIGH_TRUST, ctx.key, ctx.fingerprint),
                "STALE_HIGH_TRUST",
                ctx.subject,
                ctx.as_of,
                {**ctx.details, "request_id": request_id, "stale_fact_ids": list(v.stale_fact_ids)},
            )
            audit(
                ctx.uow,
                ctx.out,
                derive_id("audit", "REFRESH_REQUESTED", request_id),
                "REFRESH_REQUESTED",
                source,
                ctx.as_of,
                {
                    "request_id": request_id,
                    "source": source,
                    "claim": ctx.key,
                    "subject": ctx.subject,
                    "attribute": ctx.attribute,
                    "stale_value": v.high_trust_value,
                    "observed_value": v.divergent_value,
                    "corroborating_partitions": v.corroborating_partitions,
                    "evidence_total": len(v.evidence_fact_ids),
                },
            )
        change_status(
            ctx.uow,
            ctx.out,
            v.stale_fact_ids,
            "stale",
            f"STALE_HIGH_TRUST: {v.divergent_value!r} is fresher and corroborated; refresh requested from {source}",
            ctx.as_of,
            request_id,
            ("active",),
        )

    def _poisoning(self, ctx: _Ctx) -> None:
        v = ctx.verdict
        assert v.divergent_value is not None
        source_of = {r["fact_id"]: r["source"] for r in ctx.rows}
        # a fact already in a candidate of this claim (pending, confirmed or released by an operator)
        # is never filed again: a new candidate holds only new suspects
        filed = {f for c in ctx.uow.repo.candidates_for_claim(ctx.key) for f in c["payload"]["fact_ids"]}
        by_source: dict[str, list[str]] = {}
        for fid in v.suspect_fact_ids:
            if fid not in filed:
                by_source.setdefault(source_of[fid], []).append(fid)
        auto = bool(ctx.uow.settings.auto_quarantine) and quarantine_eligible(v)
        for source in sorted(by_source):
            for ids in chunks(sorted(by_source[source])):
                cid = derive_id("quarantine-candidate", ctx.key, source, *ids)
                cand = events.QuarantineCandidate(
                    candidate_id=cid,
                    source=source,
                    fact_ids=ids,
                    subject=ctx.subject,
                    attribute=ctx.attribute,
                    value=v.divergent_value,
                    reason=short(v.reason),
                )
                payload = {**events.to_json_value(cand), "claim_key": ctx.key, "verdict": ctx.details}
                if not ctx.uow.repo.put_candidate(cid, ctx.key, source, payload, ctx.as_of):
                    continue  # already filed (and perhaps decided): never a second candidate
                ctx.out.emit(QUARANTINE_CANDIDATES, source, events.encode(cand), record_id=cid)
                audit(
                    ctx.uow,
                    ctx.out,
                    derive_id("audit", POISONING_CANDIDATE, cid),
                    "POISONING_CANDIDATE",
                    ctx.subject,
                    ctx.as_of,
                    {
                        **ctx.details,
                        "candidate_id": cid,
                        "source": source,
                        "fact_ids": ids,
                        "action": "auto-quarantined (auto-quarantine policy)"
                        if auto
                        else "quarantine review: an operator must confirm_quarantine",
                    },
                )
                if auto:
                    quarantine_candidate(
                        ctx.uow,
                        ctx.out,
                        cid,
                        source,
                        ids,
                        ctx.as_of,
                        actor=AUTO_POLICY,
                        reason=f"{AUTO_POLICY}: {short(v.reason, 3000)}",
                        cause_id=cid,
                    )


class _Ctx(NamedTuple):
    """What one evaluation's effects need, passed once."""

    uow: UnitOfWork
    out: Emitter
    record: Record
    key: str
    subject: str
    attribute: str
    verdict: Verdict
    fingerprint: str
    details: dict[str, Any]
    rows: Sequence[FactRow]
    as_of: int  # event time of the evaluation: the time of everything it emits


__all__ = ["ArbiterHandler", "choose_verdict", "claim_records"]
