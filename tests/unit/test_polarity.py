"""Issue 14: rephrased negations between near-copies (core.polarity)."""

from __future__ import annotations

from crp_stream.core.polarity import polarity_flip, stem
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
