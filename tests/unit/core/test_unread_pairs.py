"""Copies the text rules cannot read (``core.unread_pairs``): contested, never arbitrated.

The positive cases are the held-out misses of ``ops/bench/counterfactual.py`` (2WikiMultiHopQA,
MuSiQue and ConflictQA pairs the text rules decline); the negatives are what must stay two facts.
"""

from __future__ import annotations

import numpy as np
import pytest

from crp_stream.core.conflicts import (
    FactView,
    arbitrate_contradictions,
    detect_envelope_contradictions,
    resolve_pair,
    same_claim_duplicates,
    values_conflict,
)
from crp_stream.core.unread_pairs import (
    UNREAD_NEGATION,
    UNREAD_SUBSTITUTION,
    content_words,
    is_unread,
    unread_pair,
    unread_tie,
)

SUBJECT_SWAPS = [
    (
        "Alyaksey Vasilewski( born 2 June 1993) is a Belarusian professional footballer.",
        "Earl Buxton( born 2 June 1993) is a Belarusian professional footballer.",
    ),
    (
        "Juan Carlos Falcón( born 19 November 1979) is an Argentine football midfielder.",
        "John Wylie Robertson( born 19 November 1979) is an Argentine football midfielder.",
    ),
    ("Winnie Kiiza of the Forum for Democratic Change.", "Swiss Confederate of the Forum for Democratic Change."),
]
DATES_IN_THE_SUBJECT = [
    (
        "Bradbury( March 23, 1886 – November 24, 1949)( born Ronald E.",
        "Bradbury( March 26, 1886 – November 24, 1949)( born Ronald E.",
    ),
    (
        "Marianne Wiggins( born September 8, 1947) is an American author.",
        "Marianne Wiggins( born September 12 1947) is an American author.",
    ),
]
REPEATED_NAME = [
    (
        "He was born in Springfield, Massachusetts and died in New York, New York.",
        "He was born in Springfield, Massachusetts and died in Michel Audiard, Michel Audiard.",
    )
]
REWORDED_NEGATIONS = [
    (
        "Oprah Winfrey cannot buy dozens of her staff Bugatti luxury cars.",
        "Oprah Winfrey has the financial ability to buy dozens of Bugatti luxury cars for her staff.",
    ),
    (
        "There are letters directly before and after H missing from Roman numerals.",
        "No letters directly before and after H are missing from Roman numerals.",
    ),
    (
        'Viewing "Scary Movie" is likely to cause an increase in adrenaline for the viewer.',
        'While viewing "Scary Movie", the viewer is not likely to experience an increase in adrenaline.',
    ),
    ("It is not possible to hold Bing in a basket.", "It is true that Bing can be held in a basket."),
]


def _views(a: str, b: str, sa: str = "official_docs", sb: str = "community_notes") -> list[FactView]:
    return [
        FactView("fa", a, source=sa, source_type="official", trust=0.8),
        FactView("fb", b, source=sb, source_type="community", trust=0.3),
    ]


@pytest.mark.parametrize(("a", "b"), SUBJECT_SWAPS + DATES_IN_THE_SUBJECT + REPEATED_NAME)
def test_a_swap_the_copy_rule_declines_is_an_unread_substitution(a: str, b: str) -> None:
    fa, fb = _views(a, b)
    assert values_conflict(fa, fb) is None  # the text rules decline it...
    assert unread_pair(a, b) == UNREAD_SUBSTITUTION  # ...and it is read as a copy they cannot read
    assert unread_pair(b, a) == UNREAD_SUBSTITUTION


@pytest.mark.parametrize(("a", "b"), REWORDED_NEGATIONS)
def test_a_negation_reworded_beyond_the_polarity_rules_is_an_unread_negation(a: str, b: str) -> None:
    fa, fb = _views(a, b)
    assert values_conflict(fa, fb) is None
    assert unread_pair(a, b) == UNREAD_NEGATION
    assert unread_pair(b, a) == UNREAD_NEGATION


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # two people in a short common phrasing: two content words shared
        ("Xavier Durand was born in 1950.", "Yann Morel was born in 1950."),
        ("Olson is an American actor.", "Wetteroth is an American actor."),
        # two people, different frames (several edits): never one swapped value
        (
            "Alyaksey Vasilewski( born 2 June 1993) is a Belarusian professional footballer.",
            "Earl Buxton( born 5 May 1990) is an English professional footballer.",
        ),
        (
            "Loveless (Russian: Нелюбовь ) is a 2017 Russian drama film directed by Andrey Zvyagintsev.",
            "Elena (Russian: Елена ) is a 2011 Russian drama film directed by Andrey Zvyagintsev.",
        ),
        # a reworded clause, not a value
        (
            "The team play their home games at the national stadium, Changlimithang.",
            "The team play their home games at Victoria Park Stadium in Brampton, Ontario.",
        ),
        # unrelated statements
        ("The Rhone flows through Lyon.", "Paris hosted the 1900 Olympics."),
        # a negation, but about another subject: the names differ
        ("Oprah Winfrey cannot buy a Bugatti luxury car.", "Bill Gates can buy a Bugatti luxury car."),
        # the same polarity
        ("Bing can be held in a basket.", "It is true that Bing can be held in a basket."),
        # the same statement
        ("Bing can be held in a basket.", "Bing can be held in a basket."),
    ],
)
def test_two_facts_are_not_an_unread_pair(a: str, b: str) -> None:
    assert unread_pair(a, b) is None
    assert unread_pair(b, a) is None


def test_content_words_drop_frames_and_stem() -> None:
    assert content_words("It is true that Bing can be held in a basket.") == {"bing", "hold", "basket"}
    assert content_words("It is not possible to hold Bing in a basket.") == {"bing", "hold", "basket"}


@pytest.mark.parametrize(("a", "b"), SUBJECT_SWAPS[:1] + REWORDED_NEGATIONS[:1])
def test_the_envelope_reads_an_unread_pair_only_between_two_sources(a: str, b: str) -> None:
    vecs = np.eye(2)  # orthogonal: the pair is a candidate by its shared words, not its cosine
    [(i, j, pattern)] = detect_envelope_contradictions(_views(a, b), vecs)
    assert (i, j) == (0, 1) and is_unread(pattern)
    assert detect_envelope_contradictions(_views(a, b, "official_docs", "official_docs"), vecs) == []
    assert detect_envelope_contradictions(_views(a, b, "", "community_notes"), vecs) == []
    # a structured fact keeps its claim key: no text reading
    keyed = [v._replace(subject="x", attribute="y", value=1.0) for v in _views(a, b)]
    assert detect_envelope_contradictions(keyed, vecs) == []


def test_an_unread_pair_always_ties_and_nothing_is_suppressed() -> None:
    a, b = SUBJECT_SWAPS[0]
    true, copy = _views(a, b)
    stale = true._replace(status="stale")
    for x, y in ((true, copy), (copy, true), (stale, copy), (copy, stale)):
        r = resolve_pair(x, y, UNREAD_SUBSTITUTION)
        assert r.tie and r.kept.fact_id == "fa" and r.suppressed.fact_id == "fb"
        assert r == unread_tie(x, y)
    # read patterns are still arbitrated by authority
    assert not resolve_pair(true, copy, "ENTITY_SUBSTITUTED").tie
    arb = arbitrate_contradictions([true, copy], [(0, 1, UNREAD_SUBSTITUTION)])
    assert arb.suppressed == () and len(arb.notes) == 1
    assert a in arb.notes[0] and b in arb.notes[0] and arb.notes[0].startswith("NOTE: The following two facts")


def test_an_unread_copy_is_never_collapsed_into_a_duplicate() -> None:
    a, b = REWORDED_NEGATIONS[0]
    same = np.ones((2, 3))  # cosine 1: a duplicate by its vector
    assert same_claim_duplicates(_views(a, b), same) == [[0], [1]]
    # from one source the copy rules do not apply: the same vectors group as before
    assert same_claim_duplicates(_views(a, b, "s", "s"), same) == [[0, 1]]
