"""Threshold calibration onto a fabric's own similarity distribution."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from crp_stream.core.calibration import (
    Thresholds,
    background_similarity,
    calibrate_thresholds,
    rescale_threshold,
)


def test_seed_defaults() -> None:
    t = Thresholds()
    assert dataclasses.asdict(t) == {
        "min_relevance": 0.55,
        "edge_threshold": 0.60,
        "edge_k": 20,
        "contradiction_threshold": 0.85,
        "min_connector_relevance": 0.30,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.edge_k = 5  # type: ignore[misc]


def test_background_is_clipped_median() -> None:
    assert background_similarity([0.1, 0.5, 0.3]) == pytest.approx(0.3)
    assert background_similarity([-0.4, -0.2, 0.0]) == 0.0
    assert background_similarity([0.99, 0.99]) == 0.95
    assert background_similarity([]) == 0.0
    assert background_similarity([np.nan, 0.2, np.inf]) == pytest.approx(0.2)


def test_background_of_square_matrix_uses_upper_triangle() -> None:
    m = np.array([[1.0, 0.2, 0.4], [0.2, 1.0, 0.6], [0.4, 0.6, 1.0]])
    assert background_similarity(m) == pytest.approx(0.4)


def test_rescale() -> None:
    assert rescale_threshold(0.55, 0.0) == 0.55
    assert rescale_threshold(0.60, 0.5) == pytest.approx(0.80)
    assert rescale_threshold(0.0, 0.3) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        rescale_threshold(0.5, 1.0)


def test_isotropic_fabric_keeps_seed_values() -> None:
    rng = np.random.default_rng(1)
    v = rng.normal(size=(200, 64))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    sims = v @ v.T
    t = calibrate_thresholds(sims)
    assert t.min_relevance == pytest.approx(0.55, abs=0.01)
    assert t.edge_threshold == pytest.approx(0.60, abs=0.01)
    assert t.contradiction_threshold == pytest.approx(0.85, abs=0.01)
    assert t.edge_k == 20


def test_anisotropic_fabric_raises_thresholds_in_order() -> None:
    t = calibrate_thresholds(np.full(100, 0.5))
    assert t.min_relevance == pytest.approx(0.775)
    assert t.edge_threshold == pytest.approx(0.80)
    assert t.contradiction_threshold == pytest.approx(0.925)
    assert t.min_connector_relevance == pytest.approx(0.65)
    assert t.min_connector_relevance < t.min_relevance < t.edge_threshold < t.contradiction_threshold < 1.0


def test_query_background_drives_relevance_thresholds_only() -> None:
    t = calibrate_thresholds(np.full(10, 0.5), query_relevances=np.full(10, 0.2))
    assert t.min_relevance == pytest.approx(0.2 + 0.55 * 0.8)
    assert t.min_connector_relevance == pytest.approx(0.2 + 0.30 * 0.8)
    assert t.edge_threshold == pytest.approx(0.80)
    empty_q = calibrate_thresholds(np.full(10, 0.5), query_relevances=[])
    assert empty_q.min_relevance == pytest.approx(0.775)


def test_empty_sample_gives_seed_defaults() -> None:
    assert calibrate_thresholds([]) == Thresholds()
