"""SPEC-003 sandwich packing, SPEC-025 §2.6 connector placement, SPEC-024 §4.2 residual anchor."""

from __future__ import annotations

import pytest

from crp_stream.core.packing import pack_envelope, place_connectors, residual_task_anchor, sandwich_order


def test_sandwich_best_first_second_last_alternating_inward() -> None:
    scores = [0.5, 0.9, 0.1, 0.7, 0.3]  # ranks: 1 (0.9), 3 (0.7), 0 (0.5), 4 (0.3), 2 (0.1)
    assert sandwich_order(scores) == [1, 0, 2, 4, 3]


def test_sandwich_small_and_ties() -> None:
    assert sandwich_order([]) == []
    assert sandwich_order([0.4]) == [0]
    assert sandwich_order([0.2, 0.8]) == [1, 0]
    assert sandwich_order([0.5, 0.5, 0.5, 0.5]) == [0, 2, 3, 1]


def test_sandwich_six() -> None:
    order = sandwich_order([6, 5, 4, 3, 2, 1])
    assert order == [0, 2, 4, 5, 3, 1]
    assert order[0] == 0 and order[-1] == 1


def test_worked_example_a_b_c_d() -> None:
    # SPEC-025 §4: anchors A (CDR .81) and D (.77); B (edge to A) and C (edge to D) bridge them.
    adj = {"B": {"A": 0.8, "C": 0.7}, "C": {"B": 0.7, "D": 0.9}}
    connectors = [("C", ["A", "D"]), ("B", ["A", "D"])]
    assert pack_envelope(["A", "D"], [0.81, 0.77], connectors, adj) == ["A", "B", "C", "D"]
    # Without weights, connectors sharing a gap keep their input order.
    assert place_connectors(["A", "D"], connectors) == ["A", "C", "B", "D"]


def test_connector_between_its_anchors_adjacent_never_at_ends() -> None:
    order = ["A1", "A2", "A3", "A4", "A5"]
    out = place_connectors(order, [("X", ["A4", "A5"]), ("Y", ["A1"]), ("Z", ["A5"])])
    assert out == ["A1", "Y", "A2", "A3", "A4", "X", "Z", "A5"]
    assert out[0] == "A1" and out[-1] == "A5"


def test_connector_prefers_gap_touching_two_bridged_anchors() -> None:
    order = ["A", "B", "C", "D"]
    # Bridges A, C, D: the gap C|D touches two of them; A|B or B|C touch at most one.
    assert place_connectors(order, [("X", ["D", "A", "C"])]) == ["A", "B", "C", "X", "D"]
    # Bridges A and D only: no gap touches both; the leftmost gap adjacent to one is used.
    assert place_connectors(order, [("X", ["A", "D"])]) == ["A", "X", "B", "C", "D"]


def test_connector_with_unknown_anchors_goes_to_the_middle() -> None:
    assert place_connectors(["A", "B", "C", "D"], [("X", ["Q"])]) == ["A", "B", "X", "C", "D"]


def test_degenerate_and_invalid() -> None:
    assert place_connectors(["A"], [("X", ["A"])]) == ["A", "X"]
    assert place_connectors([], [("X", [])]) == ["X"]
    assert place_connectors(["A", "B"], []) == ["A", "B"]
    with pytest.raises(ValueError):
        place_connectors(["A", "B"], [("A", ["B"])])
    with pytest.raises(ValueError):
        place_connectors(["A", "B"], [("X", ["A"]), ("X", ["B"])])


def test_residual_task_anchor_exact_text() -> None:
    assert residual_task_anchor(["eBPF dataplanes", "BGP integration"]) == (
        "Remaining sections to complete: eBPF dataplanes, BGP integration"
    )
    assert residual_task_anchor(["a"]) == "Remaining sections to complete: a"
    assert residual_task_anchor([]) == "Remaining sections to complete: "


def test_backward_summary_lists_every_window_it_covered() -> None:
    from crp_stream.core.packing import backward_summary

    assert backward_summary([]) == "Previously covered: "
    got = backward_summary([(1, "Section 1"), (2, "Section 2"), (2, "Section 3"), (2, "Section 2"), (3, "Section 1")])
    assert got == "Previously covered: window 1: Section 1; window 2: Section 2, Section 3; window 3: Section 1"
