"""The hashed n-gram screen keeps a frozen blacklist's table between calls; a mutable set's is
built each time. Either way the counts are ``ngram_overlaps``'."""

from __future__ import annotations

import numpy as np
import pytest

from crp_stream.core import ngram


@pytest.mark.parametrize("seed", range(3))
def test_frozen_and_mutable_blacklists_count_alike(seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = ["a", "b", "c", "d", "Ünï", "x1", "y"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 12)))) for _ in range(150)]
    frozen = ngram.update_ngram_blacklist(frozenset(), " ".join(texts[:5]))
    hashes = [ngram.gram_hash_array(t) for t in texts]
    want = ngram.ngram_overlaps(texts, frozen)
    assert 0 < sum(map(bool, want)) < len(texts)
    for _ in range(2):  # the second call reads the remembered table
        assert ngram.ngram_overlaps_hashed(texts, hashes, frozen) == want
    assert ngram.ngram_overlaps_hashed(texts, hashes, set(frozen)) == want
    table = ngram._frozen_table(frozen)
    assert not table.flags.writeable
    assert np.array_equal(table, ngram._screen_table(set(frozen)))
