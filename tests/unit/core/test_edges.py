"""core.edges: each fact keeps its K strongest edges (SPEC-025 §1.3), against a plain sort."""

from __future__ import annotations

import random

import pytest

from crp_stream.core.edges import edges_past_k


@pytest.mark.parametrize("seed", range(20))
def test_edges_past_k_matches_a_sort_per_source(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [f"{rng.getrandbits(32):08x}" for _ in range(rng.randint(1, 40))]
    src, dst, weight = [], [], []
    for a in nodes:
        for b in rng.sample(nodes, rng.randint(0, len(nodes))):
            src.append(a)
            dst.append(b)
            weight.append(rng.choice([0.5, 0.61, 0.7, 0.7, 0.93, rng.random()]))  # ties on purpose
    k = rng.randint(0, 8)
    want = []
    for s in sorted(set(src)):
        ranked = sorted((-weight[i], dst[i], i) for i in range(len(src)) if src[i] == s)
        want += [i for _w, _d, i in ranked[k:]]
    assert edges_past_k(src, dst, weight, k) == want


def test_edges_past_k_of_nothing_and_a_bad_k() -> None:
    assert edges_past_k([], [], [], 3) == []
    with pytest.raises(ValueError, match="k must be"):
        edges_past_k(["a"], ["b"], [0.7], -1)
