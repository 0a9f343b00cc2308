"""The vectorised near-copy screen (core.near_copies) agrees with the scalar rules."""

from __future__ import annotations

import random

from crp_stream.core import copied_statements, near_copies, substitution

NORWAY = "Norway collected 39 medals in 2018, the largest haul by any country in a single Winter Olympics."
_WORDS = [
    "the",
    "a",
    "of",
    "Norway",
    "U.S.",
    "Apple",
    "Facebook",
    "acquired",
    "won",
    "39",
    "40",
    "medals",
    "in",
    "2018",
    "is",
    "not",
    "was",
    "largest",
    "team",
    "city",
]


def _case(rng: random.Random) -> tuple[list[str], list[str], list[bool]]:
    n = rng.randint(0, 24)
    base = [rng.choice(_WORDS) for _ in range(rng.randint(1, 12))]
    texts = []
    for _ in range(n):
        words = list(base) if rng.random() < 0.7 else [rng.choice(_WORDS) for _ in range(rng.randint(0, 12))]
        for _ in range(rng.randint(0, 3)):  # a few edits: near-copies and swapped spans
            if words:
                words[rng.randrange(len(words))] = rng.choice(_WORDS)
        texts.append(" ".join(words) + rng.choice(["", ".", "!"]))
    if n and rng.random() < 0.3:
        texts[0] = NORWAY
        texts[-1] = NORWAY.replace("Norway", "U.S.")
    sources = [rng.choice(["official", "community", "news", ""]) for _ in range(n)]
    keep = [rng.random() < 0.4 for _ in range(n)]
    return texts, sources, keep


def test_near_copy_pairs_agrees_with_the_scalar_rule_on_random_sets() -> None:
    rng = random.Random(14)
    hits = 0
    for _ in range(600):
        texts, sources, _keep = _case(rng)
        inside = rng.choice([None, 0, 1, len(texts) // 2, len(texts) + 3])
        for overlap in (substitution.NEAR_COPY, 0.3, 0.8):
            want = substitution.near_copy_pairs(texts, sources, inside, overlap)
            assert near_copies.near_copy_pairs(texts, sources, inside, overlap) == want
            hits += len(want)
    assert hits > 1000  # the cases do hold near-copies


def test_admit_copies_agrees_with_the_scalar_rule_on_random_sets() -> None:
    rng = random.Random(27)
    admitted = 0
    for _ in range(600):
        texts, sources, keep = _case(rng)
        want = copied_statements.admit_copies(texts, sources, keep)
        assert near_copies.admit_copies(texts, sources, keep) == want
        admitted += sum(want) - sum(keep)
    assert admitted > 20  # some dropped copies were admitted


def test_near_copy_matrix_is_the_pairwise_screen() -> None:
    texts = [NORWAY, NORWAY.replace("Norway", "U.S."), "Paris is the capital of France.", ""]
    m = near_copies.near_copy_matrix(texts, [0, 1, 2, 3], [0, 1, 2, 3])
    want = [[substitution.near_copy(a, b) for b in texts] for a in texts]
    assert m.tolist() == want and m[0, 1] and not m[0, 2] and not m[3, 3]


def test_near_copy_pairs_agrees_when_tokens_share_hashes(monkeypatch: object) -> None:
    """Colliding token hashes make the counts too high: the pairs are then decided on the token sets."""
    import numpy as np
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)

    def few_hashes(text: str) -> np.ndarray:  # 3 hash values for all tokens: collisions everywhere
        return np.unique(np.fromiter((len(t) % 3 for t in substitution._token_set(text)), dtype=np.int64))

    monkeypatch.setattr(near_copies, "_token_hashes", few_hashes)
    rng = random.Random(41)
    hits = 0
    for _ in range(300):
        texts, sources, keep = _case(rng)
        for overlap in (substitution.NEAR_COPY, 0.3):
            want = substitution.near_copy_pairs(texts, sources, None, overlap)
            assert near_copies.near_copy_pairs(texts, sources, None, overlap) == want
            hits += len(want)
        assert near_copies.admit_copies(texts, sources, keep) == copied_statements.admit_copies(texts, sources, keep)
    assert hits > 300
