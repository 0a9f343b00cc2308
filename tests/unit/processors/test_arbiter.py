"""The arbiter's pure helpers: fabric rows -> drift records, the verdict choice, text-claim values."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream.core.drift import (
    CONSENSUS_OK,
    DRIFT_UNDETERMINED,
    POISONING_CANDIDATE,
    STALE_HIGH_TRUST,
    ClaimRecord,
    claim_verdict,
    partition_views,
)
from crp_stream.processors.arbiter import choose_verdict, claim_records
from crp_stream.processors.effects import chunks, short
from crp_stream.processors.text_claims import claim_text, text_values

DAY = 86_400.0


def row(
    fid: str,
    source: str,
    value: Any,
    epoch_s: float,
    *,
    unit: str | None = "rps",
    trust: float = 0.5,
    status: str = "active",
    text: str = "",
) -> dict[str, Any]:
    return {
        "fact_id": fid,
        "source": source,
        "source_type": "official",
        "trust": trust,
        "value": value,
        "unit": unit,
        "epoch_us": int(epoch_s * 1_000_000),
        "status": status,
        "text": text or f"x {value}",
    }


def test_claim_records_normalise_values_and_take_the_epoch_from_the_row() -> None:
    rows = [row("a", "v", "1,000", 10.0), row("b", "t", "1000 req/s", 20.0, unit=None), row("c", "t", None, 30.0)]
    recs = claim_records(rows, text_claim=False)
    assert [(r.fact_id, r.value, r.epoch) for r in recs] == [("a", "1000 rps", 10.0), ("b", "1000 rps", 20.0)]


def _recs(*specs: tuple[str, str, float, str, float]) -> list[ClaimRecord]:
    return [ClaimRecord(fid, src, trust, epoch, value, "active") for fid, src, trust, epoch, value in specs]


def test_choose_verdict_prefers_a_stale_high_trust_reading_of_a_minority_value() -> None:
    # Two partitions (older) assert 300 -> claim_verdict evaluates 300 (poisoning); two later ones
    # assert 250, which is fresher and corroborated: the stale high-trust verdict must win.
    recs = _recs(
        ("v", "vendor", 0.9, 100.0, "1000 rps"),
        ("p1", "spam1", 0.1, 50.0, "300 rps"),
        ("p2", "spam2", 0.1, 60.0, "300 rps"),
        ("p3", "spam3", 0.1, 70.0, "300 rps"),
        ("t", "telemetry", 0.4, 200.0, "250 rps"),
        ("c", "community", 0.2, 210.0, "250 rps"),
    )
    views = partition_views(recs)
    assert claim_verdict(views, claim="k").kind == POISONING_CANDIDATE
    chosen = choose_verdict(views, "k")
    assert chosen.kind == STALE_HIGH_TRUST
    assert chosen.divergent_value == "250 rps" and chosen.stale_fact_ids == ("v",)
    assert chosen.other_divergent_values == ("300 rps",)


def test_choose_verdict_keeps_the_base_verdict_when_no_value_is_stale() -> None:
    recs = _recs(
        ("v", "vendor", 0.9, 100.0, "1000 rps"),
        ("p1", "spam1", 0.1, 50.0, "300 rps"),
        ("p2", "spam2", 0.1, 60.0, "300 rps"),
        ("t", "telemetry", 0.4, 200.0, "250 rps"),
    )
    views = partition_views(recs)
    assert choose_verdict(views, "k") == claim_verdict(views, claim="k")
    assert choose_verdict(partition_views(recs[:1]), "k").kind == CONSENSUS_OK


def test_choose_verdict_single_later_partition_is_undetermined() -> None:
    recs = _recs(("v", "vendor", 0.9, 100.0, "1000 rps"), ("t", "telemetry", 0.4, 200.0, "250 rps"))
    assert choose_verdict(partition_views(recs), "k").kind == DRIFT_UNDETERMINED


def test_text_values_group_non_conflicting_statements() -> None:
    base = "The documented rate limit of the upstream billing API is {} requests per second."
    rows = [
        row("a", "v", None, 1.0, text=base.format(1000)),
        row("b", "t", None, 2.0, text=base.format(250)),
        row("c", "c", None, 3.0, text=base.format(250)),
        row("d", "v", None, 4.0, text=base.format(1000)),
    ]
    values = text_values(rows)
    assert values["a"] == values["d"] != values["b"] == values["c"]
    assert (values["a"], values["b"]) == ("1000", "250")  # the claim's slot, not the sentence
    assert claim_text(rows) == base.format(1000).lower()


def test_text_values_name_the_swapped_subject_of_a_copied_statement() -> None:
    base = "{} collected 39 medals in 2018, the largest haul by any country in a single Winter Olympics."
    rows = [
        row("a", "official", None, 1.0, text=base.format("Norway")),
        row("b", "community", None, 2.0, text=base.format("U.S.")),
    ]
    assert text_values(rows) == {"a": "norway", "b": "u.s."}
    other = [
        row("x", "official", None, 1.0, text="X was born in 1950."),
        row("y", "community", None, 2.0, text="Y was born in 1950."),
    ]
    assert len(set(text_values(other).values())) == 1  # another subject, not another value


def test_effect_helpers_bound_sizes() -> None:
    assert short("x" * 5000).endswith("…") and len(short("x" * 5000)) == 4000
    assert short("ok") == "ok"
    assert [len(c) for c in chunks([str(i) for i in range(2500)])] == [1000, 1000, 500]
    assert chunks([]) == [[]]


def test_current_records_window_keeps_each_partitions_recent_records() -> None:
    from crp_stream.processors.arbiter import current_records

    recs = [
        ClaimRecord("old", "tele", 0.4, 0.0, "1000 rps", "active"),
        ClaimRecord("new", "tele", 0.4, 10 * DAY, "250 rps", "active"),
        ClaimRecord("q", "tele", 0.4, 20 * DAY, "250 rps", "quarantined"),
        ClaimRecord("v", "vendor", 0.9, 0.0, "1000 rps", "active"),
    ]
    assert current_records(recs, None) == recs
    # the window ends at each source's newest COUNTED record (the quarantined one does not move it)
    assert [r.fact_id for r in current_records(recs, 5 * DAY)] == ["new", "q", "v"]
    assert [r.fact_id for r in current_records(recs, 10 * DAY)] == ["old", "new", "q", "v"]


def test_a_low_trust_source_repeating_the_high_trust_sources_old_value_is_still_filed_for_review() -> None:
    """The seed's boundary: divergent records that are not fresher than the high-trust partition make
    a poisoning candidate for review, whatever the history. The lagging rule only says, in the
    reason, that the value is the high-trust source's own earlier one."""
    recs = _recs(
        ("v-old", "vendor", 0.9, 10.0, "1000 rps"),
        ("c", "community", 0.2, 20.0, "1000 rps"),
        ("v-new", "vendor", 0.9, 30.0, "250 rps"),
    )
    views = partition_views(recs)
    assert claim_verdict(views, claim="k").kind == POISONING_CANDIDATE
    chosen = choose_verdict(views, "k", recs)
    assert chosen.kind == POISONING_CANDIDATE and chosen.suspect_fact_ids == ("c",)
    assert "Lagging behind a refresh? vendor itself asserted '1000 rps' until 1970-01-01T00:00:10" in chosen.reason
    assert chosen.reason.startswith(claim_verdict(views, claim="k").reason)
    # a value the vendor never asserted: a poisoning candidate without the note
    other = _recs(
        ("v-old", "vendor", 0.9, 10.0, "1000 rps"),
        ("c", "community", 0.2, 20.0, "9 rps"),
        ("v-new", "vendor", 0.9, 30.0, "250 rps"),
    )
    plain = choose_verdict(partition_views(other), "k", other)
    assert plain.kind == POISONING_CANDIDATE and "Lagging" not in plain.reason


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["vendor_docs", "field_telemetry", "community_notes", "mirror"]),
            st.sampled_from([0.9, 0.4, 0.2]),
            st.integers(0, 30),
            st.sampled_from(["1000 rps", "250 rps", "300 rps"]),
            st.sampled_from(["active", "active", "stale", "quarantined"]),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_an_unexplained_verdict_is_the_verdict_without_its_reason(
    items: list[tuple[str, float, int, str, str]],
) -> None:
    """The arbiter explains (builds the reason text of) only a verdict that changed: ``explain=False``
    gives the same verdict with an empty reason, and the claim memo's fingerprint is the fingerprint."""
    from crp_stream.core.drift import verdict_fingerprint
    from crp_stream.processors.arbiter import _fingerprint

    trust = {}
    recs = []
    for i, (src, t, epoch, value, status) in enumerate(items):
        trust.setdefault(src, t)  # one trust per source
        recs.append(ClaimRecord(f"f{i:02d}", src, trust[src], float(epoch), value, status))
    views = partition_views(recs)
    if not views:
        return
    memo: dict[str, Any] = {}
    for history in (recs, []):
        full = choose_verdict(views, "k", history)
        quick = choose_verdict(views, "k", history, explain=False)
        assert quick == full._replace(reason="") and full.reason
        assert claim_verdict(views, claim="k", explain=False) == claim_verdict(views, claim="k")._replace(reason="")
        assert _fingerprint(quick, memo) == verdict_fingerprint(full) == _fingerprint(full, memo)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["vendor_docs", "field_telemetry", "community_notes"]),
                st.integers(-2, 12),
                st.sampled_from(["1000 rps", "250 rps"]),
                st.sampled_from(["active", "stale"]),
            ),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=8,
    )
)
def test_the_memoised_fingerprint_follows_every_verdict_of_a_claim(
    evaluations: list[list[tuple[str, int, str, str]]],
) -> None:
    """One claim's memo across evaluations whose verdicts change (epochs at 0.0 and -0.0 included):
    each fingerprint is the verdict's own."""
    from crp_stream.core.drift import verdict_fingerprint
    from crp_stream.processors.arbiter import _fingerprint

    trust = {"vendor_docs": 0.9, "field_telemetry": 0.4, "community_notes": 0.2}
    memo: dict[str, Any] = {}
    for items in evaluations:
        recs = [
            ClaimRecord(f"f{i:02d}", src, trust[src], -0.0 if epoch == -1 else float(epoch), value, status)
            for i, (src, epoch, value, status) in enumerate(items)
        ]
        verdict = choose_verdict(partition_views(recs), "k", recs, explain=False)
        assert _fingerprint(verdict, memo) == verdict_fingerprint(verdict)
