"""SPEC-024 §2 CDR scoring, SPEC-027 §3.3 final form."""

from __future__ import annotations

import numpy as np
import pytest

from crp_stream.core.cdr import (
    CDR_MIN_RELEVANCE,
    COVERAGE_PENALTY_CAP,
    MIN_NOVELTY_FLOOR,
    cdr_rank,
    cdr_score,
    cdr_signals,
    coverage_penalty,
    coverage_score,
    effective_relevance,
    novelty,
    relevance,
    relevance_gate,
    residual_pull,
    update_residual_set,
    window_one_residual_pull,
)


def unit(*xs: float) -> list[float]:
    v = np.array(xs, dtype=np.float64)
    return (v / np.linalg.norm(v)).tolist()


E1, E2, E3 = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]


def test_seed_constants() -> None:
    assert (CDR_MIN_RELEVANCE, MIN_NOVELTY_FLOOR, COVERAGE_PENALTY_CAP) == (0.55, 0.20, 0.80)


def test_relevance_is_dot_product() -> None:
    facts = np.array([E1, E2, unit(1, 1, 0)], dtype=np.float32)
    np.testing.assert_allclose(relevance(facts, E1), [1.0, 0.0, 2**-0.5], rtol=1e-6)


def test_coverage_is_weighted_mean_not_max() -> None:
    # §2.3: a fact relevant to one covered topic and one uncovered topic.
    fact = np.array([unit(1, 1, 0)])
    covered = np.array([E1, E3])  # E1 covered thoroughly, E3 unrelated
    got = coverage_score(fact, covered, [0.9, 0.9])
    np.testing.assert_allclose(got, [(0.9 * 2**-0.5 + 0.0) / 1.8])
    assert float(got[0]) < float((fact @ covered.T).max())


def test_coverage_weights_matter() -> None:
    fact = np.array([E1])
    got = coverage_score(fact, np.array([E1, E2]), [0.9, 0.1])
    np.testing.assert_allclose(got, [0.9])


def test_coverage_empty_set_or_zero_weights_is_zero() -> None:
    facts = np.array([E1, E2])
    assert coverage_score(facts, np.zeros((0, 3)), []).tolist() == [0.0, 0.0]
    assert coverage_score(facts, [], []).tolist() == [0.0, 0.0]
    assert coverage_score(facts, np.array([E1]), [0.0]).tolist() == [0.0, 0.0]


def test_coverage_validation() -> None:
    with pytest.raises(ValueError):
        coverage_score(np.array([E1]), np.array([E1]), [-0.1])
    with pytest.raises(ValueError):
        coverage_score(np.array([E1]), np.array([E1]), [0.5, 0.5])
    with pytest.raises(ValueError):
        coverage_score(np.array([E1]), np.array([[1.0, 0.0]]), [0.5])


def test_residual_pull_is_max_and_zero_when_empty() -> None:
    facts = np.array([E1, unit(0, 1, 1)])
    np.testing.assert_allclose(residual_pull(facts, np.array([E2, E3])), [0.0, 2**-0.5])
    np.testing.assert_allclose(residual_pull(facts, np.array([E1, E2])), [1.0, 2**-0.5])
    assert residual_pull(facts, np.zeros((0, 3))).tolist() == [0.0, 0.0]


def test_window_one_zeroes_residual_pull() -> None:
    assert window_one_residual_pull([0.7, 0.9], coverage_empty=True).tolist() == [0.0, 0.0]
    assert window_one_residual_pull([0.7, 0.9], coverage_empty=False).tolist() == [0.7, 0.9]


def test_penalty_cap_and_novelty_floor() -> None:
    cov = np.array([-0.3, 0.0, 0.25, 0.79, 0.80, 0.95, 1.0])
    np.testing.assert_allclose(coverage_penalty(cov), [0.0, 0.0, 0.25, 0.79, 0.80, 0.80, 0.80])
    nov = novelty(cov)
    np.testing.assert_allclose(nov, [1.0, 1.0, 0.75, 0.21, 0.20, 0.20, 0.20])
    assert float(nov.min()) >= MIN_NOVELTY_FLOOR
    assert float(nov.max()) <= 1.0


def test_relevance_gate_keeps_at_threshold_drops_below() -> None:
    assert relevance_gate([0.40, 0.549, 0.55, 0.9]).tolist() == [False, False, True, True]
    assert relevance_gate([0.60, 0.66], min_relevance=0.65).tolist() == [False, True]


def test_effective_relevance() -> None:
    assert effective_relevance([0.6, 0.8], [0.7, 0.1]).tolist() == [0.7, 0.8]


def test_window_one_score_equals_importance_times_relevance() -> None:
    # §2.7: empty Coverage Set -> novelty 1, pull 0 -> CDR == SPEC-003 Phase 2 score.
    rng = np.random.default_rng(7)
    query = rng.normal(size=8)
    query /= np.linalg.norm(query)
    facts = query + rng.normal(scale=0.6, size=(12, 8))
    facts /= np.linalg.norm(facts, axis=1, keepdims=True)
    residual = facts[2:5] + 0.5  # the whole task decomposition on window 1: strongly pulling
    residual /= np.linalg.norm(residual, axis=1, keepdims=True)
    sig = cdr_signals(facts, query, np.zeros((0, 8)), [], residual)
    gate = relevance_gate(sig.relevance)
    assert 0 < int(gate.sum()) < 12  # the gate really drops some, keeps some
    importance = rng.uniform(0.1, 1.0, size=12)
    score = cdr_score(importance, sig.relevance, sig.residual_pull, sig.novelty, 1.0, 0.0)
    assert sig.novelty.tolist() == [1.0] * 12
    assert sig.residual_pull.tolist() == [0.0] * 12
    assert np.array_equal(score[gate], (importance * (facts @ query))[gate])


def test_signals_after_window_one_use_residual_pull() -> None:
    facts = np.array([E1, E2])
    sig = cdr_signals(facts, E1, np.array([E1]), [0.9], np.array([E2]))
    assert sig.residual_pull.tolist() == [0.0, 1.0]
    np.testing.assert_allclose(sig.novelty, [0.2, 1.0])
    np.testing.assert_allclose(sig.coverage, [1.0, 0.0])


def test_final_formula_spec_027_3_3() -> None:
    got = cdr_score(
        importance=[0.5, 1.0, 1.0],
        relevance=[0.8, 0.6, 0.9],
        residual_pull=[0.9, 0.1, 0.0],
        novelty=[1.0, 0.2, 0.5],
        recency=[1.0, 0.3, 0.65],
        ngram_penalty=[0.0, 0.15, 0.80],
    )
    np.testing.assert_allclose(got, [0.5 * 0.9, 0.6 * 0.2 * 0.3 * 0.85, 0.9 * 0.5 * 0.65 * 0.2])


def test_covered_fact_keeps_floor_share_of_its_score() -> None:
    # §2.4: a fully covered fact keeps 20% of its base score.
    cov = coverage_score(np.array([E1]), np.array([E1]), [1.0])
    s = cdr_score(1.0, 0.9, 0.0, novelty(cov), 1.0, 0.0)
    np.testing.assert_allclose(s, [0.9 * 0.2])


def test_novel_moderate_fact_outranks_covered_top_fact() -> None:
    # §1.1: window-1 facts (sim .94) vs novel eBPF facts (sim .70) after coverage.
    top = np.array(unit(1.0, 0.35, 0.0))
    novel = np.array(unit(0.7, 0.0, 0.714))
    facts = np.vstack([top, novel])
    query = E1
    sig = cdr_signals(facts, query, np.array([top]), [0.9], np.zeros((0, 3)))
    scores = cdr_score(1.0, sig.relevance, sig.residual_pull, sig.novelty, 1.0, 0.0)
    assert cdr_rank(scores, ["top", "novel"]) == [1, 0]


def test_rank_orders_by_score_then_id_and_applies_gate() -> None:
    scores = [0.5, 0.9, 0.5, 0.1, 0.9]
    ids = ["e", "d", "a", "c", "b"]
    assert cdr_rank(scores, ids) == [4, 1, 2, 0, 3]
    assert cdr_rank(scores, ids, eligible=[True, False, True, True, True]) == [4, 2, 0, 3]
    assert cdr_rank([], []) == []
    with pytest.raises(ValueError):
        cdr_rank([1.0], [])


def test_update_residual_set_preserves_order() -> None:
    assert update_residual_set(["a", "b", "c", "d"], ["c", "a", "zz"]) == ["b", "d"]
