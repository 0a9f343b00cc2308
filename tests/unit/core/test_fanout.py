"""SPEC-027 §1: disjoint coverage partitions and shared-fact ownership."""

from __future__ import annotations

import numpy as np
import pytest

from crp_stream.core.fanout import (
    assign_shared_facts,
    coverage_partitions_header,
    partition_residual_for_fanout,
)


def normed(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def three_topics() -> np.ndarray:
    rng = np.random.default_rng(3)
    centres = np.eye(3, 8)
    rows = [centres[t] + rng.normal(scale=0.05, size=8) for t in (0, 1, 2, 0, 1, 2, 0, 1, 2)]
    return normed(np.array(rows)).astype(np.float32)


def test_fewer_sub_queries_than_branches_one_each() -> None:
    emb = three_topics()[:2]
    assert partition_residual_for_fanout(emb, 3) == [[0], [1]]
    assert partition_residual_for_fanout(three_topics()[:3], 3) == [[0], [1], [2]]


def test_empty_residual_and_bad_k() -> None:
    assert partition_residual_for_fanout(np.zeros((0, 8)), 2) == []
    with pytest.raises(ValueError):
        partition_residual_for_fanout(three_topics(), 0)


def test_clusters_are_thematic_disjoint_and_cover_everything() -> None:
    parts = partition_residual_for_fanout(three_topics(), 3)
    assert parts == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    flat = sorted(i for p in parts for i in p)
    assert flat == list(range(9))


def test_single_branch_is_one_partition() -> None:
    # SPEC-027 §5: a non-decomposable task gives one partition (sequential behaviour).
    assert partition_residual_for_fanout(three_topics(), 1) == [list(range(9))]


def test_deterministic_and_independent_of_input_dtype() -> None:
    emb = three_topics()
    a = partition_residual_for_fanout(emb, 2)
    b = partition_residual_for_fanout(emb.astype(np.float64), 2)
    assert a == b
    assert len(a) == 2 and all(a)


def test_duplicates_never_leave_a_partition_empty() -> None:
    emb = np.tile(np.array([[1.0, 0.0]]), (5, 1))
    parts = partition_residual_for_fanout(emb, 3)
    assert len(parts) == 3
    assert all(len(p) >= 1 for p in parts)
    assert sorted(i for p in parts for i in p) == list(range(5))


def test_farthest_point_seed_starts_at_index_zero() -> None:
    # Two tight pairs far apart; index 0 seeds the first cluster, its farthest point the second.
    emb = normed(np.array([[1.0, 0.01], [0.0, 1.0], [1.0, 0.02], [0.01, 1.0]]))
    assert partition_residual_for_fanout(emb, 2) == [[0, 2], [1, 3]]


def test_seed_from_index_zero_and_ties_to_lowest_centre() -> None:
    # 1-D: seeds x=5 (index 0) and its farthest point x=1; the 3s are equidistant from both seeds and
    # go to the lower centre index. Seeding from index 1 instead would give [[0], [1, 2, 3, 4]].
    pts = np.array([[5.0], [3.0], [3.0], [1.0], [1.0]])
    assert partition_residual_for_fanout(pts, 2) == [[0, 1, 2], [3, 4]]


def test_assign_shared_facts_highest_score_wins_lowest_branch_on_ties() -> None:
    inf = -np.inf
    scores = np.array(
        [
            [0.9, 0.5, inf, 0.4, inf],
            [0.8, 0.7, 0.3, 0.4, inf],
            [inf, 0.7, inf, 0.1, inf],
        ]
    )
    owner = assign_shared_facts(scores)
    assert owner.tolist() == [0, 1, 1, 0, -1]
    assert owner.dtype == np.int64


def test_assign_shared_facts_nan_is_absent_and_shape_checked() -> None:
    assert assign_shared_facts([[np.nan, 0.2], [0.1, np.nan]]).tolist() == [1, 0]
    assert assign_shared_facts(np.zeros((0, 3))).tolist() == [-1, -1, -1]
    with pytest.raises(ValueError):
        assign_shared_facts([0.1, 0.2])


def test_partitions_header() -> None:
    assert coverage_partitions_header([[0, 3], [1], [2]]) == 3
