"""``core.verdict_kept``: the arbiter's fast path agrees with the full evaluation on any claim history."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream.core.agreement import PartitionState
from crp_stream.core.drift import ClaimRecord, Verdict, partition_views, verdict_fingerprint
from crp_stream.core.verdict_kept import verdict_kept
from crp_stream.processors.arbiter import choose_verdict


def _same_effect(kept: Verdict, full: Verdict) -> None:
    assert verdict_fingerprint(kept) == verdict_fingerprint(full)
    # what the fast path's later checks read of the verdict it keeps
    assert (kept.kind, kept.high_trust_source, kept.high_trust_value, kept.high_trust_epoch) == (
        full.kind,
        full.high_trust_source,
        full.high_trust_value,
        full.high_trust_epoch,
    )
    assert kept.divergent_value == full.divergent_value
    assert kept.other_divergent_values == full.other_divergent_values == ()


steps = st.lists(
    st.one_of(
        st.tuples(  # a new record
            st.just("add"),
            st.sampled_from(["vendor_docs", "field_telemetry", "community_notes", "mirror"]),
            st.sampled_from([0.9, 0.4, 0.4, 0.2, 0.9]),
            st.integers(0, 40),
            st.sampled_from(["1000", "250", "250", "300", ""]),
            st.sampled_from(["active", "active", "active", "stale", "quarantined"]),
        ),
        st.tuples(  # a status change of an earlier record (the arbiter's own, an operator's)
            st.just("status"),
            st.integers(0, 60),
            st.sampled_from(["active", "stale", "quarantined", "superseded"]),
        ),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=1500, deadline=None)
@given(steps=steps, trust_per_source=st.booleans(), claim=st.sampled_from(["k", "sim:x"]))
def test_the_fast_path_and_the_full_evaluation_agree_on_any_history(
    steps: list[tuple[object, ...]], trust_per_source: bool, claim: str
) -> None:
    """As the arbiter uses it: the kept verdict stands for the views it was proved for, and the next
    record is proved against those; every step its fingerprint equals the full evaluation's."""
    records: list[ClaimRecord] = []
    trust: dict[str, float] = {}
    cached: tuple[tuple[object, ...], Verdict] | None = None
    for i, step in enumerate(steps):
        if step[0] == "add":
            _, source, t, epoch, value, status = step
            if trust_per_source:
                t = trust.setdefault(str(source), float(t))  # type: ignore[arg-type]
            records.append(ClaimRecord(f"f{i:02d}", str(source), float(t), float(epoch), str(value), str(status)))  # type: ignore[arg-type]
        elif records:
            _, at, status = step
            j = int(at) % len(records)  # type: ignore[call-overload]
            records[j] = records[j]._replace(status=str(status))
        views = partition_views(records)
        if not views:
            cached = None
            continue
        full = choose_verdict(views, claim, records, explain=False)
        if cached is not None and verdict_kept(cached[1], cached[0], views):  # type: ignore[arg-type]
            _same_effect(cached[1], full)
            cached = (views, cached[1])
        else:
            cached = (views, full)


@settings(max_examples=300, deadline=None)
@given(steps=steps)
def test_the_fast_path_over_incremental_views(steps: list[tuple[object, ...]]) -> None:
    """The same over ``PartitionState`` (the arbiter's views: an unchanged partition's view is the same
    object, which the fast path skips), records added only (a status change starts the state over)."""
    state = PartitionState()
    records: list[ClaimRecord] = []
    cached: tuple[tuple[object, ...], Verdict] | None = None
    for i, step in enumerate(steps):
        if step[0] != "add":
            continue
        _, source, t, _epoch, value, status = step
        rec = ClaimRecord(f"f{i:02d}", str(source), float(t), float(i), str(value), str(status))  # type: ignore[arg-type]
        records.append(rec)
        state.add(rec)
        views = state.views()
        assert views == partition_views(records)
        if not views:
            continue
        full = choose_verdict(views, "k", records, explain=False)
        if cached is not None and verdict_kept(cached[1], cached[0], views):  # type: ignore[arg-type]
            _same_effect(cached[1], full)
            cached = (views, cached[1])
        else:
            cached = (views, full)


def test_the_fast_path_takes_most_records_of_a_drifting_claim() -> None:
    """Not vacuous: on the throughput benchmark's claims (a vendor record, then telemetry and community
    notes drifting to another value) most records are proved, and the ones that move the verdict are not."""
    rng = random.Random(4)
    hits = changes = total = 0
    for _claim in range(20):
        state = PartitionState()
        records: list[ClaimRecord] = []
        cached: tuple[tuple[object, ...], Verdict] | None = None
        for k in range(50):
            source = "vendor_docs" if k == 0 else ("community_notes" if k % 10 == 5 else "field_telemetry")
            trust = {"vendor_docs": 0.9, "field_telemetry": 0.4, "community_notes": 0.2}[source]
            value = "1000" if k < 16 or source == "vendor_docs" else rng.choice(["250", "250", "250", "1000"])
            rec = ClaimRecord(f"f{k:02d}", source, trust, float(k), value, "active")
            records.append(rec)
            state.add(rec)
            views = state.views()
            full = choose_verdict(views, "k", records, explain=False)
            total += 1
            if cached is not None and verdict_kept(cached[1], cached[0], views):  # type: ignore[arg-type]
                _same_effect(cached[1], full)
                hits += 1
                cached = (views, cached[1])
            else:
                if cached is not None and verdict_fingerprint(cached[1]) != verdict_fingerprint(full):
                    changes += 1
                cached = (views, full)
    assert changes > 0
    assert hits > 0.8 * total


def test_what_the_fast_path_leaves_to_the_full_evaluation() -> None:
    vendor = ClaimRecord("v", "vendor", 0.9, 10.0, "1000", "active")
    early = ClaimRecord("t1", "telemetry", 0.4, 5.0, "250", "active")
    before = partition_views([vendor, early])
    poisoning = choose_verdict(before, "k", [vendor, early], explain=False)
    assert poisoning.kind == "POISONING_CANDIDATE"  # its suspects grow with each record: never kept
    assert not verdict_kept(poisoning, before, partition_views([vendor, early, early._replace(fact_id="t0")]))
    later = ClaimRecord("t2", "telemetry", 0.4, 20.0, "250", "active")
    drift = partition_views([vendor, later])
    verdict = choose_verdict(drift, "k", [vendor, later], explain=False)
    assert verdict.kind == "DRIFT_UNDETERMINED"
    # a second later partition: STALE_HIGH_TRUST, not kept
    second = partition_views([vendor, later, ClaimRecord("c", "community", 0.2, 21.0, "250", "active")])
    assert not verdict_kept(verdict, drift, second)
    # a partition of the high-trust source's trust, or the high-trust partition itself, changed: not kept
    peer = partition_views([vendor, later, ClaimRecord("m", "mirror", 0.9, 1.0, "1000", "active")])
    assert not verdict_kept(verdict, drift, peer)
    assert not verdict_kept(verdict, drift, partition_views([vendor, later, vendor._replace(fact_id="v2")]))
    # a partition that stopped speaking
    assert not verdict_kept(verdict, drift, partition_views([vendor, later._replace(status="quarantined")]))
    # the same views: kept
    assert verdict_kept(verdict, drift, partition_views([vendor, later]))


def test_a_partition_moving_back_before_the_high_trust_epoch_is_evaluated_in_full() -> None:
    """STALE_HIGH_TRUST with two later partitions; one's later record is quarantined, so it asserts the
    same value but no longer later: DRIFT_UNDETERMINED, which the fast path must not keep."""
    recs = [
        ClaimRecord("v", "vendor", 0.9, 10.0, "1000", "active"),
        ClaimRecord("t1", "telemetry", 0.4, 5.0, "250", "active"),
        ClaimRecord("t2", "telemetry", 0.4, 20.0, "250", "active"),
        ClaimRecord("c", "community", 0.2, 21.0, "250", "active"),
    ]
    before = partition_views(recs)
    stale = choose_verdict(before, "k", recs, explain=False)
    assert stale.kind == "STALE_HIGH_TRUST"
    recs[2] = recs[2]._replace(status="quarantined")
    after = partition_views(recs)
    assert choose_verdict(after, "k", recs, explain=False).kind == "DRIFT_UNDETERMINED"
    assert not verdict_kept(stale, before, after)


def test_a_lagging_candidate_is_filed_and_evaluated_in_full() -> None:
    """The lagging rule settles nothing: the candidate stays a POISONING_CANDIDATE (never kept), and
    its reason, built when it acts, says the value is the high-trust source's own earlier one."""
    recs = [
        ClaimRecord("v-old", "vendor", 0.9, 10.0, "", "active"),
        ClaimRecord("c", "community", 0.2, 20.0, "", "active"),
        ClaimRecord("v-new", "vendor", 0.9, 30.0, "250", "active"),
    ]
    views = partition_views(recs)
    lagging = choose_verdict(views, "k", recs, explain=False)
    assert lagging.kind == "POISONING_CANDIDATE" and lagging.suspect_fact_ids == ("c",)
    assert not verdict_kept(lagging, views, views)
    explained = choose_verdict(views, "k", recs)
    assert "vendor itself asserted ''" in explained.reason and "release the candidate" in explained.reason
