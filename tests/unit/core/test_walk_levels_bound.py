"""``graph_select.walk`` reads the facts within ``below - 1`` hops from the walk of ``max_hops``
when that walk goes as far: breadth-first levels below a bound are the same walked further."""

from __future__ import annotations

import numpy as np

from crp_stream.core.graph_rank import walk_levels


def test_a_shorter_walk_is_a_prefix_of_a_longer_one() -> None:
    rng = np.random.default_rng(8)
    for _ in range(200):
        n = int(rng.integers(2, 60))
        e = int(rng.integers(0, 4 * n))
        src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
        src, dst = np.r_[src, dst], np.r_[dst, src]  # symmetric, as the fabric's edges
        seeds = rng.choice(n, size=int(rng.integers(1, min(n, 3) + 1)), replace=False)
        for short in range(4):
            for long in range(short, 4):
                near, _ = walk_levels(seeds, src, dst, short)
                level, _ = walk_levels(seeds, src, dst, long)
                assert near.shape == level.shape
                assert ((level >= 0) & (level <= short)).tolist() == (near >= 0).tolist()
                assert np.array_equal(np.where(level <= short, level, -1), near)
