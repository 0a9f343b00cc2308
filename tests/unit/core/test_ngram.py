"""SPEC-024 §5: the 6-gram output guard."""

from __future__ import annotations

import numpy as np
import pytest

from crp_stream.core.ngram import (
    NGRAM_N,
    ngram_guard_activations,
    ngram_overlap,
    ngram_penalty,
    ngrams,
    tokenize,
    update_ngram_blacklist,
)


def test_tokenize_lowercases_unicode_words() -> None:
    assert tokenize("Kube-Proxy manages Service routing; Ünïcode ok!") == [
        "kube",
        "proxy",
        "manages",
        "service",
        "routing",
        "ünïcode",
        "ok",
    ]
    assert tokenize("") == []


def test_ngrams_six_default_space_joined() -> None:
    toks = ["a", "b", "c", "d", "e", "f", "g"]
    assert NGRAM_N == 6
    assert ngrams(toks) == {"a b c d e f", "b c d e f g"}
    assert ngrams(toks[:5]) == set()
    assert ngrams(toks, n=2) == {"a b", "b c", "c d", "d e", "e f", "f g"}
    with pytest.raises(ValueError):
        ngrams(toks, n=0)


def test_update_blacklist_is_pure_union() -> None:
    start = frozenset({"x y z w v u"})
    out = update_ngram_blacklist(start, "one two three four five six seven")
    assert out == {"x y z w v u", "one two three four five six", "two three four five six seven"}
    assert start == frozenset({"x y z w v u"})


def test_overlap_counts_distinct_matching_ngrams() -> None:
    bl = update_ngram_blacklist(frozenset(), "Kubernetes uses a flat network model for all pods")
    assert ngram_overlap("kubernetes USES a flat network model.", bl) == 1
    assert ngram_overlap("Kubernetes uses a flat network model for all pods", bl) == 4
    assert ngram_overlap("completely different words in this fact here", bl) == 0
    assert ngram_overlap("anything", frozenset()) == 0


def test_penalty_is_015_per_match_capped_at_080() -> None:
    got = ngram_penalty(np.array([0, 1, 2, 5, 6, 100]))
    np.testing.assert_allclose(got, [0.0, 0.15, 0.30, 0.75, 0.80, 0.80])
    assert float(ngram_penalty(3)) == pytest.approx(0.45)


def test_penalty_rejects_negative_counts() -> None:
    with pytest.raises(ValueError):
        ngram_penalty([-1])


def test_guard_activations_counts_penalised_candidates() -> None:
    assert ngram_guard_activations(ngram_penalty([0, 0, 1, 7])) == 2
    assert ngram_guard_activations([]) == 0


def test_ngram_overlaps_equal_ngram_overlap_text_by_text() -> None:
    import random

    from crp_stream.core.ngram import ngram_overlap, ngram_overlaps, update_ngram_blacklist

    rng = random.Random(2)
    words = [
        "the",
        "pod",
        "ip",
        "changes",
        "when",
        "a",
        "node",
        "restarts",
        "and",
        "dns",
        "caches",
        "stale",
        "records",
        "for",
        "minutes",
    ]

    def text(k: int) -> str:
        return " ".join(rng.choice(words) for _ in range(k)) + rng.choice([".", "!", ""])

    for n in (1, 2, 6):
        bl = frozenset()
        for _ in range(4):
            bl = update_ngram_blacklist(bl, text(40), n)
        texts = [text(rng.randint(0, 30)) for _ in range(200)]
        assert ngram_overlaps(texts, bl, n) == [ngram_overlap(t, bl, n) for t in texts]
        assert ngram_overlaps(texts, frozenset(), n) == [0] * 200


def test_guard_diagnostic_only_above_twenty_percent() -> None:
    """SPEC-024 §5.3: > 20% of the retrieved facts penalised -> the operator diagnostic."""
    from crp_stream.core.ngram import ngram_guard_diagnostic

    assert ngram_guard_diagnostic(2, 10) is None  # exactly 20%: not more than
    note = ngram_guard_diagnostic(3, 10)
    assert note is not None and "3 of 10" in note and "30%" in note and "SPEC-024 §5.3" in note
    assert ngram_guard_diagnostic(0, 0) is None
