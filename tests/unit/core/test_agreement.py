"""Unit tests for crp_stream.core.agreement: the incremental partition views equal ``partition_views``."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream.core import agreement
from crp_stream.core.agreement import PartitionState, partition_views_after
from crp_stream.core.drift import ClaimRecord, claim_verdict, partition_views

SOURCES = ("vendor_docs", "field_telemetry", "community_notes")
TRUST = {"vendor_docs": 0.9, "field_telemetry": 0.4, "community_notes": 0.2}

# few epochs and values so ties (same epoch, same support) and stale/active interplay are common
record = st.tuples(
    st.sampled_from(SOURCES),
    st.integers(0, 6),  # epoch
    st.sampled_from(["1000 rps", "250 rps", "500 rps"]),
    st.sampled_from(["active", "active", "active", "stale", "stale", "quarantined", "superseded"]),
    st.sampled_from([0.9, 0.4, 0.2, 0.5]),
)


def _records(items: list[tuple[str, int, str, str, float]]) -> list[ClaimRecord]:
    """In (epoch, fact_id) order, as a claim's rows are stored; fact ids unique."""
    recs = [ClaimRecord(f"f{i:03d}", s, t, float(e), v, status) for i, (s, e, v, status, t) in enumerate(items)]
    return sorted(recs, key=lambda r: (r.epoch, r.fact_id))


def test_doctest() -> None:
    assert doctest.testmod(agreement).failed == 0


@settings(max_examples=400, deadline=None)
@given(st.lists(record, max_size=40), st.lists(st.integers(1, 5), max_size=10))
def test_incremental_views_equal_from_scratch_after_every_step(
    items: list[tuple[str, int, str, str, float]], steps: list[int]
) -> None:
    recs = _records(items)
    state = PartitionState()
    done = 0
    cuts = [*steps, len(recs)]  # arrive in runs of any size, one at a time included
    for step in cuts:
        run = recs[done : done + step] if step else []
        done += len(run)
        views = partition_views_after(state, run)
        assert views == partition_views(recs[:done])
        assert state.records == recs[:done]
        if views:
            assert claim_verdict(views, claim="k") == claim_verdict(partition_views(recs[:done]), claim="k")
        if done == len(recs):
            break
    for r in recs[done:]:
        assert partition_views_after(state, [r]) == partition_views(recs[: recs.index(r) + 1])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(record, max_size=40),
    st.lists(
        st.tuples(st.integers(0, 39), st.sampled_from(["active", "stale", "quarantined", "superseded"])), max_size=8
    ),
    st.integers(0, 40),
)
def test_restated_records_give_the_views_from_scratch(
    items: list[tuple[str, int, str, str, float]], changes: list[tuple[int, str]], more: int
) -> None:
    """``PartitionState.restate`` (statuses replaced, only their sources tallied again) equals a new
    state given the same records, and goes on equal as further records are added."""
    recs = _records(items)
    head, tail = recs[:more], recs[more:]
    state = PartitionState()
    partition_views_after(state, head)
    kept = {s: t for s, t in state._tallies.items()}
    new = list(head)
    for i, status in changes:
        if new:
            new[i % len(new)] = new[i % len(new)]._replace(status=status)
    state.restate(new)
    assert state.views() == partition_views(new) and state.records == new
    changed = {n.source for o, n in zip(head, new, strict=True) if o is not n}
    assert all(state._tallies[s] is kept[s] for s in kept if s not in changed)  # the others kept
    assert partition_views_after(state, tail) == partition_views(new + tail)


def test_restate_refuses_other_records() -> None:
    a, b = ClaimRecord("a", "s", 0.4, 1.0, "1", "active"), ClaimRecord("b", "s", 0.4, 2.0, "1", "active")
    state = PartitionState()
    partition_views_after(state, [a, b])
    with pytest.raises(ValueError, match="not the record added"):
        state.restate([a, a._replace(fact_id="c")])
    with pytest.raises(ValueError, match="not the records added"):
        state.restate([a])


def test_stale_records_stop_speaking_once_the_source_refreshes() -> None:
    recs = [
        ClaimRecord("v1", "vendor_docs", 0.9, 1.0, "1000 rps", "stale"),
        ClaimRecord("v2", "vendor_docs", 0.9, 2.0, "1000 rps", "stale"),
        ClaimRecord("v3", "vendor_docs", 0.9, 3.0, "250 rps", "active"),
    ]
    state = PartitionState()
    (first,) = partition_views_after(state, recs[:2])
    assert (first.value, first.total) == ("1000 rps", 2)
    (after,) = partition_views_after(state, recs[2:])
    assert (after.value, after.total, after.fact_ids) == ("250 rps", 1, ("v3",))
    assert (after,) == partition_views(recs)


def test_out_of_order_record_is_refused() -> None:
    state = PartitionState()
    partition_views_after(state, [ClaimRecord("b", "s", 0.4, 2.0, "1", "active")])
    with pytest.raises(ValueError, match="out of"):
        partition_views_after(state, [ClaimRecord("a", "s", 0.4, 2.0, "1", "active")])


@pytest.mark.parametrize("trust", TRUST.values())
def test_trust_is_the_newest_speaking_records(trust: float) -> None:
    recs = [ClaimRecord("a", "s", 0.1, 1.0, "1", "active"), ClaimRecord("b", "s", trust, 2.0, "2", "active")]
    (view,) = partition_views_after(PartitionState(), recs)
    assert view.trust == trust and view == partition_views(recs)[0]


def _row(i: int, source: str, epoch: int, value: str | None, status: str) -> dict[str, object]:
    return {
        "fact_id": f"f{i:03d}",
        "source": source,
        "trust": TRUST[source],
        "epoch_us": epoch,
        "value": value,
        "unit": "rps",
        "status": status,
    }


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(SOURCES),
            st.integers(0, 8),
            st.sampled_from(["1000", "250", None]),
            st.sampled_from(["active", "active", "stale", "quarantined"]),
        ),
        max_size=30,
    ),
    st.lists(
        st.tuples(st.integers(0, 40), st.integers(-1, 9), st.sampled_from(["", "active", "stale", "quarantined"])),
        max_size=12,
    ),
)
def test_known_views_equal_the_rule_over_any_evaluations(
    items: list[tuple[str, int, str | None, str]], steps: list[tuple[int, int, str]]
) -> None:
    """The arbiter's memoised views (``processors.claim_views.known_views``) against the plain rule
    (``known_at`` + ``claim_records`` + ``partition_views``) while rows are added, rows change status
    (replaced dicts) and the evaluation time moves back and forth."""
    from crp_stream.core.drift import known_at
    from crp_stream.processors.claim_views import claim_records, known_views

    ordered = sorted((_row(i, *it) for i, it in enumerate(items)), key=lambda r: (r["epoch_us"], r["fact_id"]))
    memo: dict[str, object] = {}
    members: set[int] = set()
    for count, as_of, status in [*steps, (-1, 99, "")]:
        if ordered:  # a member joins anywhere in the order (an earlier epoch inserted later) or all have
            members.update(range(len(ordered)) if count < 0 else {count % len(ordered)})
            if status:
                i = (count * 7) % len(ordered)
                ordered[i] = {**ordered[i], "status": status}  # replaced, never mutated, as the index does
        rows = [ordered[i] for i in sorted(members)]
        got = known_views(rows, memo, as_of)  # type: ignore[arg-type]
        known = [r for r, ok in zip(rows, known_at([int(r["epoch_us"]) for r in rows], as_of), strict=True) if ok]  # type: ignore[call-overload]
        records = claim_records(known, False, {})  # type: ignore[arg-type]
        assert got is not None
        assert got[0] == known and got[1] == records and got[2] == partition_views(records)


def test_known_views_keep_their_state_through_a_status_change() -> None:
    """A row replaced with another status (the arbiter's own change) restates the claim's state
    instead of starting it over: the same state object, its views those of the plain rule."""
    from crp_stream.processors.claim_views import _STATE, claim_records, known_views

    rows = [_row(i, SOURCES[i % 3], i, "1000" if i % 2 else "250", "active") for i in range(12)]
    memo: dict[str, object] = {}
    known_views(rows, memo, 99)  # type: ignore[arg-type]
    state = memo[_STATE]
    rows[4] = {**rows[4], "status": "stale"}
    rows.append(_row(12, "vendor_docs", 12, "250", "active"))
    got = known_views(rows, memo, 99)  # type: ignore[arg-type]
    assert memo[_STATE] is state
    assert got is not None and got[2] == partition_views(claim_records(rows, False, {}))  # type: ignore[arg-type]
    rows[2] = {**rows[2], "epoch_us": 2, "source": "field_telemetry"}  # not a status change: starts over
    known_views(rows, memo, 99)  # type: ignore[arg-type]
    assert memo[_STATE] is not state
