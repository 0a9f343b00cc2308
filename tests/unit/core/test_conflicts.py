"""SPEC-027 §2: contradiction detection, authority arbitration, same-claim collapse."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from crp_stream.core.authority import (
    AUTHORITY_TIE_EPSILON,
    SOURCE_AUTHORITY,
    authority,
    fact_authority,
    source_authority,
)
from crp_stream.core.conflicts import (
    ENTITY_SUBSTITUTED,
    NEGATION_FLIP,
    NUMBER_CHANGED,
    FactView,
    arbitrate_contradictions,
    conflicts_resolved_header,
    detect_envelope_contradictions,
    extract_numbers,
    resolve_contradiction,
    same_claim_duplicates,
    unresolved_conflict_note,
    values_conflict,
)
from tests.support.text_decisions import array, assert_decides_as_recorded


def fv(fid: str, text: str = "", **kw: object) -> FactView:
    return FactView(fid, text, **kw)  # type: ignore[arg-type]


def conflict(a: str, b: str) -> str | None:
    return values_conflict(fv("a", a), fv("b", b))


# ---- extract_numbers --------------------------------------------------------------------------


def test_extract_numbers_units_normalised() -> None:
    got = extract_numbers("1,000 rps, 1 krps, 250 req/s, 120 ms, 0.5 s, 2 GiB, 512Mi, 1 GB, 5%, 7 percent")
    assert got == [
        (1000.0, "rps"),
        (1000.0, "rps"),
        (250.0, "rps"),
        (pytest.approx(0.12), "s"),
        (0.5, "s"),
        (2.0 * 2**30, "B"),
        (512.0 * 2**20, "B"),
        (1e9, "B"),
        (5.0, "%"),
        (7.0, "%"),
    ]


def test_extract_numbers_plain_and_names() -> None:
    assert extract_numbers("etcd default client port is 2379.") == [(2379.0, None)]
    assert extract_numbers("region us-east-1 runs v3.5 over HTTP/2") == []
    assert extract_numbers("10k users in 3 days") == [(10000.0, None), (3 * 86400.0, "s")]
    assert extract_numbers("temperature -5 at 2 hours") == [(-5.0, None), (7200.0, "s")]
    assert extract_numbers("5 sheep") == [(5.0, None)]


# ---- values_conflict: text heuristics ----------------------------------------------------------


def test_number_changed_spec_example() -> None:
    assert conflict("etcd default client port is 2379", "etcd default client port is 4001") == NUMBER_CHANGED


def test_same_quantity_in_other_units_is_not_a_conflict() -> None:
    assert conflict("The API limit is 1000 rps", "The API limit is 1 krps") is None
    assert conflict("p99 latency is 100 ms", "p99 latency is 0.1 s") is None
    assert conflict("The API limit is 1000 rps", "The API limit is 250 req/s") == NUMBER_CHANGED


def test_number_in_other_unit_family_is_not_number_changed() -> None:
    assert conflict("latency is 100 ms", "latency is 100 %") is None


def test_negation_flip_variants() -> None:
    assert conflict("TLS is enabled on the API server", "TLS is disabled on the API server") == NEGATION_FLIP
    assert conflict("The pod can be rescheduled", "The pod cannot be rescheduled") == NEGATION_FLIP
    assert conflict("The pod can be rescheduled", "The pod can't be rescheduled") == NEGATION_FLIP
    assert conflict("Swap is supported", "Swap is not supported") == NEGATION_FLIP
    assert conflict("The pod is restarted", "The pod isn’t restarted") == NEGATION_FLIP
    assert conflict("Pods never share IPs", "Pods share IPs") == NEGATION_FLIP


def test_double_negation_is_not_a_flip() -> None:
    assert conflict("It is not disabled", "It is enabled") is None


def test_entity_substituted() -> None:
    assert conflict("Kubernetes uses etcd as its store", "Kubernetes uses Consul as its store") == (ENTITY_SUBSTITUTED)
    assert conflict("Primary region is us-east-1", "Primary region is eu-west-2") == ENTITY_SUBSTITUTED


def test_a_different_name_in_subject_position_is_another_subject_not_a_conflict() -> None:
    assert conflict("Scott Derrickson is an American director", "Ed Wood is an American director") is None
    assert conflict("The capital of France is Paris", "The capital of Germany is Paris") is None
    assert conflict("The 1984 Oklahoma team represented OU", "The 1989 Oklahoma team represented OU") is None
    assert conflict("The M65 is a motorway in Lancashire", "The A601(M) is a motorway in Lancashire") is None
    assert conflict("The film was directed by Ang Lee", "The film was directed by Tim Burton") == (ENTITY_SUBSTITUTED)
    assert conflict("Cilium replaces kube-proxy with eBPF", "Cilium replaces kube-proxy with IPVS") == (
        ENTITY_SUBSTITUTED
    )


def test_no_conflict_for_lowercase_word_swap_insertion_or_identity() -> None:
    assert conflict("the cache is warm", "the cache is cold") is None
    assert conflict("Pods get new IPs", "Pods get new IPs after a restart") is None
    assert conflict("Same text 42", "Same text 42") is None
    assert conflict("Kubernetes networking", "kubernetes NETWORKING") is None


def test_two_changes_are_not_detected() -> None:
    assert conflict("Port 2379 on Linux", "Port 4001 on Windows") is None


# ---- values_conflict: structured ---------------------------------------------------------------


def s_fact(
    fid: str,
    value: object,
    unit: str | None = None,
    subject: str = "upstream api",
    attribute: str = "rate limit",
    text: str = "",
) -> FactView:
    return fv(
        fid, text or f"{subject} {attribute} {value}", subject=subject, attribute=attribute, value=value, unit=unit
    )


def test_structured_same_key_different_numbers() -> None:
    assert values_conflict(s_fact("a", "1000", "rps"), s_fact("b", 250, "req/s")) == NUMBER_CHANGED
    assert values_conflict(s_fact("a", "1000", "rps"), s_fact("b", "1 krps")) is None
    assert values_conflict(s_fact("a", 1000, "rps"), s_fact("b", 1000.0, "requests/s")) is None


def test_structured_keys_are_case_insensitive_and_different_keys_never_conflict() -> None:
    a = s_fact("a", 1000, "rps")
    b = s_fact("b", 250, "rps", subject="Upstream API ", attribute="Rate Limit")
    assert values_conflict(a, b) == NUMBER_CHANGED
    c = s_fact("c", 250, "rps", subject="other api", text=a.text)
    assert values_conflict(a, c) is None


def test_structured_booleans_and_names() -> None:
    a = s_fact("a", "enabled", attribute="tls")
    assert values_conflict(a, s_fact("b", False, attribute="tls")) == NEGATION_FLIP
    assert values_conflict(a, s_fact("b", "on", attribute="tls")) is None
    pg = s_fact("p", "Postgres", attribute="engine")
    assert values_conflict(pg, s_fact("m", "MySQL", attribute="engine")) == ENTITY_SUBSTITUTED
    assert values_conflict(pg, s_fact("m", " postgres ", attribute="engine")) is None
    assert values_conflict(pg, s_fact("n", 5, attribute="engine")) == NUMBER_CHANGED


def test_structured_without_value_falls_back_to_text() -> None:
    a = fv("a", "limit is 1000 rps", subject="api", attribute="limit")
    b = fv("b", "limit is 250 rps", subject="api", attribute="limit")
    assert values_conflict(a, b) == NUMBER_CHANGED


# ---- authority ---------------------------------------------------------------------------------


def test_source_authority_table_and_trust() -> None:
    assert SOURCE_AUTHORITY["regulatory"] == 0.90
    assert SOURCE_AUTHORITY["official"] - SOURCE_AUTHORITY["community"] == pytest.approx(0.05)
    assert SOURCE_AUTHORITY["official"] - SOURCE_AUTHORITY["unverified"] == pytest.approx(0.10)
    assert source_authority("official", 1.0) == 0.80
    assert source_authority("official", 0.5) == pytest.approx(0.40)
    assert source_authority("telemetry", 0.4) == pytest.approx(0.28)
    with pytest.raises(ValueError):
        source_authority("official", 1.2)
    with pytest.raises(ValueError):
        source_authority("rumour", 0.5)


def test_authority_is_product_and_vectorised() -> None:
    np.testing.assert_allclose(authority([0.8, 0.9], [1.0, 0.3], [1.0, 0.5]), [0.8, 0.135])
    f = fv("x", source_type="regulatory", trust=0.5, recency=0.65, importance=0.8)
    assert fact_authority(f) == pytest.approx(0.9 * 0.5 * 0.65 * 0.8)


def test_current_official_beats_stale_legacy_decisively() -> None:
    # §2.3: etcd 2379 (official v3.5, fresh) vs 4001 (legacy v2.x, past its TTL).
    f1 = fv("f1", "etcd default client port is 2379", source_type="official", recency=1.0)
    f2 = fv("f2", "etcd default client port is 4001", source_type="official", recency=0.30)
    for a, b in ((f1, f2), (f2, f1)):
        r = resolve_contradiction(a, b)
        assert (r.kept.fact_id, r.suppressed.fact_id, r.tie) == ("f1", "f2", False)
        assert r.authority_kept == pytest.approx(0.80) and r.authority_suppressed == pytest.approx(0.24)


def test_stale_status_loses_whatever_its_trust() -> None:
    key = {"subject": "api", "attribute": "limit"}
    stale = fv("s", "x", source_type="regulatory", trust=1.0, status="stale", value="1000", **key)
    weak = fv("w", "y", source_type="unverified", trust=0.1, recency=0.3, importance=0.1, value="250", **key)
    r = resolve_contradiction(stale, weak)
    assert (r.kept.fact_id, r.suppressed.fact_id, r.tie) == ("w", "s", False)
    assert r.authority_kept < r.authority_suppressed
    both = resolve_contradiction(stale, fv("t", "z", source_type="official", status="stale"))
    assert both.kept.fact_id == "s"


def test_stale_free_text_statement_against_a_weaker_fresher_one_is_a_tie() -> None:
    """Two later partitions made the trusted sentence stale; both are served, noted."""
    stale = fv("s", "Facebook acquired Instagram in 2012.", source="vendor", trust=0.8, status="stale")
    fresh = fv("p", "Apple acquired Instagram in 2012.", source="blog", source_type="community", trust=0.3)
    for a, b in ((stale, fresh), (fresh, stale)):
        r = resolve_contradiction(a, b)
        assert r.tie and {r.kept.fact_id, r.suppressed.fact_id} == {"s", "p"}
    stronger = fresh._replace(source_type="official", trust=1.0)  # fresher AND stronger: it wins
    r = resolve_contradiction(stale, stronger)
    assert (r.kept.fact_id, r.tie) == ("p", False)
    arb = arbitrate_contradictions([stale, fresh], [(0, 1, ENTITY_SUBSTITUTED)])
    assert arb.suppressed == () and len(arb.notes) == 1


def test_exact_tie_within_epsilon_is_unresolved_and_order_independent() -> None:
    a = fv("b-fact", "x", importance=0.7)
    b = fv("a-fact", "y", importance=0.7 + AUTHORITY_TIE_EPSILON / 10)
    for first, second in ((a, b), (b, a)):
        r = resolve_contradiction(first, second)
        assert r.tie is True
        assert (r.kept.fact_id, r.suppressed.fact_id) == ("a-fact", "b-fact")
    c = fv("c", "z", importance=0.7 + 1e-6)
    assert resolve_contradiction(a, c).tie is False


def test_unresolved_note_exact_text() -> None:
    note = unresolved_conflict_note("Port is 2379", "Port is 4001")
    assert note == (
        "NOTE: The following two facts conflict and could not be automatically\n"
        "arbitrated. Treat with caution and prefer the more specific:\n"
        "  Port is 2379\n"
        "  Port is 4001"
    )


def test_conflicts_header() -> None:
    assert conflicts_resolved_header(2) == "2"
    assert conflicts_resolved_header(1, 1) == "1; unresolved=1"
    assert conflicts_resolved_header(0, 0) == "0"


# ---- detection over an envelope -----------------------------------------------------------------


def vecs(*rows: list[float]) -> np.ndarray:
    v = np.array(rows, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_detect_requires_cosine_above_threshold_for_text_facts() -> None:
    facts = [
        fv("1", "etcd default client port is 2379"),
        fv("2", "etcd default client port is 4001"),
        fv("3", "Kubernetes uses etcd as its store"),
    ]
    close = vecs([1, 0.1, 0], [1, 0.12, 0], [0, 1, 0])
    assert detect_envelope_contradictions(facts, close) == [(0, 1, NUMBER_CHANGED)]
    far = vecs([1, 0, 0], [0.8, 0.6, 0], [0, 1, 0])  # cos 0.8 < 0.85
    assert detect_envelope_contradictions(facts, far) == []
    assert detect_envelope_contradictions(facts, far, pair_threshold=0.75) == [(0, 1, NUMBER_CHANGED)]


def test_detect_same_key_whatever_the_cosine() -> None:
    facts = [s_fact("v", 1000, "rps"), s_fact("t", 250, "rps"), s_fact("o", "1 krps")]
    orth = vecs([1, 0, 0], [0, 1, 0], [0, 0, 1])
    assert detect_envelope_contradictions(facts, orth) == [(0, 1, NUMBER_CHANGED), (1, 2, NUMBER_CHANGED)]


def test_detect_empty_and_shape_check() -> None:
    assert detect_envelope_contradictions([], np.zeros((0, 3))) == []
    with pytest.raises(ValueError):
        detect_envelope_contradictions([fv("1", "x")], np.zeros((2, 3)))


def test_arbitrate_suppresses_losers_and_notes_ties() -> None:
    facts = [
        fv("cur", "etcd port is 2379", recency=1.0),
        fv("old", "etcd port is 4001", recency=0.3),
        fv("t1", "Mode is Alpha", importance=0.5),
        fv("t2", "Mode is Beta", importance=0.5),
    ]
    pairs = [(0, 1, NUMBER_CHANGED), (2, 3, ENTITY_SUBSTITUTED)]
    arb = arbitrate_contradictions(facts, pairs)
    assert arb.suppressed == (1,)
    assert arb.notes == (unresolved_conflict_note("Mode is Alpha", "Mode is Beta"),)
    assert [r.tie for *_, r in arb.resolutions] == [False, True]
    assert conflicts_resolved_header(len(pairs), len(arb.notes)) == "2; unresolved=1"


def test_tie_with_a_suppressed_member_needs_no_note() -> None:
    facts = [fv("t1", "Mode is Alpha"), fv("t2", "Mode is Beta"), fv("t3", "Mode is Gamma", source_type="regulatory")]
    arb = arbitrate_contradictions(facts, [(0, 1, ENTITY_SUBSTITUTED), (1, 2, ENTITY_SUBSTITUTED)])
    assert arb.resolutions[0][3].tie is True
    assert arb.suppressed == (1,)
    assert arb.notes == ()


def test_arbitrate_chain_never_suppresses_the_best() -> None:
    facts = [fv("a", "v 1", recency=0.3), fv("b", "v 2", recency=0.65), fv("c", "v 3", recency=1.0)]
    pairs = [(0, 1, NUMBER_CHANGED), (0, 2, NUMBER_CHANGED), (1, 2, NUMBER_CHANGED)]
    arb = arbitrate_contradictions(facts, pairs)
    assert arb.suppressed == (0, 1)
    assert arb.notes == ()


# ---- same-claim collapse ------------------------------------------------------------------------


def test_47_identical_telemetry_readings_collapse_to_one_group() -> None:
    readings = [
        fv(
            f"t{i:02d}",
            "upstream api rate limit observed at 250 rps",
            subject="upstream api",
            attribute="rate limit",
            value=250,
            unit="rps",
            source="field_telemetry",
            source_type="telemetry",
            trust=0.4,
        )
        for i in range(47)
    ]
    vendor = fv(
        "v1",
        "upstream api rate limit is 1000 rps",
        subject="upstream api",
        attribute="rate limit",
        value="1000",
        unit="rps",
        source="vendor_docs",
    )
    facts = [vendor, *readings]
    v = np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (48, 1))  # all identical vectors
    groups = same_claim_duplicates(facts, v)
    assert groups == [[0], list(range(1, 48))]
    assert len(groups[1]) == 47  # support of the collapsed entry


def test_same_claim_across_units_and_phrasing() -> None:
    facts = [
        s_fact("a", 1000, "rps", text="limit 1000 rps"),
        s_fact("b", "1 krps", text="limit is one krps"),
        s_fact("c", 250, "rps"),
    ]
    orth = vecs([1, 0, 0], [0, 1, 0], [0, 0, 1])
    assert same_claim_duplicates(facts, orth) == [[0, 1], [2]]


def test_same_text_groups_but_different_numbers_never_do() -> None:
    texts = [
        "Pods get new IPs",
        "pods  get new IPs",
        "p99 latency is 120 ms",
        "p99 latency is 125 ms",
        "Kubernetes uses etcd",
        "Kubernetes uses Consul",
    ]
    facts = [fv(str(i), t) for i, t in enumerate(texts)]
    # pairs (0,1), (2,3), (4,5) share a vector (cosine 1.0); the pairs are mutually orthogonal
    v = np.repeat(np.eye(3, dtype=np.float32), 2, axis=0)
    assert same_claim_duplicates(facts, v) == [[0, 1], [2], [3], [4], [5]]
    orth = np.eye(6, dtype=np.float32)
    assert same_claim_duplicates(facts, orth) == [[0, 1], [2], [3], [4], [5]]


def test_chain_never_joins_disagreeing_facts() -> None:
    # A and C disagree (1000 vs 250); B (no value, same text) agrees with both: B joins only one.
    a = fv("A", "rate limit report", subject="api", attribute="limit", value=1000, unit="rps")
    b = fv("B", "rate limit report")
    c = fv("C", "rate limit report", subject="api", attribute="limit", value=250, unit="rps")
    groups = same_claim_duplicates([a, b, c], vecs([1, 0], [1, 0], [1, 0]))
    assert groups == [[0, 1], [2]]


def test_near_duplicate_by_cosine_threshold() -> None:
    facts = [fv("1", "Pods get new IPs after restart"), fv("2", "Pods receive new IPs after a restart")]
    v = vecs([1, 0.05], [1, 0.0])
    assert same_claim_duplicates(facts, v) == [[0, 1]]
    assert same_claim_duplicates(facts, v, threshold=0.9999) == [[0], [1]]


def test_same_claim_empty() -> None:
    assert same_claim_duplicates([], np.zeros((0, 4))) == []


def test_pairs_above_decides_every_pair_as_the_float64_matmul() -> None:
    """The float32 screen never changes a decision: random unit vectors, copies, pairs right at the
    threshold, float64 and float32 inputs, both comparisons."""
    from crp_stream.core.cosine_pairs import pairs_above as _pairs_above

    rng = np.random.default_rng(4)
    for trial in range(40):
        n, d = int(rng.integers(2, 120)), int(rng.choice([3, 16, 384]))
        v = rng.standard_normal((n, d))
        v[n // 2 :] = v[: n - n // 2] + rng.choice([0.0, 1e-9, 0.05, 0.3]) * rng.standard_normal((n - n // 2, d))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        if trial % 2:
            v = v.astype(np.float32)
        sims = np.asarray(v, dtype=np.float64) @ np.asarray(v, dtype=np.float64).T
        at = float(sims[0, n - 1]) if trial % 3 == 0 else 0.97  # a threshold equal to one pair's cosine
        for strict in (False, True):
            want = {(int(i), int(j)) for i, j in np.argwhere(np.triu(sims > at if strict else sims >= at, k=1))}
            assert _pairs_above(v, n, at, strict) == want


def test_pairs_above_with_the_callers_norms_decides_as_without() -> None:
    """``norms`` (the rows' squared norms, as the envelope keeps them per candidate) only skips the
    float64 copy of every row: the same pairs, on float32 and float64 rows, pools in any order, pairs
    right at the threshold; the public screens give the same groups and contradictions."""
    from crp_stream.core.cosine_pairs import pairs_above as _pairs_above

    rng = np.random.default_rng(12)
    for trial in range(40):
        n, d = int(rng.integers(2, 100)), int(rng.choice([3, 16, 384]))
        v = rng.standard_normal((n, d))
        v[n // 2 :] = v[: n - n // 2] + rng.choice([0.0, 1e-9, 0.02, 0.3]) * rng.standard_normal((n - n // 2, d))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        v *= rng.choice([1.0, 1.0 + 1e-7, 3.0])
        if trial % 2:
            v = v.astype(np.float32)
        all_norms = np.einsum("ij,ij->i", np.asarray(v, np.float64), np.asarray(v, np.float64))
        pool = rng.permutation(n)[: int(rng.integers(2, n + 1))]  # as ``_arbitrate`` takes rows
        sub = v[pool]
        sims = np.asarray(sub, np.float64) @ np.asarray(sub, np.float64).T
        m = len(pool)
        for at in (float(sims[0, m - 1]), 0.97, 0.85):
            for strict in (False, True):
                want = _pairs_above(sub, m, at, strict)
                assert _pairs_above(sub, m, at, strict, norms=all_norms[pool]) == want
                gram = sub.astype(np.float32) @ sub.astype(np.float32).T
                assert _pairs_above(sub, m, at, strict, gram=gram, norms=all_norms[pool]) == want
                for first in (0, 1, m // 3, m, m + 2):  # only pairs touching the first rows
                    part = {(i, j) for i, j in want if i < first}
                    assert _pairs_above(sub, m, at, strict, first=first) == part
                    rows = gram[:first]
                    assert _pairs_above(sub, m, at, strict, gram=rows, norms=all_norms[pool], first=first) == part
        facts = [fv(str(i), f"Service {i % 5} limit is {i % 3} rps.") for i in range(m)]
        assert same_claim_duplicates(facts, sub, norms=all_norms[pool]) == same_claim_duplicates(facts, sub)
        inside = int(rng.integers(0, m + 1))
        want_pairs = detect_envelope_contradictions(facts, sub, inside=inside)  # as recorded: below
        gram = sub.astype(np.float32) @ sub.astype(np.float32).T
        assert (
            detect_envelope_contradictions(facts, sub, inside=inside, gram=gram[:inside], norms=all_norms[pool])
            == want_pairs
        )
    with pytest.raises(ValueError):
        _pairs_above(np.zeros((2, 3)), 2, 0.9, False, norms=np.zeros(3))


def test_same_claim_duplicates_free_text_fast_path_groups_as_before() -> None:
    """The free-text shortcut (no subject, attribute or value anywhere and every normalised text
    distinct: no key bucket) groups as the rule did before it: free texts in case and whitespace
    variants, facts with a subject, an attribute or a falsy value (0, "", False), near-copies by cosine."""

    def decide(x: dict[str, Any]) -> list[list[int]]:
        return same_claim_duplicates([FactView(**f) for f in x["facts"]], array(x["vecs"]))

    assert assert_decides_as_recorded("same_claim_duplicates", decide) == 200
    # free texts equal only once normalised, far apart by cosine: the text bucket groups them
    facts = [fv("a", "Port is 80."), fv("b", "port  is 80."), fv("c", "Alpha beta.")]
    assert same_claim_duplicates(facts, np.eye(3)) == [[0, 1], [2]]
    # a falsy structured value is not free text: its value bucket groups it with its copy
    facts = [fv("a", "One.", subject="s", attribute="x", value=0), fv("b", "Two.", subject="s", attribute="x", value=0)]
    assert same_claim_duplicates(facts, np.eye(2)) == [[0, 1]]


def test_envelope_contradictions_decide_as_recorded() -> None:
    """``detect_envelope_contradictions`` on pools of near-copies (float32 and float64 rows, any
    ``inside``) finds the recorded pairs, with and without the caller's gram rows and norms."""

    def decide(x: dict[str, Any]) -> list[object]:
        facts, v, inside = [FactView(**f) for f in x["facts"]], array(x["vecs"]), x["inside"]
        got = detect_envelope_contradictions(facts, v, inside=inside)
        gram = (v.astype(np.float32) @ v.astype(np.float32).T)[:inside]
        norms = np.einsum("ij,ij->i", np.asarray(v, np.float64), np.asarray(v, np.float64))
        assert detect_envelope_contradictions(facts, v, inside=inside, gram=gram, norms=norms) == got
        return got

    assert assert_decides_as_recorded("envelope", decide) == 40
