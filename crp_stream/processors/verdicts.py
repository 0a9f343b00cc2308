"""The arbiter's verdict of a claim, its fingerprint and its audit details (seed 002)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crp_stream.core import memo as text_memos
from crp_stream.core.claim_values import claim_key
from crp_stream.core.drift import (
    STALE_HIGH_TRUST,
    ClaimRecord,
    PartitionView,
    Verdict,
    claim_verdict,
    lagging_behind_refresh,
    verdict_fingerprint,
)
from crp_stream.processors.base import us_to_dt
from crp_stream.processors.effects import (
    short,
)


@text_memos.text_memo(0.2)
def _claim_key(subject: str, attribute: str) -> str:
    """``claim_key``, memoised: a claim's facts repeat its subject and attribute."""
    return claim_key(subject, attribute)


def choose_verdict(
    views: Sequence[PartitionView], claim: str, history: Sequence[ClaimRecord] = (), explain: bool = True
) -> Verdict:
    """``claim_verdict``, except that when any divergent value qualifies as STALE_HIGH_TRUST that
    verdict is preferred: a stale high-trust value must never be served because another divergent
    value happens to be asserted by more partitions. ``history`` (every record of the claim) lets the
    lagging rule tell a reviewer that a poisoning candidate's value is the high-trust source's own
    earlier one (the candidate is filed all the same). ``explain=False``: the same verdict with an
    empty reason."""
    base = lagging_behind_refresh(claim_verdict(views, claim=claim, explain=explain), history, explain)
    if base.kind == STALE_HIGH_TRUST or not base.other_divergent_values:
        return base
    for value in base.other_divergent_values:
        subset = [v for v in views if v.value in (base.high_trust_value, value)]
        verdict = claim_verdict(subset, claim=claim, explain=explain)
        if verdict.kind == STALE_HIGH_TRUST:
            others = tuple(
                x for x in (base.divergent_value, *base.other_divergent_values) if x is not None and x != value
            )
            return verdict._replace(other_divergent_values=others)
    return base


# the claim index's memo entry for the claim's last fingerprint: not a fact id (those never hold a NUL)
_FINGERPRINT = "\x00fingerprint"
# its entry for the views last evaluated, a verdict of theirs and its fingerprint (the memo is the
# claim's: ``verdict_kept`` depends on the views alone, so a rolled-back transaction's entry holds too)
_KEPT = "\x00kept"


def _fingerprint(verdict: Verdict, memo: dict[str, Any]) -> str:
    """``verdict_fingerprint``, kept in the claim's memo with the verdict it was taken of: a verdict
    equal in what the fingerprint covers is not hashed again (the claim is the memo's)."""
    held = memo.get(_FINGERPRINT)
    if held is not None:
        last, fingerprint = held
        epoch = verdict.high_trust_epoch
        if (
            last.high_trust_epoch == epoch
            and epoch != 0  # 0.0 and -0.0 are equal, their reprs (which the fingerprint covers) are not
            and last.kind == verdict.kind
            and last.claim == verdict.claim
            and last.high_trust_source == verdict.high_trust_source
            and last.high_trust_value == verdict.high_trust_value
            and last.divergent_value == verdict.divergent_value
            and last.stale_fact_ids == verdict.stale_fact_ids
            and last.suspect_fact_ids == verdict.suspect_fact_ids
        ):
            return str(fingerprint)
    fingerprint = verdict_fingerprint(verdict)
    memo[_FINGERPRINT] = (verdict, fingerprint)
    return fingerprint


@text_memos.text_memo(0.1)
def _iso(epoch: float | None) -> str | None:
    """An epoch (s) as the details' text, memoised: a claim's verdicts repeat its partitions' epochs."""
    return None if epoch is None else us_to_dt(round(epoch * 1e6)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def verdict_details(verdict: Verdict, views: Sequence[PartitionView]) -> dict[str, Any]:
    return {
        "claim": verdict.claim,
        "verdict": verdict.kind,
        "reason": short(verdict.reason),
        "high_trust_source": verdict.high_trust_source,
        "high_trust_value": verdict.high_trust_value,
        "high_trust_epoch": _iso(verdict.high_trust_epoch),
        "divergent_value": verdict.divergent_value,
        "divergent_sources": list(verdict.divergent_sources),
        "divergent_epoch": _iso(verdict.divergent_epoch),
        "corroborating_partitions": verdict.corroborating_partitions,
        "other_divergent_values": list(verdict.other_divergent_values),
        "partitions": [
            {
                "source": v.source,
                "trust": v.trust,
                "value": v.value,
                "support": v.support,
                "total": v.total,
                "latest_epoch": _iso(v.latest_epoch),
            }
            for v in views
        ],
    }
