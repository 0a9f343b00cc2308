"""Drift arbitration: tell legitimate corpus drift from poisoning by comparing epochs before trust.

Implements seed ``002_ce3d030fd7bbcd69.txt`` (drift vs. poisoning, freshness dominance) as pure
functions; ``processors/arbiter.py`` wires them to ``crp.facts``. No I/O, no clocks: every epoch comes from the caller
and is the record's LOG-APPEND time (docs/contract.md), never a payload field.

API
---
- ``core.claim_values``: ``claim_key(subject, attribute)`` (the claim a fact belongs to) and
  ``normalise_value(value, unit=None)`` ("250 rps" == "250 req/s" == "250" with unit "rps").
- ``ClaimRecord``: one fact of a claim (fact_id, source, trust, epoch, normalised value, status).
- ``counted_records(records)``: which records speak for their partition (active/stale only; a stale
  record is dropped once its source appends a later active record, i.e. the source refreshed).
- ``partition_agreement(records) -> PartitionView``: one source's majority value and share.
- ``partition_views(records) -> tuple[PartitionView, ...]``: group a claim's records by source.
- ``high_trust_partition(views) -> PartitionView``: the reference partition.
- ``freshness_dominance_holds(high_trust_epoch, divergent_epochs) -> bool``.
- ``corroborating_partitions(high_trust_epoch, divergent_epochs) -> int``.
- ``arbitrate_divergence(high_trust_epoch, divergent_epochs, corroborating_partitions) -> VerdictKind``:
  the seed's function, returning "DRIFT_UNDETERMINED" where the seed raises.
- ``claim_verdict(views, *, claim, explain=True) -> Verdict``: the whole decision for one claim
  (``explain=False``: the same verdict without its reason text).
- ``quarantine_eligible(verdict) -> bool``: rule 4; still only a *candidate* for review.
- ``verdict_fingerprint(verdict) -> str``: identity of the verdict's effect, for idempotency.
- ``refresh_resolved(view, observed_value, since_epoch=None) -> bool``.

The seed's incident
-------------------
>>> from crp_stream.core.claim_values import claim_key
>>> DAY = 86_400.0
>>> now = 1_794_528_000.0  # 2026-11-13T00:00:00Z
>>> recs = [ClaimRecord("v1", "vendor_docs", 0.9, now - 120 * DAY, "1000 rps", "active")]
>>> recs += [ClaimRecord(f"t{i:02d}", "field_telemetry", 0.4, now - 14 * DAY + i, "250 rps", "active")
...          for i in range(47)]
>>> recs += [ClaimRecord(f"o{i}", "field_telemetry", 0.4, now - 20 * DAY + i, "1000 rps", "active")
...          for i in range(3)]
>>> recs.append(ClaimRecord("c1", "community_notes", 0.2, now - 10 * DAY, "250 rps", "active"))
>>> v = claim_verdict(partition_views(recs), claim=claim_key("upstream api", "rate limit"))
>>> v.kind, v.high_trust_value, v.divergent_value, v.corroborating_partitions, v.stale_fact_ids
('STALE_HIGH_TRUST', '1000 rps', '250 rps', 1, ('v1',))
>>> quarantine_eligible(v)
False
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from itertools import compress, groupby
from operator import attrgetter
from typing import Literal, NamedTuple

from crp_stream.core import memo as text_memos
from crp_stream.core.ids import derive_id

VerdictKind = Literal["CONSENSUS_OK", "STALE_HIGH_TRUST", "POISONING_CANDIDATE", "DRIFT_UNDETERMINED"]

CONSENSUS_OK: VerdictKind = "CONSENSUS_OK"
STALE_HIGH_TRUST: VerdictKind = "STALE_HIGH_TRUST"
POISONING_CANDIDATE: VerdictKind = "POISONING_CANDIDATE"
DRIFT_UNDETERMINED: VerdictKind = "DRIFT_UNDETERMINED"

#: Statuses whose records speak for their partition. Quarantined, superseded and expired records do not.
COUNTED_STATUSES: frozenset[str] = frozenset({"active", "stale"})

_RECORD_ORDER = attrgetter("source", "epoch", "fact_id")
_EPOCH_ORDER = attrgetter("epoch", "fact_id")
_SOURCE = attrgetter("source")
_VALUE = attrgetter("value")
_FACT_ID = attrgetter("fact_id")
_STATUS = attrgetter("status")
_ACTIVE_ONLY = frozenset({"active"})
_new = tuple.__new__


class ClaimRecord(NamedTuple):
    """One fact of a claim. ``epoch`` is the log-append time (seconds), ``value`` is normalised.

    These records, views and verdicts are NamedTuples: the arbiter builds one of each per record, and
    a frozen dataclass's ``__init__`` cost ~4x more; immutable and compared by value all the same.
    A tuple of atoms is also left alone by the cyclic collector once it has seen it."""

    fact_id: str
    source: str
    trust: float
    epoch: float
    value: str
    status: str


class PartitionView(NamedTuple):
    """What one provenance partition says about a claim, by internal agreement.

    ``latest_epoch`` is the latest epoch of the records asserting ``value``; ``newest_epoch`` is the
    latest epoch of any counted record of the partition (the freshness test uses it for the
    high-trust side). ``fact_ids`` are the records asserting ``value``, sorted.
    """

    source: str
    trust: float
    value: str
    share: float
    support: int
    total: int
    latest_epoch: float
    newest_epoch: float
    fact_ids: tuple[str, ...]


class Verdict(NamedTuple):
    """The arbiter's decision for one claim; ``reason`` says why in words an operator can read.

    ``divergent_*`` describe the one divergent value evaluated (None/empty for CONSENSUS_OK);
    ``other_divergent_values`` lists any further divergent values, not evaluated in this verdict.
    ``stale_fact_ids`` is set only for STALE_HIGH_TRUST, ``suspect_fact_ids`` only for
    POISONING_CANDIDATE (a candidate for review, never a quarantine by itself).
    """

    kind: VerdictKind
    claim: str
    high_trust_source: str
    high_trust_value: str
    high_trust_epoch: float
    divergent_value: str | None
    divergent_sources: tuple[str, ...]
    divergent_epoch: float | None
    corroborating_partitions: int
    evidence_fact_ids: tuple[str, ...]
    stale_fact_ids: tuple[str, ...]
    suspect_fact_ids: tuple[str, ...]
    other_divergent_values: tuple[str, ...]
    reason: str


def known_at(epochs_us: Sequence[int], as_of_us: int) -> list[bool]:
    """Epochs before trust, in event time: a verdict (or a window's envelope) at ``as_of_us`` weighs only
    the records whose ingestion epoch is not later. It is judged on what the log held at that moment,
    whatever the order in which a distributed runtime happens to have stored later records (the same
    verdicts and envelopes on Kafka as in the embedded log's append order)."""
    return [e <= as_of_us for e in epochs_us]


def counted_records(records: Iterable[ClaimRecord]) -> tuple[ClaimRecord, ...]:
    """Drift seed, Decision Boundary rule 4 and Operational Effect: which records speak for a partition.

    Quarantined (and superseded or expired) records never speak. Stale records still do, so marking a
    high-trust record stale does not make the staleness disappear; but a stale record stops speaking
    once its own source has appended a later active record, because the source has refreshed.
    Returned in (source, epoch, fact_id) order.
    """
    kept = [r for r in records if r.status in COUNTED_STATUSES]
    newest_active: dict[str, float] = {}
    for r in kept:
        if r.status == "active" and r.epoch > newest_active.get(r.source, float("-inf")):
            newest_active[r.source] = r.epoch
    speaking = [r for r in kept if r.status == "active" or r.epoch >= newest_active.get(r.source, float("-inf"))]
    return tuple(sorted(speaking, key=_RECORD_ORDER))


def partition_agreement(records: Sequence[ClaimRecord]) -> PartitionView:
    """Drift seed, What Was Observed: a partition's value by internal agreement (e.g. 47 of 50 records).

    ``records`` must all be of one source; they are filtered by ``counted_records``. The majority value
    is the one asserted by most records; ties go to the value with the latest epoch, then the
    lexicographically smallest value. The partition's trust is that of its newest counted record.
    Raises ValueError when the records mix sources or none of them counts.
    """
    sources = {r.source for r in records}
    if len(sources) > 1:
        raise ValueError(f"partition_agreement needs one source, got {sorted(sources)}")
    counted = counted_records(records)
    if not counted:
        raise ValueError("partition_agreement: no active or stale record to count")
    return _agreement(counted)


def _agreement(counted: Sequence[ClaimRecord]) -> PartitionView:
    """``partition_agreement`` of one source's counted records, in ``counted_records`` order (epoch,
    then fact id): a value's last record is its latest, the last record the newest. Tallied by C
    built-ins (``list.count``, ``compress``): a claim's views are built per record."""
    values = list(map(_VALUE, counted))
    newest = counted[-1]
    n = len(values)
    distinct = set(values)
    if len(distinct) == 1:  # one value (most partitions): the majority without a comparison
        value, support, latest = values[0], n, newest.epoch
        ids = sorted(map(_FACT_ID, counted))
    else:
        best: tuple[int, float, str] | None = None
        backwards = values[::-1]
        for v in distinct:
            key = (-values.count(v), -counted[n - 1 - backwards.index(v)].epoch, v)
            if best is None or key < best:
                best = key
        assert best is not None
        support, latest, value = -best[0], -best[1], best[2]
        ids = sorted(compress(map(_FACT_ID, counted), map(value.__eq__, values)))
    # the fields in order, by ``tuple.__new__`` (the NamedTuple's ``__new__`` is a Python function)
    view: PartitionView = _new(
        PartitionView,
        (newest.source, newest.trust, value, support / n, support, n, latest, newest.epoch, tuple(ids)),
    )
    return view


def partition_views(records: Iterable[ClaimRecord]) -> tuple[PartitionView, ...]:
    """Drift seed, Scope (stores partitioned by provenance): one view per source, sorted by source.

    Sources with no counted record are left out. The records are ordered once (two stable sorts in C:
    records in epoch order are already in order for the first) and split by source; the statuses are
    filtered (``counted_records``) only when some record is not active.
    """
    ordered = sorted(records, key=_EPOCH_ORDER)
    ordered.sort(key=_SOURCE)
    every_active = set(map(_STATUS, ordered)) <= _ACTIVE_ONLY
    views = []
    for _source, group in groupby(ordered, _SOURCE):
        counted: Sequence[ClaimRecord] = list(group)
        if not every_active:
            counted = counted_records(counted)
            if not counted:
                continue
        views.append(_agreement(counted))
    return tuple(views)


def high_trust_partition(partitions: Sequence[PartitionView]) -> PartitionView:
    """Drift seed, Core Distinction: the high-trust partition that PWRC compares the others against.

    Highest trust; ties go to the partition with the newest record, then the smallest source name.
    """
    if not partitions:
        raise ValueError("high_trust_partition: no partitions")
    # the key built in one pass, no call per partition (the arbiter's every record); the index keeps
    # ``min``'s choice among equal keys: the first
    return partitions[min([(-p.trust, -p.newest_epoch, p.source, i) for i, p in enumerate(partitions)])[3]]


def freshness_dominance_holds(high_trust_epoch: float, divergent_epochs: Sequence[float]) -> bool:
    """Drift seed, Condition of Validity: the high-trust partition is at least as fresh as every
    divergent partition; only then is a poisoning verdict valid."""
    for e in divergent_epochs:  # noqa: SIM110 (a loop, not ``all`` over a generator: called on every record)
        if not e <= high_trust_epoch:
            return False
    return True


def corroborating_partitions(high_trust_epoch: float, divergent_epochs: Sequence[float]) -> int:
    """Drift seed, Decision Boundary rule 3: partitions corroborating the divergent value.

    ``divergent_epochs`` holds one epoch per partition asserting the divergent value. A partition
    corroborates only with an epoch strictly later than the high-trust epoch, and the first such
    partition is the claim itself, not its corroboration: the count is (later partitions - 1), >= 0.
    """
    later = 0
    for e in divergent_epochs:
        if e > high_trust_epoch:
            later += 1
    return later - 1 if later > 1 else 0


def arbitrate_divergence(
    high_trust_epoch: float,
    divergent_epochs: Sequence[float],
    corroborating_partitions: int,
) -> VerdictKind:
    """Drift seed, Decision Boundary rule 2 (epochs before trust) and the seed's ``arbitrate_divergence``.

    Identical to the seed's function, except that where it raises FreshnessDominanceViolation
    (later epoch, no corroboration) this returns "DRIFT_UNDETERMINED": refusing to act is an audit
    event, never a crash.
    """
    if not divergent_epochs:
        return CONSENSUS_OK
    if not freshness_dominance_holds(high_trust_epoch, divergent_epochs):
        if corroborating_partitions >= 1:
            return STALE_HIGH_TRUST
        return DRIFT_UNDETERMINED
    return POISONING_CANDIDATE


@text_memos.text_memo(0.1)
def _iso(epoch: float) -> str:
    """An epoch (s) as a reason's text, memoised: a claim's reasons repeat its partitions' epochs."""
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat()


def claim_verdict(partitions: Sequence[PartitionView], *, claim: str, explain: bool = True) -> Verdict:
    """Drift seed, Decision Boundary rules 2-4: the verdict for one claim, epochs compared before trust.

    The high-trust partition is ``high_trust_partition``; its epoch is its NEWEST record for the claim.
    Divergent partitions are those whose majority value differs from it. When several divergent
    values exist, the one asserted by most partitions is evaluated (then the latest epoch, then the
    smallest value); the others are listed in ``other_divergent_values``. Divergence alone never
    quarantines: POISONING_CANDIDATE is a candidate for review. Independent of the order of
    ``partitions``; raises ValueError on no partitions or a repeated source. ``explain=False`` leaves
    ``reason`` empty (the same verdict otherwise): a caller that acts only on a changed verdict
    explains only that one.
    """
    if not partitions:
        raise ValueError("claim_verdict: no partitions")
    if len({p.source for p in partitions}) != len(partitions):
        raise ValueError(f"claim_verdict: repeated source in {sorted(p.source for p in partitions)}")
    high = high_trust_partition(partitions)
    ht_epoch = high.newest_epoch
    high_source, high_value = high.source, high.value
    groups: dict[str, list[PartitionView]] = {}
    for p in partitions:
        if p.source != high_source and p.value != high_value:
            groups.setdefault(p.value, []).append(p)
    if not groups:
        # the fields in order, by ``tuple.__new__``: a verdict is built per record, and keywords cost
        # ~1.5 µs more, the NamedTuple's own ``__new__`` (a Python function) ~1.5k instructions
        return _new(
            Verdict,
            (
                CONSENSUS_OK,  # kind
                claim,
                high_source,
                high_value,
                ht_epoch,
                None,  # divergent_value
                (),  # divergent_sources
                None,  # divergent_epoch
                0,  # corroborating_partitions
                (),  # evidence_fact_ids
                (),  # stale_fact_ids
                (),  # suspect_fact_ids
                (),  # other_divergent_values
                f"all {len(partitions)} partition(s) agree with {high_source} on {high_value!r}" if explain else "",
            ),
        )

    if len(groups) == 1:  # one divergent value (the common case): nothing to order
        ordered = list(groups.items())
    else:
        ordered = sorted(groups.items(), key=lambda g: (-len(g[1]), -max(v.latest_epoch for v in g[1]), g[0]))
    value, views = ordered[0]
    if len(views) > 1:
        views = sorted(views, key=lambda v: v.source)
    epochs = [v.latest_epoch for v in views]
    corroboration = corroborating_partitions(ht_epoch, epochs)
    kind = arbitrate_divergence(ht_epoch, epochs, corroboration)
    latest = max(epochs)
    sources = tuple([v.source for v in views])
    evidence = tuple(sorted(views[0].fact_ids if len(views) == 1 else [f for v in views for f in v.fact_ids]))
    reason = _divergence_reason(kind, high, value, sources, latest, corroboration, views) if explain else ""
    return _new(  # the fields in order (as above)
        Verdict,
        (
            kind,
            claim,
            high_source,
            high_value,
            ht_epoch,
            value,  # divergent_value
            sources,  # divergent_sources
            latest,  # divergent_epoch
            corroboration,
            evidence,  # evidence_fact_ids
            high.fact_ids if kind == STALE_HIGH_TRUST else (),  # stale_fact_ids
            evidence if kind == POISONING_CANDIDATE else (),  # suspect_fact_ids
            tuple([v for v, _ in ordered[1:]]),  # other_divergent_values
            reason,
        ),
    )


def _divergence_reason(
    kind: VerdictKind,
    high: PartitionView,
    value: str,
    sources: tuple[str, ...],
    latest: float,
    corroboration: int,
    views: Sequence[PartitionView],
) -> str:
    """``claim_verdict``'s reason for a divergent value (``views``: its partitions)."""
    ht_epoch = high.newest_epoch
    later = [v.source for v in views if v.latest_epoch > ht_epoch]
    head = (
        f"{high.source} (trust {high.trust:g}, newest record {_iso(ht_epoch)}) says {high.value!r}; "
        f"{', '.join(sources)} say {value!r} (latest {_iso(latest)})"
    )
    if kind == STALE_HIGH_TRUST:
        reason = (
            f"{head}. The divergent value is strictly later and asserted later by "
            f"{len(later)} partitions ({', '.join(later)}), corroboration {corroboration}: "
            f"legitimate drift, {high.source} is stale; request a refresh, do not quarantine"
        )
    elif kind == DRIFT_UNDETERMINED:
        reason = (
            f"{head}. The divergent records are later but uncorroborated (only {later[0]} asserts "
            f"{value!r} after {_iso(ht_epoch)}), so drift cannot be told from epoch-spoofed "
            f"poisoning; the arbiter refuses to act"
        )
    else:
        reason = (
            f"{head}. The divergent records are not fresher than {high.source} (freshness "
            f"dominance holds): poisoning candidate for quarantine review; divergence alone "
            f"never quarantines"
        )
    return reason


def quarantine_eligible(verdict: Verdict) -> bool:
    """Drift seed, Decision Boundary rule 4: never quarantine on divergence alone.

    True only for divergence plus freshness dominance of the high-trust side (the divergent records
    are not fresher) plus no later-epoch corroboration, i.e. a POISONING_CANDIDATE with suspects. It
    makes the records eligible for quarantine review (or an opt-in auto policy), nothing more.
    """
    return (
        verdict.kind == POISONING_CANDIDATE
        and verdict.divergent_epoch is not None
        and verdict.divergent_epoch <= verdict.high_trust_epoch
        and verdict.corroborating_partitions == 0
        and bool(verdict.suspect_fact_ids)
    )


def lagging_behind_refresh(verdict: Verdict, history: Sequence[ClaimRecord], explain: bool = True) -> Verdict:
    """Drift seed, Decision Boundary (rules 2-4 and "divergence without [later-epoch corroboration] is
    a candidate poisoning event and proceeds to quarantine review"): the lagging rule.

    A POISONING_CANDIDATE whose divergent value the high-trust source itself asserted before its
    newest record may be a lower-trust source that has not caught up with the high-trust refresh
    (drift in the other direction), or an attacker replaying the authority's old value: epochs cannot
    tell the two apart, so the seed leaves it to review. The verdict stays POISONING_CANDIDATE (a
    quarantine candidate is filed; divergence alone never quarantines) and its reason tells the
    reviewer what the history shows: when the authority last asserted that value, and that the
    candidate is to be released if the source merely lags. ``explain=False``: the verdict unchanged,
    its reason empty (as ``claim_verdict``'s).
    """
    if verdict.kind != POISONING_CANDIDATE or verdict.divergent_value is None or not explain:
        return verdict
    earlier = [
        r.epoch
        for r in history
        if r.source == verdict.high_trust_source
        and r.epoch < verdict.high_trust_epoch
        and r.value == verdict.divergent_value
    ]
    if not earlier:
        return verdict
    sources = ", ".join(verdict.divergent_sources)
    return verdict._replace(
        reason=(
            f"{verdict.reason}. Lagging behind a refresh? {verdict.high_trust_source} itself asserted "
            f"{verdict.divergent_value!r} until {_iso(max(earlier))} and {verdict.high_trust_value!r} since "
            f"{_iso(verdict.high_trust_epoch)}: {sources} may not have caught up with that refresh (release "
            f"the candidate if so), or may replay the old value (confirm the quarantine)"
        )
    )


def verdict_fingerprint(verdict: Verdict) -> str:
    """Repeating an input changes nothing: the identity of a verdict's effect.

    Covers the kind, claim, high-trust source, value and epoch, the divergent value, and the fact ids
    the effect acts on (stale ids for STALE_HIGH_TRUST, suspect ids for POISONING_CANDIDATE). It
    leaves out what only accumulates without changing the effect (evidence ids, divergent sources,
    divergent epoch, corroboration count, reason), so another corroborating record does not file a
    second refresh request, while a new suspect record or a refreshed high-trust record does.
    """
    return derive_id(
        "drift-verdict",
        verdict.kind,
        verdict.claim,
        verdict.high_trust_source,
        verdict.high_trust_value,
        repr(float(verdict.high_trust_epoch)),
        verdict.divergent_value if verdict.divergent_value is not None else "",
        ",".join(verdict.stale_fact_ids),
        ",".join(verdict.suspect_fact_ids),
    )


def refresh_resolved(stale_source_view: PartitionView, observed_value: str, since_epoch: float | None = None) -> bool:
    """Drift seed, Operational Effect (a refresh request is filed against the stale source): it resolves
    when the stale source itself now asserts the observed value.

    ``observed_value`` is a ``normalise_value`` output (as in the request). When ``since_epoch`` (the
    request's high-trust epoch) is given, the assertion must also come from a record later than it.
    """
    if stale_source_view.value != observed_value:
        return False
    return since_epoch is None or stale_source_view.latest_epoch > since_epoch
