"""``cdgr.bridge_values_edges`` equals the mapping rule bit for bit, with every weight positive and
with zero weights among them."""

from __future__ import annotations

import random

import numpy as np

from crp_stream.core.cdgr import bridge_values, bridge_values_edges


def _graph(rng: random.Random, weights: list[float]) -> tuple[list[str], dict[str, dict[str, float]]]:
    nodes = [f"n{i:03d}" for i in range(rng.randint(3, 90))]
    adj: dict[str, dict[str, float]] = {}
    for a in nodes:
        for b in rng.sample(nodes, rng.randint(0, min(6, len(nodes)))):
            if a != b:
                w = rng.choice(weights) if weights else round(rng.uniform(0.45, 1.0), 6)
                adj.setdefault(a, {})[b] = w
                adj.setdefault(b, {})[a] = w
    return nodes, adj


def _both(nodes: list[str], adj: dict[str, dict[str, float]], rng: random.Random) -> None:
    anchors = rng.sample(nodes, rng.randint(2, min(20, len(nodes))))
    ints = {f: i for i, f in enumerate(rng.sample(nodes, len(nodes)))}
    rows = sorted(ints, key=ints.__getitem__)
    src = [ints[f] for f in rows for _x in adj.get(f, {})]
    dst = [ints[x] for f in rows for x in adj.get(f, {})]
    wts = [adj[f][x] for f in rows for x in adj.get(f, {})]
    found = [f for f in nodes if f not in anchors] + rng.sample(anchors, 1)
    cols = sorted(set(anchors))
    want, want_bridged = bridge_values(found, anchors, adj, chunk=4)
    for chunk in (3, 1024):
        values, bridged = bridge_values_edges([ints[f] for f in found], [ints[a] for a in cols], src, dst, wts, chunk)
        assert values.tolist() == want.tolist()
        assert [[cols[j] for j in np.flatnonzero(b)] for b in bridged] == want_bridged


def test_positive_weights_listed_by_cell() -> None:
    rng = random.Random(21)
    for _ in range(80):
        _both(*_graph(rng, []), rng)


def test_a_zero_weight_takes_the_dense_rows() -> None:
    rng = random.Random(22)
    for _ in range(60):
        _both(*_graph(rng, [0.0, 0.5, 0.7, 0.7, 0.9, 1.0]), rng)
