"""Rephrased negations between near-copies (core.polarity)."""

from __future__ import annotations

from crp_stream.core.polarity import active_order, conditional_last, polarity_flip, stem
from crp_stream.core.substitution import _tokens


def flip(a: str, b: str) -> tuple[tuple[str, ...], str, str] | None:
    (la, oa), (lb, ob) = _tokens(a), _tokens(b)
    return polarity_flip(la, lb, oa, ob)


def test_stems_meet_across_tense_and_number() -> None:
    assert stem("lived") == stem("lives") == stem("live")
    assert stem("needs") == stem("need") == stem("needed")
    assert stem("saw") == stem("see") and stem("taught") == stem("teach") and stem("made") == stem("make")


def test_flip_marks_the_negated_side() -> None:
    found = flip(
        "Clark Gable did not appear in any movies scored by John Williams.",
        "Clark Gable appeared in movies scored by John Williams.",
    )
    assert found is not None and found[1:] == ("not", "")
    found = flip("So, yes, they are the same level of city.", "So, no, they are the same level of city.")
    assert found is not None and found[1:] == ("", "not")


def test_no_flip_without_a_parity_change_or_with_a_name_changed() -> None:
    assert flip("Paris is the capital of France.", "Paris is the capital of France.") is None
    assert flip("He did not win in 1990.", "He won in 1991.") is None  # a number changed too
    assert flip("Anna did not sing at the gala.", "Maria sang at the gala.") is None  # a name changed too
    assert flip("It is not cold.", "It is warm.") is None  # too little shared to be one statement
    # more than two plain words of slack is a different sentence
    assert flip("Bob did not eat the red apple today.", "Bob ate a big green sour apple today.") is None


def test_conditional_last_moves_a_leading_condition_after_the_main_clause() -> None:
    assert (
        conditional_last("If you were on a diet, you would skip lunch.")
        == "you would skip lunch if you were on a diet."
    )
    assert conditional_last("When it rains, the roof leaks!") == "the roof leaks when it rains."
    assert conditional_last("The roof leaks when it rains.") == "The roof leaks when it rains."
    assert conditional_last("If so, fine.") == "If so, fine."  # too short a condition to be a clause


def test_active_order_reads_a_passive_as_active() -> None:
    la = _tokens("The song was not written by the Beatles in 1965.")[0]
    order = active_order(la)
    assert order is not None and [la[k] for k in order] == [
        "the",
        "beatles",
        "was",
        "not",
        "written",
        "the",
        "song",
        "in",
        "1965",
    ]
    lb = _tokens("Her face can be found in shops.")[0]
    order = active_order(lb)
    assert order is not None and [lb[k] for k in order] == ["be", "found", "her", "face", "can", "in", "shops"]
    assert active_order(_tokens("The sky is blue in summer.")[0]) is None  # no participle
    assert active_order(_tokens("The Beatles wrote the song.")[0]) is None


def test_flip_through_a_passive_but_not_a_passive_of_another_agent() -> None:
    assert flip("The bridge was built by Romans.", "Romans did not build the bridge.") is not None
    assert flip("The bridge was not built by Romans.", "Greeks built the bridge.") is None
    assert flip("The bridge was built by Romans.", "Romans built the bridge.") is None  # no denial
