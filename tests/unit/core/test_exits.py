"""SPEC-024 §6 window-loop exits, §8.1 coverage header, §3.2 depth weights."""

from __future__ import annotations

import numpy as np
import pytest

from crp_stream.core.exits import (
    CKF_EXHAUSTED,
    IN_PROGRESS,
    LIMIT_REACHED,
    SAFETY_BUDGET_DEPLETED,
    TASK_COMPLETE,
    ckf_exhausted_note,
    continuation_status,
    coverage_score_header,
    depth_from_words,
    mean_novelty_ratio,
    novelty_ratio,
    serves_facts,
)


def status(**kw: object) -> str:
    args: dict[str, object] = dict(
        completeness=0.5, residual_empty=False, window_count=1, max_windows=5, mean_novelty_ratio=0.8, safety_budget=1.0
    )
    args.update(kw)
    return continuation_status(**args)  # type: ignore[arg-type]


def test_status_strings() -> None:
    assert (TASK_COMPLETE, LIMIT_REACHED, CKF_EXHAUSTED, SAFETY_BUDGET_DEPLETED, IN_PROGRESS) == (
        "task-complete",
        "limit-reached",
        "ckf-exhausted",
        "safety-budget-depleted",
        "in-progress",
    )


def test_in_progress() -> None:
    assert status() == IN_PROGRESS


def test_task_complete_needs_threshold_and_empty_residual() -> None:
    assert status(completeness=0.92, residual_empty=True) == TASK_COMPLETE
    assert status(completeness=0.919, residual_empty=True) == IN_PROGRESS
    assert status(completeness=0.99, residual_empty=False) == IN_PROGRESS


def test_limit_reached_at_max_windows() -> None:
    assert status(window_count=5) == LIMIT_REACHED
    assert status(window_count=4) == IN_PROGRESS


def test_ckf_exhausted_strictly_below_015() -> None:
    assert status(mean_novelty_ratio=0.149) == CKF_EXHAUSTED
    assert status(mean_novelty_ratio=0.15) == IN_PROGRESS


def test_safety_budget_at_or_below_010() -> None:
    assert status(safety_budget=0.10) == SAFETY_BUDGET_DEPLETED
    assert status(safety_budget=0.11) == IN_PROGRESS
    assert status(safety_budget=None) == IN_PROGRESS


def test_priority_order_when_several_hold() -> None:
    everything = dict(
        completeness=0.95, residual_empty=True, window_count=9, mean_novelty_ratio=0.01, safety_budget=0.0
    )
    assert status(**everything) == TASK_COMPLETE
    assert status(**{**everything, "residual_empty": False}) == LIMIT_REACHED
    assert status(**{**everything, "residual_empty": False, "window_count": 1}) == CKF_EXHAUSTED
    assert (
        status(**{**everything, "residual_empty": False, "window_count": 1, "mean_novelty_ratio": 0.5})
        == SAFETY_BUDGET_DEPLETED
    )


def test_novelty_ratio_is_the_cdr_score_over_the_query_relevance() -> None:
    # SPEC-024 §6 Exit 3 as written: CDR_score / relevance. A fresh fact of importance 1: its novelty;
    # a covered one at the 0.20 floor; a fact of importance 0.5 counts half; a fact the residual pulls
    # harder than the query (pull 0.8, relevance 0.6) counts its pull's share
    got = novelty_ratio([0.9, 0.2 * 0.7, 0.5 * 0.6, 0.8 * 1.0], [0.9, 0.7, 0.6, 0.6])
    np.testing.assert_allclose(got, [1.0, 0.2, 0.5, 0.8 / 0.6])
    # below the connector floor the divisor is the floor (SPEC-025 §2.5's 0.30)
    np.testing.assert_allclose(novelty_ratio([0.06], [0.10]), [0.2])
    np.testing.assert_allclose(novelty_ratio([0.06], [-0.2], relevance_floor=0.2), [0.3])


def test_an_exhausted_window_serves_no_facts() -> None:
    assert not serves_facts(CKF_EXHAUSTED)
    assert all(serves_facts(s) for s in (IN_PROGRESS, TASK_COMPLETE, LIMIT_REACHED, SAFETY_BUDGET_DEPLETED))
    assert ckf_exhausted_note(0.1234, 4).startswith("CKF-EXHAUSTED: mean novelty ratio 0.1234 < 0.15 over the 4 facts")


def test_mean_novelty_ratio_and_empty_envelope() -> None:
    assert mean_novelty_ratio([0.2, 0.4]) == pytest.approx(0.3)
    assert mean_novelty_ratio([]) == 0.0


def test_coverage_header_is_minimum_not_mean() -> None:
    assert coverage_score_header([0.95, 0.74, 0.9]) == 0.74
    assert coverage_score_header([]) is None


def test_depth_from_words_seed_examples() -> None:
    assert depth_from_words(280, 300) == 0.90
    assert depth_from_words(60, 300) == pytest.approx(0.20)
    assert depth_from_words(600, 300) == 0.90
    assert depth_from_words(0, 300) == 0.0
    assert depth_from_words(150, 300) == 0.5


def test_depth_defaults_and_validation() -> None:
    assert depth_from_words(100, None) == 0.5
    assert depth_from_words(100, 0) == 0.5
    with pytest.raises(ValueError):
        depth_from_words(-1, 100)


# --- depth from words, marginal residual items, terminal statuses -----------------------------


def test_report_depth_prefers_the_explicit_depth_then_words_then_half() -> None:
    from crp_stream.core.exits import report_depth

    assert report_depth(0.7, 10, 300) == 0.7
    assert report_depth(None, 60, 300) == pytest.approx(0.2)  # the seed's second example
    assert report_depth(None, 280, 300) == pytest.approx(0.9)  # capped at "thorough"
    assert report_depth(None, 60, None) == 0.5  # no expected count: the default
    assert report_depth(None, None, 300) == 0.5  # neither given


def test_marginal_items_are_those_below_the_relevance_gate() -> None:
    from crp_stream.core.exits import marginal_residual, residual_done

    m = marginal_residual([0.9, 0.54, float("-inf"), float("nan"), 0.55], 0.55)
    assert m.tolist() == [False, True, True, True, False]
    assert residual_done([]) is True  # empty
    assert residual_done(marginal_residual([0.1, 0.2], 0.55)) is True  # only marginal
    assert residual_done(m) is False


def test_only_in_progress_continues_the_loop() -> None:
    from crp_stream.core.exits import is_terminal

    assert [is_terminal(s) for s in (TASK_COMPLETE, LIMIT_REACHED, CKF_EXHAUSTED, SAFETY_BUDGET_DEPLETED)] == [
        True,
        True,
        True,
        True,
    ]
    assert is_terminal(IN_PROGRESS) is False
