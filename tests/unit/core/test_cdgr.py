"""SPEC-025 CDGR: seeding budget, graph expansion, bridge value, headers."""

from __future__ import annotations

import numpy as np
import pytest

from crp_stream.core.cdgr import (
    DEFAULT_CONNECTOR_BUDGET,
    DEFAULT_MAX_HOPS,
    MIN_CONNECTOR_RELEVANCE,
    anchor_seed_count,
    bridge_score_header,
    bridge_value,
    bridge_values,
    connector_slot_count,
    connectors_included_header,
    expand_connectors,
)


def graph(*edges: tuple[str, str, float]) -> dict[str, dict[str, float]]:
    adj: dict[str, dict[str, float]] = {}
    for a, b, w in edges:
        adj.setdefault(a, {})[b] = w
        adj.setdefault(b, {})[a] = w
    return adj


# SPEC-025 §4: A (new pod IPs) - B (selectors) - C (kube-proxy) - D (stale DNS); no A-D edge.
CHAIN = graph(("A", "B", 0.8), ("B", "C", 0.7), ("C", "D", 0.9))


def test_defaults() -> None:
    assert (DEFAULT_MAX_HOPS, DEFAULT_CONNECTOR_BUDGET, MIN_CONNECTOR_RELEVANCE) == (2, 0.30, 0.30)


def test_anchor_seed_count_is_floor_of_seventy_percent() -> None:
    assert anchor_seed_count(35) == 24  # floor(24.5)
    assert connector_slot_count(35) == 11
    assert anchor_seed_count(10) == 7  # 0.7 * 10 must not float-floor to 6
    assert anchor_seed_count(100) == 70
    assert anchor_seed_count(90) == 63  # (1 - 0.3) * 90 == 62.99999999999999 in floats
    assert anchor_seed_count(10, 0.0) == 10
    assert anchor_seed_count(10, 0.5) == 5
    assert anchor_seed_count(0) == 0
    assert anchor_seed_count(1) == 0


def test_anchor_seed_count_validation() -> None:
    with pytest.raises(ValueError):
        anchor_seed_count(10, 0.6)
    with pytest.raises(ValueError):
        anchor_seed_count(-1)


def test_expand_connectors_worked_example() -> None:
    # From anchors A and D, B (1 hop from A) and C (1 hop from D) are the candidates.
    assert expand_connectors(["A", "D"], CHAIN, max_hops=2) == {"B", "C"}
    assert expand_connectors(["A", "D"], CHAIN, max_hops=1) == {"B", "C"}
    assert expand_connectors(["A"], CHAIN, max_hops=1) == {"B"}
    assert expand_connectors(["A"], CHAIN, max_hops=2) == {"B", "C"}
    assert expand_connectors(["A"], CHAIN, max_hops=3) == {"B", "C", "D"}
    assert expand_connectors(["A"], CHAIN, max_hops=0) == set()


def test_expand_connectors_walks_through_anchors_and_ignores_unknown_nodes() -> None:
    adj = graph(("A", "D", 0.9), ("D", "X", 0.7))
    assert expand_connectors(["A", "D"], adj, max_hops=1) == {"X"}
    assert expand_connectors(["Z"], adj) == set()
    assert expand_connectors([], adj) == set()
    with pytest.raises(ValueError):
        expand_connectors(["A"], adj, max_hops=-1)


def test_empty_graph_degrades_to_cdr() -> None:
    # §6: no edges -> no connectors.
    assert expand_connectors(["A", "D"], {}) == set()
    assert bridge_value("B", ["A", "D"], {}) == (0.0, [])


def test_bridge_value_worked_example() -> None:
    vb, bridged_b = bridge_value("B", ["A", "D"], CHAIN)
    vc, bridged_c = bridge_value("C", ["A", "D"], CHAIN)
    # B touches A directly (0.8) and D via C (bottleneck min(0.7, 0.9) = 0.7): one bridged pair A-D.
    assert vb == pytest.approx(1 * (0.8 + 0.7) / 2)
    assert bridged_b == ["A", "D"]
    # C touches D directly (0.9) and A via B (min(0.7, 0.8) = 0.7).
    assert vc == pytest.approx(1 * (0.9 + 0.7) / 2)
    assert bridged_c == ["A", "D"]


def test_bridge_value_zero_when_anchors_already_linked() -> None:
    adj = graph(("A", "B", 0.8), ("B", "D", 0.8), ("A", "D", 0.9))
    assert bridge_value("B", ["A", "D"], adj) == (0.0, [])


def test_bridge_value_zero_when_fewer_than_two_anchors_touched() -> None:
    adj = graph(("A", "B", 0.8), ("B", "X", 0.8), ("X", "Y", 0.8), ("Y", "D", 0.8))
    assert bridge_value("B", ["A", "D"], adj) == (0.0, [])  # D is 3 hops from B


def test_bridge_value_counts_only_unlinked_pairs() -> None:
    # Hub H touches A, B, C directly; A-B linked, A-C and B-C not -> 2 bridged pairs.
    adj = graph(("H", "A", 0.9), ("H", "B", 0.6), ("H", "C", 0.9), ("A", "B", 0.7))
    value, bridged = bridge_value("H", ["C", "B", "A"], adj)
    # H->B: direct 0.6, but H-A-B has bottleneck min(0.9, 0.7) = 0.7, the stronger path.
    assert value == pytest.approx(2 * (0.9 + 0.7 + 0.9) / 3)
    assert bridged == ["A", "B", "C"]


def test_bridge_value_uses_strongest_short_path() -> None:
    # Direct edge 0.61 but a 2-hop path of (0.95, 0.9) -> strength 0.9.
    adj = graph(("K", "A", 0.61), ("K", "M", 0.95), ("M", "A", 0.9), ("K", "D", 0.8))
    value, _ = bridge_value("K", ["A", "D"], adj)
    assert value == pytest.approx((0.9 + 0.8) / 2)


def test_bridge_value_ignores_connector_listed_as_anchor() -> None:
    value, bridged = bridge_value("B", ["A", "B", "D"], CHAIN)
    assert bridged == ["A", "D"]
    assert value > 0.0


def test_bridge_values_batch_matches_single() -> None:
    values, bridged = bridge_values(["C", "B", "Q"], {"D", "A"}, CHAIN)
    single = [bridge_value(c, ["A", "D"], CHAIN)[0] for c in ("C", "B")]
    assert values.tolist() == [*single, 0.0]
    assert single[0] > 0.0 and single[1] > 0.0
    assert bridged == [["A", "D"], ["A", "D"], []]


def test_headers() -> None:
    assert connectors_included_header(6, 35) == "6/35"
    assert bridge_score_header([2.1, 1.8]) == pytest.approx(1.95)
    assert bridge_score_header([]) == 0.0


def test_vectorised_bridge_values_equal_the_rule_on_random_graphs() -> None:
    """``bridge_values`` must be ``bridge_value`` applied one by one (SPEC-025 §2.4)."""
    import random

    from crp_stream.core.cdgr import bridge_value, bridge_values

    rng = random.Random(11)
    for _trial in range(30):
        nodes = [f"n{i:02d}" for i in range(rng.randint(4, 40))]
        adj: dict[str, dict[str, float]] = {}
        for a in nodes:
            for b in rng.sample(nodes, rng.randint(0, 5)):
                if a != b:
                    w = round(rng.uniform(0.6, 1.0), 3)
                    adj.setdefault(a, {})[b] = w
                    adj.setdefault(b, {})[a] = w
        anchors = rng.sample(nodes, rng.randint(2, min(8, len(nodes))))
        cands = [x for x in nodes if x not in anchors]
        got, got_bridged = bridge_values(cands, anchors, adj, chunk=7)
        for i, c in enumerate(cands):
            want, want_bridged = bridge_value(c, anchors, adj)
            assert abs(got[i] - want) < 1e-9, (c, got[i], want)
            assert got_bridged[i] == want_bridged


def test_edge_list_rules_equal_the_mapping_rules_bit_for_bit() -> None:
    """``graph_rank.walk_levels`` / ``bridge_values_edges`` on the edges assembly loads (every edge of
    the anchors and of their neighbours) give exactly ``expand_connectors`` / ``bridge_values``."""
    import random

    from crp_stream.core.cdgr import bridge_values_edges
    from crp_stream.core.graph_rank import walk_levels

    rng = random.Random(5)
    for trial in range(60):
        nodes = [f"n{i:03d}" for i in range(rng.randint(3, 120))]
        adj: dict[str, dict[str, float]] = {}
        for a in nodes:
            for b in rng.sample(nodes, rng.randint(0, 6)):
                if a != b:
                    w = round(rng.uniform(0.45, 1.0), 6)
                    adj.setdefault(a, {})[b] = w
                    adj.setdefault(b, {})[a] = w
        anchors = rng.sample(nodes, rng.randint(1, min(30, len(nodes))))
        ints = {f: i for i, f in enumerate(rng.sample(nodes, len(nodes)))}  # ints unrelated to id order
        level1 = {x for a in anchors for x in adj.get(a, {})}
        rows = sorted(set(anchors) | level1, key=lambda f: ints[f])
        src = [ints[f] for f in rows for _x in adj.get(f, {})]
        dst = [ints[x] for f in rows for x in adj.get(f, {})]
        wts = [adj[f][x] for f in rows for x in adj.get(f, {})]
        hops = trial % 3
        names = {i: f for f, i in ints.items()}
        level, _depth = walk_levels([ints[a] for a in anchors], src, dst, hops)
        got = {names[i] for i in np.flatnonzero(level > 0).tolist()}
        assert got == expand_connectors(anchors, adj, hops)
        found = sorted(expand_connectors(anchors, adj, 2)) + rng.sample(nodes, min(3, len(nodes)))
        cols = sorted(set(anchors))
        want, want_bridged = bridge_values(found, anchors, adj, chunk=5)
        values, bridged = bridge_values_edges([ints[f] for f in found], [ints[a] for a in cols], src, dst, wts, chunk=5)
        assert values.tolist() == want.tolist()  # bit for bit, not approximately
        assert [[cols[j] for j in np.flatnonzero(b)] for b in bridged] == want_bridged


# --- SPEC-025 §2.4-§2.6 as the seed writes them ----------------------------------------------------------


def test_a_structure_edge_is_an_extra_path_and_never_a_direct_connection() -> None:
    """§2.4 over §1.3's CKF graph: A and D are directly connected only by a similarity edge. An
    adjacency edge A-D (one document) does not cancel B's bridge; an adjacency edge B-D lets B touch
    D with one edge (a path) where the similarity graph needs two."""
    typed = graph(("A", "B", 0.8), ("B", "C", 0.7), ("C", "D", 0.9), ("A", "D", 1.0), ("B", "D", 1.0))
    sim = CHAIN
    value, bridged = bridge_value("B", ["A", "D"], typed, direct=sim)
    assert bridged == ["A", "D"]
    assert value == pytest.approx(1.0)  # one pair; the strongest paths: B-D and B-D-A (1.0 each)
    assert bridge_value("B", ["A", "D"], typed) == (0.0, [])  # were A-D a direct link, no bridge


def test_typed_bridge_values_prefer_the_similarity_graph_and_mark_extra_bridges() -> None:
    from crp_stream.core.cdgr import typed_bridge_values

    # ints: A=0, B=1, C=2, D=3, X=4. Similarity chain A-B-C-D; X is linked to A and D by adjacency only.
    sim_edges = [(0, 1, 0.8), (1, 2, 0.7), (2, 3, 0.9)]
    struct = [(4, 0, 1.0), (4, 3, 1.0), (0, 3, 1.0)]
    both = [(a, b, w, k) for a, b, w in sim_edges for k in (True,)] + [(a, b, w, False) for a, b, w in struct]
    src = [a for a, b, _w, _k in both] + [b for a, b, _w, _k in both]
    dst = [b for a, b, _w, _k in both] + [a for a, b, _w, _k in both]
    wts = [w for *_x, w, _k in both] * 2
    kinds = [k for *_x, k in both] * 2
    values, bridged, extra = typed_bridge_values([1, 2, 4], [0, 3], src, dst, wts, kinds)
    assert values.tolist() == pytest.approx([(0.8 + 0.7) / 2, (0.7 + 0.9) / 2, 1.0])
    assert bridged.tolist() == [[True, True]] * 3
    assert extra.tolist() == [False, False, True]  # X bridges A-D only through structure edges


def test_connector_score_is_bridge_times_novelty_recency_and_floored_relevance() -> None:
    from crp_stream.core.cdgr import connector_score

    got = connector_score([2.1, 1.8, 0.0], [1.0, 0.5, 1.0], [1.0, 0.3, 1.0], [0.61, 0.10, 0.90])
    assert got.tolist() == pytest.approx([2.1 * 0.61, 1.8 * 0.5 * 0.3 * 0.30, 0.0])
    assert connector_score([1.0], [1.0], [1.0], [0.1], min_connector_relevance=0.2).tolist() == [0.2]


def test_admission_takes_the_top_c_above_zero_and_extra_paths_last() -> None:
    from crp_stream.core.cdgr import admit_connectors

    assert admit_connectors([0.4, 0.0, 0.9, 0.4], 3) == [2, 0, 3]  # ties by position; zero stays out
    assert admit_connectors([0.0, 0.0], 2) == []
    assert admit_connectors([0.3, 0.2], 0) == []
    assert admit_connectors([0.9, 0.2, 0.1], 2, extra=[True, False, False]) == [1, 2]
    assert admit_connectors([0.9, 0.2], 2, extra=[True, False]) == [1, 0]


def test_slots_no_connector_fills_go_back_to_the_cdr_anchors() -> None:
    from crp_stream.core.cdgr import refill_anchors

    order = [10, 11, 12, 13, 14, 15, 16]
    assert refill_anchors(order, 4, [14], 6) == [10, 11, 12, 13, 15]  # 4 seeds, 1 connector, 1 refill
    assert refill_anchors(order, 4, [], 6) == [10, 11, 12, 13, 14, 15]  # no connector: CDR's envelope
    assert refill_anchors(order, 4, [20, 21], 6) == [10, 11, 12, 13]
    assert refill_anchors(order[:3], 4, [], 6) == [10, 11, 12]


def test_typed_edge_lists_equal_the_mapping_rule_with_a_direct_graph() -> None:
    """``bridge_values_edges(direct=...)`` on a graph with two edge kinds equals ``bridge_values``
    with ``direct`` the similarity mapping and paths over the strongest edge of each pair."""
    import random

    from crp_stream.core.cdgr import bridge_values_edges

    rng = random.Random(9)
    for _trial in range(40):
        nodes = [f"n{i:03d}" for i in range(rng.randint(3, 60))]
        sim: dict[str, dict[str, float]] = {}
        every: dict[str, dict[str, float]] = {}
        edges: list[tuple[int, int, float, bool]] = []
        ints = {f: i for i, f in enumerate(nodes)}
        for a in nodes:
            for b in rng.sample(nodes, rng.randint(0, 4)):
                if a == b or b in every.get(a, {}):
                    continue
                is_sim = rng.random() < 0.6
                w = round(rng.uniform(0.45, 1.0), 6) if is_sim else 1.0
                for x, y in ((a, b), (b, a)):
                    every.setdefault(x, {})[y] = w
                    if is_sim:
                        sim.setdefault(x, {})[y] = w
                    edges.append((ints[x], ints[y], w, is_sim))
        anchors = rng.sample(nodes, rng.randint(1, min(12, len(nodes))))
        cols = sorted(set(anchors))
        found = [f for f in nodes if f not in anchors]
        want, want_bridged = bridge_values(found, anchors, every, direct=sim)
        src, dst, wts, kinds = (list(x) for x in zip(*edges, strict=True)) if edges else ([], [], [], [])
        values, bridged = bridge_values_edges(
            [ints[f] for f in found], [ints[a] for a in cols], src, dst, wts, direct=kinds
        )
        assert values.tolist() == pytest.approx(want.tolist(), abs=1e-12)
        assert [[cols[j] for j in np.flatnonzero(b)] for b in bridged] == want_bridged


def test_connectors_equal_by_the_rule_tie_by_position_whatever_their_last_bits() -> None:
    from crp_stream.core.cdgr import admit_connectors

    # 0.7 x 0.4 computed two ways: 0.27999999999999997 and 0.28 (a symmetric chain's two connectors)
    noisy = [0.7 * 0.4, 0.28, 0.1]
    assert noisy[0] != noisy[1]
    assert admit_connectors(noisy, 3) == [0, 1, 2]
    assert admit_connectors([noisy[1], noisy[0], 0.1], 3) == [0, 1, 2]
    assert admit_connectors([0.2800001, 0.28, 0.1], 3) == [0, 1, 2]  # a real difference still ranks
    assert admit_connectors([0.28, 0.2800001, 0.1], 3) == [1, 0, 2]
