"""Issue 14: near-duplicate statements differing in one span (core.substitution)."""

from __future__ import annotations

from crp_stream.core.conflicts import ENTITY_SUBSTITUTED, NEGATION_FLIP, NUMBER_CHANGED, FactView, values_conflict
from crp_stream.core.substitution import (
    admit_copies,
    aligned_substitution,
    copied_statement_conflict,
    near_copy_pairs,
    slot_claim,
    uniqueness_predicate,
)

NORWAY = "Norway collected 39 medals in 2018, the largest haul by any country in a single Winter Olympics."
US = NORWAY.replace("Norway", "U.S.")


def test_a_swapped_subject_with_a_long_remainder_is_a_copy_between_sources_only() -> None:
    assert copied_statement_conflict(NORWAY, US, same_source=False) == ENTITY_SUBSTITUTED
    assert copied_statement_conflict(NORWAY, US, same_source=True) is None
    sub = aligned_substitution(NORWAY, US)
    assert sub is not None and (sub.span_a, sub.span_b, sub.before_predicate) == ("Norway", "U.S.", True)


def test_a_uniqueness_predicate_makes_a_short_subject_swap_a_conflict() -> None:
    assert (
        copied_statement_conflict("Facebook acquired Instagram.", "Apple acquired Instagram.", False)
        == ENTITY_SUBSTITUTED
    )
    assert uniqueness_predicate(("the", "tallest", "building")) and not uniqueness_predicate(("was", "born"))


def test_different_subjects_in_a_shared_phrasing_are_not_conflicts() -> None:
    assert copied_statement_conflict("X was born in 1950.", "Y was born in 1950.", False) is None
    a, b = (FactView(f, t, source=f) for f, t in (("a", "Xavier was born in 1950."), ("b", "Yann was born in 1950.")))
    assert values_conflict(a, b) is None


def test_a_name_repeated_twice_is_one_slot_and_two_edits_are_none() -> None:
    a = "Apple bought Instagram in 2012; Apple paid 1 billion dollars for it."
    b = a.replace("Apple", "Facebook")
    sub = aligned_substitution(a, b)
    assert sub is not None and sub.template.count("\x00slot") == 2
    assert aligned_substitution(a, b.replace("2012", "2013")) is None  # a name AND a year changed


def test_numbers_and_negations() -> None:
    assert (
        copied_statement_conflict("The season has 23 episodes.", "The season has 24 episodes.", True) == NUMBER_CHANGED
    )
    assert (
        copied_statement_conflict(
            "The Space Race did not use relay batons.", "The Space Race used relay batons.", False
        )
        == NEGATION_FLIP
    )
    assert (
        copied_statement_conflict("It is impossible to use it here.", "It is possible to use it here.", False)
        == NEGATION_FLIP
    )
    assert (
        copied_statement_conflict("There is no warthog on Broadway.", "There is a warthog on Broadway.", False)
        == NEGATION_FLIP
    )
    # a name for a date is not one slot
    assert aligned_substitution("It was released for Microsoft Windows.", "It was released on 11 September.") is None


def test_slot_claim_names_the_template_and_the_values() -> None:
    key, va, vb = slot_claim(NORWAY, US, same_source=False) or ("", "", "")
    assert key.startswith("{} collected 39 medals") and (va, vb) == ("norway", "u.s.")
    assert slot_claim("X was born in 1950.", "Y was born in 1950.", False) is None


def test_near_copy_pairs_and_admit_copies_are_cross_source() -> None:
    texts = [NORWAY, US, "Paris is the capital of France."]
    assert near_copy_pairs(texts, ["official", "community", "news"]) == {(0, 1)}
    assert near_copy_pairs(texts, ["official", "official", "news"]) == set()
    assert near_copy_pairs(texts, ["official", "community", "news"], inside=0) == set()
    assert admit_copies(texts, ["official", "community", "news"], [False, True, False]) == [True, True, False]
    assert admit_copies(texts, ["official", "official", "news"], [False, True, False]) == [False, True, False]
