"""fabric.vectors.port.rank: the port's deterministic order (-score, fact_id), ties included."""

from __future__ import annotations

import random

from crp_stream.fabric.vectors.port import SCORE_DECIMALS, rank


def test_rank_orders_by_rounded_score_then_id_as_the_single_key_sort() -> None:
    rng = random.Random(3)
    for _ in range(300):
        hits = [(f"f{rng.randrange(50):02d}", rng.choice([0.5, 0.25, -0.0, 0.0, rng.random()])) for _ in range(40)]
        want = sorted(((f, round(s, SCORE_DECIMALS)) for f, s in hits), key=lambda h: (-h[1], h[0]))
        assert rank(hits) == want
