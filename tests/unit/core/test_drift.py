"""Unit tests for crp_stream.core.drift (seed 002: drift vs. poisoning, freshness dominance)."""

from __future__ import annotations

import doctest
import random

import pytest

from crp_stream.core import drift
from crp_stream.core.claim_values import claim_key, normalise_value
from crp_stream.core.drift import (
    ClaimRecord,
    PartitionView,
    arbitrate_divergence,
    claim_verdict,
    corroborating_partitions,
    counted_records,
    freshness_dominance_holds,
    high_trust_partition,
    partition_agreement,
    partition_views,
    quarantine_eligible,
    refresh_resolved,
    verdict_fingerprint,
)

DAY = 86_400.0
NOW = 1_794_528_000.0  # 2026-11-13T00:00:00Z, the seed's date of record
CLAIM = claim_key("Upstream API", "rate limit")
OLD = normalise_value("1000 rps")
NEW = normalise_value("250 rps")


def rec(fact_id: str, source: str, trust: float, epoch: float, value: str, status: str = "active") -> ClaimRecord:
    return ClaimRecord(fact_id, source, trust, epoch, value, status)


def incident_records() -> list[ClaimRecord]:
    """The seed's incident: vendor months old, 47/50 telemetry two weeks ago, community agrees."""
    recs = [rec("vendor-1", "vendor_docs", 0.9, NOW - 120 * DAY, OLD)]
    recs += [rec(f"tel-new-{i:02d}", "field_telemetry", 0.4, NOW - 14 * DAY + 60 * i, NEW) for i in range(47)]
    recs += [rec(f"tel-old-{i}", "field_telemetry", 0.4, NOW - 30 * DAY + 60 * i, OLD) for i in range(3)]
    recs.append(rec("community-1", "community_notes", 0.2, NOW - 10 * DAY, NEW))
    return recs


# --- the seed's incident -------------------------------------------------------------------------


def test_seed_incident_is_stale_high_trust_not_poisoning() -> None:
    v = claim_verdict(partition_views(incident_records()), claim=CLAIM)
    assert v.kind == "STALE_HIGH_TRUST"
    assert v.high_trust_source == "vendor_docs"
    assert v.high_trust_value == "1000 rps"
    assert v.high_trust_epoch == NOW - 120 * DAY
    assert v.divergent_value == "250 rps"
    assert v.divergent_sources == ("community_notes", "field_telemetry")
    assert v.divergent_epoch == NOW - 10 * DAY
    assert v.corroborating_partitions == 1
    assert v.stale_fact_ids == ("vendor-1",)
    assert v.suspect_fact_ids == ()
    assert not quarantine_eligible(v)
    # Evidence: the 47 telemetry records and the community note, never the 3 old telemetry records.
    assert len(v.evidence_fact_ids) == 48
    assert "community-1" in v.evidence_fact_ids
    assert not any(f.startswith("tel-old") for f in v.evidence_fact_ids)
    assert "stale" in v.reason and "vendor_docs" in v.reason


def test_partition_majority_is_47_of_50() -> None:
    tel = [r for r in incident_records() if r.source == "field_telemetry"]
    view = partition_agreement(tel)
    assert view.source == "field_telemetry"
    assert view.trust == 0.4
    assert view.value == "250 rps"
    assert (view.support, view.total) == (47, 50)
    assert view.share == pytest.approx(0.94)
    assert view.latest_epoch == NOW - 14 * DAY + 60 * 46
    assert view.newest_epoch == view.latest_epoch
    assert len(view.fact_ids) == 47 and list(view.fact_ids) == sorted(view.fact_ids)


def test_seed_detector_pre_fix_would_have_called_it_poisoning_by_trust_alone() -> None:
    # Same values with the epochs reversed: now the vendor is fresher and the low-trust side is suspect.
    recs = [
        rec("vendor-1", "vendor_docs", 0.9, NOW, OLD),
        rec("tel-1", "field_telemetry", 0.4, NOW - 14 * DAY, NEW),
        rec("community-1", "community_notes", 0.2, NOW - 10 * DAY, NEW),
    ]
    v = claim_verdict(partition_views(recs), claim=CLAIM)
    assert v.kind == "POISONING_CANDIDATE"
    assert v.corroborating_partitions == 0


# --- poisoning -----------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [-5 * DAY, -1.0, 0.0], ids=["older", "just-older", "same-epoch"])
def test_low_trust_not_fresher_is_poisoning_candidate(offset: float) -> None:
    trusted_epoch = NOW - 3 * DAY
    recs = [
        rec("trusted-1", "vendor_docs", 0.9, trusted_epoch, "paris"),
        rec("poison-1", "community_notes", 0.2, trusted_epoch + offset, "berlin"),
        rec("poison-2", "community_notes", 0.2, trusted_epoch + offset - 10, "berlin"),
    ]
    v = claim_verdict(partition_views(recs), claim=claim_key("france", "capital"))
    assert v.kind == "POISONING_CANDIDATE"
    assert v.high_trust_value == "paris"
    assert v.divergent_value == "berlin"
    assert v.suspect_fact_ids == ("poison-1", "poison-2")
    assert v.stale_fact_ids == ()
    assert quarantine_eligible(v)
    assert "review" in v.reason


def test_older_corroboration_does_not_rule_out_poisoning() -> None:
    # Two low-trust partitions agree, but neither is later than the trusted record (rule 3: "later epoch").
    recs = [
        rec("trusted-1", "vendor_docs", 0.9, NOW, "paris"),
        rec("p-1", "community_notes", 0.2, NOW - DAY, "berlin"),
        rec("p-2", "forum", 0.1, NOW - 2 * DAY, "berlin"),
    ]
    v = claim_verdict(partition_views(recs), claim=CLAIM)
    assert v.kind == "POISONING_CANDIDATE"
    assert v.corroborating_partitions == 0
    assert v.suspect_fact_ids == ("p-1", "p-2")


def test_high_trust_epoch_is_its_newest_record_not_its_majority() -> None:
    # Vendor majority "1000 rps" is old, but its newest record for the claim (a minority) is the freshest.
    recs = [
        rec("v-1", "vendor_docs", 0.9, NOW - 100 * DAY, OLD),
        rec("v-2", "vendor_docs", 0.9, NOW - 90 * DAY, OLD),
        rec("v-3", "vendor_docs", 0.9, NOW, "999 rps"),
        rec("t-1", "field_telemetry", 0.4, NOW - DAY, NEW),
        rec("c-1", "community_notes", 0.2, NOW - DAY, NEW),
    ]
    v = claim_verdict(partition_views(recs), claim=CLAIM)
    assert v.high_trust_value == OLD
    assert v.high_trust_epoch == NOW
    assert v.kind == "POISONING_CANDIDATE"


# --- no corroboration ----------------------------------------------------------------------------


def test_single_later_partition_is_drift_undetermined() -> None:
    recs = [
        rec("vendor-1", "vendor_docs", 0.9, NOW - 120 * DAY, OLD),
        *[rec(f"tel-{i}", "field_telemetry", 0.4, NOW - 14 * DAY + i, NEW) for i in range(47)],
    ]
    v = claim_verdict(partition_views(recs), claim=CLAIM)
    assert v.kind == "DRIFT_UNDETERMINED"
    assert v.corroborating_partitions == 0
    assert v.stale_fact_ids == () and v.suspect_fact_ids == ()
    assert len(v.evidence_fact_ids) == 47
    assert not quarantine_eligible(v)
    assert "uncorroborated" in v.reason and "epoch-spoofed" in v.reason and "refuses to act" in v.reason


def test_later_partition_plus_older_partition_is_still_undetermined() -> None:
    recs = [
        rec("vendor-1", "vendor_docs", 0.9, NOW - 20 * DAY, OLD),
        rec("tel-1", "field_telemetry", 0.4, NOW - DAY, NEW),
        rec("c-1", "community_notes", 0.2, NOW - 30 * DAY, NEW),
    ]
    v = claim_verdict(partition_views(recs), claim=CLAIM)
    assert v.kind == "DRIFT_UNDETERMINED"
    assert v.divergent_sources == ("community_notes", "field_telemetry")


# --- consensus and refresh resolution ------------------------------------------------------------


def test_consensus_ok() -> None:
    recs = [
        rec("v-1", "vendor_docs", 0.9, NOW - 120 * DAY, NEW),
        rec("t-1", "field_telemetry", 0.4, NOW - DAY, normalise_value("250 req/s")),
        rec("c-1", "community_notes", 0.2, NOW, normalise_value("250", "rps")),
    ]
    v = claim_verdict(partition_views(recs), claim=CLAIM)
    assert v.kind == "CONSENSUS_OK"
    assert v.divergent_value is None and v.divergent_sources == ()
    assert v.evidence_fact_ids == () and v.stale_fact_ids == () and v.suspect_fact_ids == ()
    single = claim_verdict(partition_views(recs[:1]), claim=CLAIM)
    assert single.kind == "CONSENSUS_OK"


def test_vendor_republishes_new_value_resolves_refresh() -> None:
    recs = incident_records()
    before = claim_verdict(partition_views(recs), claim=CLAIM)
    assert before.kind == "STALE_HIGH_TRUST"
    # The processor marks the stale facts stale; the verdict must not change (and not vanish).
    recs = [
        rec(r.fact_id, r.source, r.trust, r.epoch, r.value, "stale") if r.fact_id in before.stale_fact_ids else r
        for r in recs
    ]
    marked = claim_verdict(partition_views(recs), claim=CLAIM)
    assert marked.kind == "STALE_HIGH_TRUST"
    assert verdict_fingerprint(marked) == verdict_fingerprint(before)
    vendor_before = next(p for p in partition_views(recs) if p.source == "vendor_docs")
    assert not refresh_resolved(vendor_before, NEW, since_epoch=before.high_trust_epoch)
    # The vendor publishes 250 rps.
    recs.append(rec("vendor-2", "vendor_docs", 0.9, NOW, normalise_value("250 requests per second")))
    after = claim_verdict(partition_views(recs), claim=CLAIM)
    assert after.kind == "CONSENSUS_OK"
    vendor_after = next(p for p in partition_views(recs) if p.source == "vendor_docs")
    assert vendor_after.fact_ids == ("vendor-2",)
    assert refresh_resolved(vendor_after, NEW, since_epoch=before.high_trust_epoch)
    assert refresh_resolved(vendor_after, before.divergent_value or "")


def test_refresh_resolves_even_when_stale_records_outnumber_the_new_one() -> None:
    stale = [rec(f"v-{i}", "vendor_docs", 0.9, NOW - (100 + i) * DAY, OLD, "stale") for i in range(3)]
    fresh = rec("v-new", "vendor_docs", 0.9, NOW, NEW)
    view = partition_agreement([*stale, fresh])
    assert view.value == NEW and (view.support, view.total) == (1, 1)
    assert refresh_resolved(view, NEW, since_epoch=NOW - 100 * DAY)
    # While the source has not refreshed, its stale records still speak.
    assert partition_agreement(stale).value == OLD


def test_refresh_not_resolved_by_an_old_record_or_another_value() -> None:
    view = PartitionView("vendor_docs", 0.9, NEW, 1.0, 1, 1, NOW - 200 * DAY, NOW - 200 * DAY, ("v-0",))
    assert not refresh_resolved(view, NEW, since_epoch=NOW - 120 * DAY)
    assert not refresh_resolved(view, "300 rps")
    assert refresh_resolved(view, NEW)


# --- arbitrate_divergence (the seed's function) --------------------------------------------------


def test_arbitrate_divergence_matches_the_seed_without_raising() -> None:
    assert arbitrate_divergence(100.0, [], 0) == "CONSENSUS_OK"
    assert arbitrate_divergence(100.0, [90.0, 101.0], 1) == "STALE_HIGH_TRUST"
    assert arbitrate_divergence(100.0, [101.0], 0) == "DRIFT_UNDETERMINED"
    assert arbitrate_divergence(100.0, [100.0], 0) == "POISONING_CANDIDATE"
    assert arbitrate_divergence(100.0, [50.0, 99.0], 3) == "POISONING_CANDIDATE"


def test_corroboration_counts_later_partitions_minus_one() -> None:
    assert corroborating_partitions(100.0, []) == 0
    assert corroborating_partitions(100.0, [101.0]) == 0
    assert corroborating_partitions(100.0, [101.0, 100.0]) == 0
    assert corroborating_partitions(100.0, [101.0, 102.0]) == 1
    assert corroborating_partitions(100.0, [101.0, 102.0, 150.0, 10.0]) == 2
    assert freshness_dominance_holds(100.0, [100.0, 50.0])
    assert not freshness_dominance_holds(100.0, [100.5])


# --- selection rules -----------------------------------------------------------------------------


def test_quarantined_records_do_not_count() -> None:
    recs = [
        rec("t-1", "field_telemetry", 0.4, NOW, NEW),
        rec("t-2", "field_telemetry", 0.4, NOW, OLD, "quarantined"),
        rec("t-3", "field_telemetry", 0.4, NOW, OLD, "quarantined"),
        rec("t-4", "field_telemetry", 0.4, NOW, OLD, "expired"),
    ]
    view = partition_agreement(recs)
    assert view.value == NEW and view.total == 1
    assert [r.fact_id for r in counted_records(recs)] == ["t-1"]
    only_quarantined = [rec("q-1", "community_notes", 0.2, NOW, "x", "quarantined")]
    assert partition_views(only_quarantined) == ()
    with pytest.raises(ValueError):
        partition_agreement(only_quarantined)


def test_partition_tie_breaks_by_latest_epoch_then_value() -> None:
    tie_epoch = [rec("a", "s", 0.5, 10.0, "x"), rec("b", "s", 0.5, 20.0, "y")]
    assert partition_agreement(tie_epoch).value == "y"
    tie_all = [rec("a", "s", 0.5, 10.0, "y"), rec("b", "s", 0.5, 10.0, "x")]
    assert partition_agreement(tie_all).value == "x"
    with pytest.raises(ValueError):
        partition_agreement([rec("a", "s", 0.5, 1.0, "x"), rec("b", "t", 0.5, 1.0, "x")])


def test_high_trust_tie_breaks_by_newest_epoch_then_source() -> None:
    a = PartitionView("b_src", 0.9, "x", 1.0, 1, 1, 5.0, 5.0, ("1",))
    b = PartitionView("a_src", 0.9, "y", 1.0, 1, 1, 9.0, 9.0, ("2",))
    c = PartitionView("c_src", 0.9, "z", 1.0, 1, 1, 9.0, 9.0, ("3",))
    assert high_trust_partition([a, b, c]).source == "a_src"
    assert high_trust_partition([a, c]).source == "c_src"
    low = PartitionView("low", 0.1, "q", 1.0, 1, 1, 99.0, 99.0, ())
    assert high_trust_partition([a, low]).source == "b_src"


def test_several_divergent_values_pick_most_partitions() -> None:
    recs = [
        rec("v", "vendor_docs", 0.9, 100.0, OLD),
        rec("t", "field_telemetry", 0.4, 200.0, NEW),
        rec("c", "community_notes", 0.2, 210.0, NEW),
        rec("f", "forum", 0.1, 300.0, "300 rps"),
    ]
    v = claim_verdict(partition_views(recs), claim=CLAIM)
    assert v.divergent_value == NEW
    assert v.other_divergent_values == ("300 rps",)
    assert v.kind == "STALE_HIGH_TRUST"
    assert "f" not in v.evidence_fact_ids


def test_claim_verdict_rejects_empty_and_repeated_sources() -> None:
    p = PartitionView("s", 0.5, "x", 1.0, 1, 1, 1.0, 1.0, ("1",))
    with pytest.raises(ValueError):
        claim_verdict([], claim=CLAIM)
    with pytest.raises(ValueError):
        claim_verdict([p, p], claim=CLAIM)


# --- determinism and idempotency -----------------------------------------------------------------


def test_verdict_and_fingerprint_are_deterministic_and_order_independent() -> None:
    recs = incident_records()
    first = claim_verdict(partition_views(recs), claim=CLAIM)
    shuffled = list(recs)
    random.Random(7).shuffle(shuffled)
    views = list(partition_views(shuffled))
    views.reverse()
    second = claim_verdict(views, claim=CLAIM)
    assert second == first
    fp = verdict_fingerprint(first)
    assert fp == verdict_fingerprint(second)
    assert len(fp) == 32 and int(fp, 16) >= 0


def test_fingerprint_ignores_accumulating_evidence_but_tracks_the_effect() -> None:
    recs = incident_records()
    base = claim_verdict(partition_views(recs), claim=CLAIM)
    more = claim_verdict(partition_views([*recs, rec("forum-1", "forum", 0.1, NOW - DAY, NEW)]), claim=CLAIM)
    assert more.corroborating_partitions == 2 and more.evidence_fact_ids != base.evidence_fact_ids
    assert verdict_fingerprint(more) == verdict_fingerprint(base)
    other_claim = claim_verdict(partition_views(recs), claim=claim_key("upstream api", "burst"))
    assert verdict_fingerprint(other_claim) != verdict_fingerprint(base)
    second_vendor = [*recs, rec("vendor-0", "vendor_docs", 0.9, NOW - 150 * DAY, OLD)]
    changed = claim_verdict(partition_views(second_vendor), claim=CLAIM)
    assert changed.kind == "STALE_HIGH_TRUST" and changed.stale_fact_ids == ("vendor-0", "vendor-1")
    assert verdict_fingerprint(changed) != verdict_fingerprint(base)
    kinds = {
        verdict_fingerprint(claim_verdict(partition_views(r), claim=CLAIM))
        for r in (
            recs,
            [rec("v", "vendor_docs", 0.9, NOW, OLD), rec("t", "field_telemetry", 0.4, NOW - DAY, NEW)],
            [rec("v", "vendor_docs", 0.9, NOW - DAY, OLD), rec("t", "field_telemetry", 0.4, NOW, NEW)],
        )
    }
    assert len(kinds) == 3


def test_fingerprint_changes_with_new_suspects() -> None:
    base = [
        rec("v", "vendor_docs", 0.9, NOW, "paris"),
        rec("p-1", "community_notes", 0.2, NOW - DAY, "berlin"),
    ]
    one = claim_verdict(partition_views(base), claim=CLAIM)
    two = claim_verdict(partition_views([*base, rec("p-2", "community_notes", 0.2, NOW - DAY, "berlin")]), claim=CLAIM)
    assert one.kind == two.kind == "POISONING_CANDIDATE"
    assert verdict_fingerprint(one) != verdict_fingerprint(two)


# --- claims and values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "unit"),
    [
        ("250 rps", None),
        ("250 req/s", None),
        ("250", "rps"),
        ("250 requests per second", None),
        ("250.0 RPS", None),
        ("  250   req / s. ", None),
        ("250", "req/sec"),
        ("250 rps", "rpm"),
    ],
)
def test_normalise_value_equal_forms(value: str, unit: str | None) -> None:
    assert normalise_value(value, unit) == "250 rps"


def test_normalise_value_numbers_and_text() -> None:
    assert normalise_value("1,000 rps") == normalise_value("1000.0 rps") == "1000 rps"
    assert normalise_value("1k rps") == normalise_value("1 k req/s") == "1000 rps"
    assert normalise_value("250 rpm") != normalise_value("250 rps")
    assert normalise_value("250") == "250"
    assert normalise_value("0.50 %") == normalise_value("0.5 percent") == "0.5 %"
    assert normalise_value("-3") == "-3"
    assert normalise_value("1e3") == "1000"
    assert normalise_value("1e400").startswith("1E+")
    assert normalise_value("  Enabled. ", "rps") == "enabled"
    assert normalise_value("Paris\n  France") == "paris france"
    assert normalise_value("25 ms") != normalise_value("25 s")


def test_claim_key_normalises_and_never_collides() -> None:
    assert claim_key("  Upstream   API ", "Rate\tLimit") == "upstream api|rate limit"
    assert claim_key("a|b", "c") != claim_key("a", "b|c")
    assert claim_key("a%7Cb", "c") != claim_key("a|b", "c")


def test_module_docstring_example_runs() -> None:
    result = doctest.testmod(drift, verbose=False)
    assert result.attempted >= 9
    assert result.failed == 0


def test_the_partition_and_epoch_rules_match_their_plain_forms_on_random_inputs() -> None:
    """``high_trust_partition``, ``freshness_dominance_holds`` and ``corroborating_partitions`` are
    written as loops (the arbiter calls them on every record): the same answers as ``min`` with the
    rule's key, ``all`` and ``sum``, ties, equal keys and repeated sources included."""
    rng = random.Random(12)
    for _ in range(3000):
        views = [
            PartitionView(
                rng.choice(["a", "b", "c", "d"]),
                rng.choice([0.2, 0.4, 0.9, -0.0, 0.0]),
                "v",
                1.0,
                1,
                1,
                0.0,
                rng.choice([1.0, 2.0, -0.0, 0.0, 3.5]),
                (rng.choice(["x", "y"]),),
            )
            for _ in range(rng.randint(1, 5))
        ]
        expected = min(views, key=lambda p: (-p.trust, -p.newest_epoch, p.source))
        assert high_trust_partition(views) is expected
        h = rng.choice([0.0, 1.0, 2.0, 2.5])
        epochs = [rng.choice([0.0, 1.0, 2.0, 3.0, float("nan")]) for _ in range(rng.randint(0, 4))]
        assert freshness_dominance_holds(h, epochs) == all(e <= h for e in epochs)
        assert corroborating_partitions(h, epochs) == max(0, sum(1 for e in epochs if e > h) - 1)
