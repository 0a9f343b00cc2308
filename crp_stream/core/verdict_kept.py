"""When a claim's new partition views provably keep its verdict's effect (the arbiter's fast path).

Most records of a claim leave its verdict's fingerprint (``drift.verdict_fingerprint``) as it was, and the
arbiter emits nothing for them. ``verdict_kept`` proves that from the views alone, without evaluating
the claim again, for the common cases: a partition of lower trust than the high-trust one that keeps
agreeing with it, or that keeps asserting the one divergent value on the same side of the high-trust
epoch (for DRIFT_UNDETERMINED) or not moving back to its side (for STALE_HIGH_TRUST). Anything else
(the high-trust partition changed, a value changed sides, several divergent values, a poisoning
candidate, whose fingerprint covers fact ids) is False: the caller evaluates the claim in full.

>>> from crp_stream.core.drift import partition_views, claim_verdict
>>> recs = [ClaimRecord("v", "vendor", 0.9, 1.0, "1000", "active"),
...         ClaimRecord("t1", "telemetry", 0.4, 2.0, "250", "active")]
>>> before = partition_views(recs)
>>> verdict = claim_verdict(before, claim="k")
>>> after = partition_views([*recs, ClaimRecord("t2", "telemetry", 0.4, 3.0, "250", "active")])
>>> verdict.kind, verdict_kept(verdict, before, after)
('DRIFT_UNDETERMINED', True)
"""

from __future__ import annotations

from collections.abc import Sequence

from crp_stream.core.drift import (
    CONSENSUS_OK,
    DRIFT_UNDETERMINED,
    STALE_HIGH_TRUST,
    ClaimRecord,
    PartitionView,
    Verdict,
)

__all__ = ["ClaimRecord", "verdict_kept"]


def verdict_kept(verdict: Verdict, before: Sequence[PartitionView], after: Sequence[PartitionView]) -> bool:
    """Drift seed, Decision Boundary rules 2-4 (as ``processors.arbiter.choose_verdict`` applies them,
    with the stale preference): True only when ``verdict``, the verdict of the
    views ``before`` (for any claim key and history), has the same kind, high-trust partition (source,
    value, newest epoch), divergent value and no other divergent value as the verdict of the views
    ``after`` (the same key, any history): so the same ``verdict_fingerprint``.

    Why it holds: the high-trust partition is unchanged and every changed partition has a lower trust,
    so it stays the reference (``high_trust_partition``); a changed partition that agreed still agrees,
    one that diverged still asserts the same single divergent value, so the divergent groups hold the
    same sources; DRIFT_UNDETERMINED counts exactly one partition later than the high-trust epoch and
    each changed one stays on its side; STALE_HIGH_TRUST needs two or more, and none leaves the later
    side. Neither kind is one the stale preference (several divergent values) changes, and neither
    fingerprint covers anything else of the views."""
    kind = verdict.kind
    if verdict.other_divergent_values or (
        kind != STALE_HIGH_TRUST and kind != DRIFT_UNDETERMINED and kind != CONSENSUS_OK
    ):
        return False
    high_source = verdict.high_trust_source
    if len(before) == len(after):  # the same sources, as a rule (views are one per source, sorted)
        prev: str | None = None
        for x, y in zip(before, after, strict=True):
            if (prev is not None and x.source <= prev) or (x is not y and x.source != y.source):
                break
            prev = x.source
        else:
            return _pairs_kept(verdict, before, after)
    old = {v.source: v for v in before}
    high = old.get(high_source)
    if high is None or high.value != verdict.high_trust_value or high.newest_epoch != verdict.high_trust_epoch:
        return False
    high_trust, high_value, ht_epoch = high.trust, high.value, verdict.high_trust_epoch
    for a in after:
        b = old.pop(a.source, None)
        if b is a or b == a:  # unchanged (the arbiter's incremental views keep the object)
            continue
        if a.source == high_source or not a.trust < high_trust:
            return False
        if a.value == high_value:  # agrees: it must have agreed (or been absent) before
            if b is not None and b.value != high_value:
                return False
        elif b is None or b.value != a.value or kind == CONSENSUS_OK:  # a divergent value must stay one
            return False
        elif kind == DRIFT_UNDETERMINED:
            if (a.latest_epoch > ht_epoch) != (b.latest_epoch > ht_epoch):
                return False
        elif b.latest_epoch > ht_epoch and not a.latest_epoch > ht_epoch:  # STALE_HIGH_TRUST
            return False
    return not old  # a partition that stopped speaking: evaluated in full


def _pairs_kept(verdict: Verdict, before: Sequence[PartitionView], after: Sequence[PartitionView]) -> bool:
    """``verdict_kept`` for views of the same sources in the same order, compared pair by pair."""
    high_source, high_value, ht_epoch = verdict.high_trust_source, verdict.high_trust_value, verdict.high_trust_epoch
    high = next((b for b in before if b.source == high_source), None)
    if high is None or high.value != high_value or high.newest_epoch != ht_epoch:
        return False
    high_trust, kind = high.trust, verdict.kind
    for b, a in zip(before, after, strict=True):
        if b is a or b == a:
            continue
        if a.source == high_source or not a.trust < high_trust:
            return False
        if a.value == high_value:
            if b.value != high_value:
                return False
        elif b.value != a.value or kind == CONSENSUS_OK:
            return False
        elif kind == DRIFT_UNDETERMINED:
            if (a.latest_epoch > ht_epoch) != (b.latest_epoch > ht_epoch):
                return False
        elif b.latest_epoch > ht_epoch and not a.latest_epoch > ht_epoch:  # STALE_HIGH_TRUST
            return False
    return True
