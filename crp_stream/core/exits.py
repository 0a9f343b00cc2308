"""Window-loop exits and coverage measures (SPEC-024 §3.2, §6, §8.1).

API
---
- ``COMPLETION_THRESHOLD = 0.92``; ``CKF_EXHAUSTION_THRESHOLD = 0.15``; ``SAFETY_BUDGET_FLOOR = 0.10``;
  ``DEFAULT_MAX_WINDOWS = 5``; ``MAX_DEPTH_WEIGHT = 0.90``; ``DEFAULT_DEPTH = 0.5``.
- Status strings ``TASK_COMPLETE``, ``LIMIT_REACHED``, ``CKF_EXHAUSTED``, ``SAFETY_BUDGET_DEPLETED``,
  ``IN_PROGRESS``.
- ``continuation_status(completeness, residual_empty, window_count, max_windows, mean_novelty_ratio,
  safety_budget=None) -> str`` (§6, in priority order).
- ``novelty_ratio(cdr_score, relevance, relevance_floor=0.30) -> NDArray`` (§6 Exit 3 / §8.1):
  ``CDR_score / relevance`` per envelope fact.
- ``mean_novelty_ratio(ratios) -> float`` (§6 Exit 3): 0.0 for an empty envelope.
- ``coverage_score_header(novelty_ratios) -> float | None`` (§8.1): the MINIMUM; None if no facts.
- ``depth_from_words(actual, expected) -> float`` (§3.2).
- ``report_depth(depth, words, expected_words) -> float`` (§3.1/§3.2): a report's depth for one sub-query.
- ``marginal_residual(best_similarity, min_relevance) -> NDArray[bool]`` (§6 Exit 1, §2.6).
- ``residual_done(marginal) -> bool`` (§6 Exit 1): empty, or only marginal items.
- ``serves_facts(status) -> bool`` (§6 Exit 3): an exhausted window's envelope carries no facts.
- ``ckf_exhausted_note(mean_ratio, withheld) -> str`` (§6 Exit 3): the exhausted envelope's note.
- ``is_terminal(status) -> bool`` (§6): every exit ends the session's window loop.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

COMPLETION_THRESHOLD = 0.92
CKF_EXHAUSTION_THRESHOLD = 0.15
SAFETY_BUDGET_FLOOR = 0.10
DEFAULT_MAX_WINDOWS = 5
MAX_DEPTH_WEIGHT = 0.90
DEFAULT_DEPTH = 0.5

TASK_COMPLETE = "task-complete"
LIMIT_REACHED = "limit-reached"
CKF_EXHAUSTED = "ckf-exhausted"
SAFETY_BUDGET_DEPLETED = "safety-budget-depleted"
IN_PROGRESS = "in-progress"


def continuation_status(
    completeness: float,
    residual_empty: bool,
    window_count: int,
    max_windows: int,
    mean_novelty_ratio: float,
    safety_budget: float | None = None,
) -> str:
    """SPEC-024 §6: the first exit that holds, in the seed's priority order, else ``in-progress``.

    1 task-complete: completeness >= 0.92 and the Residual Set is empty or holds only marginal items
    (``residual_done``); 2 limit-reached:
    window_count >= max_windows; 3 ckf-exhausted: mean novelty ratio < 0.15; 4 safety-budget-depleted:
    safety_budget <= 0.10 (no budget reported -> exit 4 cannot fire). ``window_count`` counts completed
    windows (the seed's loop checks after the window), so the window that reaches an exit reports it.
    """
    if completeness >= COMPLETION_THRESHOLD and residual_empty:
        return TASK_COMPLETE
    if window_count >= max_windows:
        return LIMIT_REACHED
    if mean_novelty_ratio < CKF_EXHAUSTION_THRESHOLD:
        return CKF_EXHAUSTED
    if safety_budget is not None and safety_budget <= SAFETY_BUDGET_FLOOR:
        return SAFETY_BUDGET_DEPLETED
    return IN_PROGRESS


def novelty_ratio(cdr_score: ArrayLike, relevance: ArrayLike, relevance_floor: float = 0.30) -> NDArray[np.float64]:
    """SPEC-024 §6 Exit 3 / §8.1: a fact's novelty ratio, ``CDR_score(fact) / relevance(fact, query)``.

    ``cdr_score`` is the fact's full CDR score (SPEC-027 §3.3: importance × max(relevance, pull) ×
    novelty × recency × (1 − ngram_penalty)), ``relevance`` its cosine to the query. The seed's
    envelope facts all have relevance >= 0.55 (§2.6); here a fact may enter through a sub-query's
    relevance or as a connector below the gate, so the divisor is floored at ``relevance_floor``,
    SPEC-025 §2.5's connector floor (0.30, or the model's calibrated counterpart): the least relevance
    the seeds credit any envelope fact with. Above the floor this is the seed's ratio exactly.
    """
    score = np.asarray(cdr_score, dtype=np.float64)
    rel = np.maximum(np.asarray(relevance, dtype=np.float64), relevance_floor)
    return np.asarray(score / rel, dtype=np.float64)


def mean_novelty_ratio(ratios: ArrayLike) -> float:
    """SPEC-024 §6 Exit 3: the mean ratio over the envelope; an empty envelope has nothing novel (0.0)."""
    v = np.asarray(ratios, dtype=np.float64).reshape(-1)
    return float(v.mean()) if v.size else 0.0


def coverage_score_header(novelty_ratios: ArrayLike) -> float | None:
    """SPEC-024 §8.1: CRP-Context-Coverage-Score = the MINIMUM (worst-case) ratio, not the mean.

    None when the envelope holds no facts (the header is then omitted).
    """
    v = np.asarray(novelty_ratios, dtype=np.float64).reshape(-1)
    return float(v.min()) if v.size else None


def depth_from_words(actual: int, expected: int | None) -> float:
    """SPEC-024 §3.2: depth weight from the word-count ratio actual / expected, capped at 0.90.

    The cap is the "thorough" level of the depth table and reproduces both seed examples
    (280 of 300 words -> 0.90, 60 of 300 -> 0.20). Without an expected count the seed's default
    depth 0.5 applies (``sub_query_depth.get(id, 0.5)``, §3.1).
    """
    if actual < 0:
        raise ValueError("actual word count must be >= 0")
    if expected is None or expected <= 0:
        return DEFAULT_DEPTH
    return min(actual / expected, MAX_DEPTH_WEIGHT)


def report_depth(depth: float | None, words: int | None, expected_words: int | None) -> float:
    """SPEC-024 §3.1/§3.2: the depth weight of one addressed sub-query in a window report.

    The DPE report's explicit ``depth`` wins; else DPE Stage 8's rule, the word-count ratio
    ``depth_from_words(words, expected_words)``; with neither the seed's ``sub_query_depth.get(id, 0.5)``.
    """
    if depth is not None:
        return float(depth)
    if words is None:
        return DEFAULT_DEPTH
    return depth_from_words(words, expected_words)


def marginal_residual(best_similarity: ArrayLike, min_relevance: float) -> NDArray[np.bool_]:
    """SPEC-024 §6 Exit 1 ("or contains only marginal items"): a residual sub-query is marginal when
    the best fact the fabric holds for it is below the relevance gate (§2.6).

    CDR can never put such a fact in an envelope (§7.1 drops it), so no further window can address
    the item: it is a knowledge gap (§10), not unfinished work. ``best_similarity`` is the cosine of
    each residual item's nearest live fact (``-inf`` or NaN when the fabric has none).
    """
    b = np.asarray(best_similarity, dtype=np.float64).reshape(-1)
    return np.asarray(~(np.nan_to_num(b, nan=-np.inf) >= min_relevance), dtype=np.bool_)


def residual_done(marginal: ArrayLike) -> bool:
    """SPEC-024 §6 Exit 1: the Residual Set is empty or contains only marginal items."""
    return bool(np.all(np.asarray(marginal, dtype=np.bool_)))


def serves_facts(status: str) -> bool:
    """SPEC-024 §6 Exit 3: on ckf-exhaustion "the gateway MUST stop": the window's envelope carries
    no facts (only the exhaustion signal: status, mode, onboarding hint, coverage score). Every other
    status serves the window's facts."""
    return status != CKF_EXHAUSTED


def ckf_exhausted_note(mean_ratio: float, withheld: int) -> str:
    """SPEC-024 §6 Exit 3: why an exhausted window's envelope is empty, in words an operator reads."""
    return (
        f"CKF-EXHAUSTED: mean novelty ratio {mean_ratio:.4f} < {CKF_EXHAUSTION_THRESHOLD} over the "
        f"{withheld} facts this window would have served; none is served and the session ends. "
        "Ingest more documents for continued quality."
    )


def is_terminal(status: str) -> bool:
    """SPEC-024 §6: the loop MUST terminate on any of the four exits; only in-progress continues."""
    return status in (TASK_COMPLETE, LIMIT_REACHED, CKF_EXHAUSTED, SAFETY_BUDGET_DEPLETED)
