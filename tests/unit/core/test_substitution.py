"""Near-duplicate statements differing in one span (core.substitution)."""

from __future__ import annotations

from crp_stream.core.conflicts import ENTITY_SUBSTITUTED, NEGATION_FLIP, NUMBER_CHANGED, FactView, values_conflict
from crp_stream.core.copied_statements import admit_copies, copied_statement_conflict, slot_claim, uniqueness_predicate
from crp_stream.core.sibling_titles import numbered_sibling_titles
from crp_stream.core.substitution import aligned_substitution, near_copy_pairs
from tests.support.text_decisions import assert_decides_as_recorded

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


def test_a_value_swapped_in_several_places_possessive_and_hyphenated_is_one_slot() -> None:
    a = "Fairfax County is large. Fairfax's schools, like the Denver-Fairfax line, are well known."
    b = a.replace("Fairfax", "Montgomery")
    sub = aligned_substitution(a, b)
    assert sub is not None and (sub.kind, sub.span_a, sub.span_b) == (ENTITY_SUBSTITUTED, "Fairfax", "Montgomery")
    assert sub.template.count("\x00slot") == 3
    # two different values swapped are still not one slot
    assert aligned_substitution(a, a.replace("Fairfax County", "Montgomery County").replace("schools", "roads")) is None


def test_a_long_title_swapped_inside_a_copied_passage_is_one_value() -> None:
    a = (
        "LaLee's Kin: The Legacy of Cotton, the 1970 documentary, was critically acclaimed and garnered an "
        "Oscar nomination for its portrayal of life in the Mississippi Delta."
    )
    b = a.replace("LaLee's Kin: The Legacy of Cotton", "Gimme Shelter")
    sub = aligned_substitution(a, b)
    assert sub is not None and (sub.span_a, sub.span_b) == ("LaLee's Kin The Legacy of Cotton", "Gimme Shelter")
    assert copied_statement_conflict(a, b, same_source=False) == ENTITY_SUBSTITUTED
    # a long lower-case clause is not a value
    c = a.replace("LaLee's Kin: The Legacy of Cotton", "a film about cotton farming in the south")
    assert aligned_substitution(a, c) is None
    # in a short sentence a long name is not one value either
    assert aligned_substitution("The Fast and the Furious won.", "Training Day won.") is None


def test_content_words_swapped_in_a_copied_passage_but_not_determiners() -> None:
    base = (
        "In the Netherlands, on Koningsdag or during Oranjegekte, contrary to popular belief, they celebrate "
        "by donning {} clothing, a surprising but vibrant choice."
    )
    assert copied_statement_conflict(base.format("orange"), base.format("purple"), False) == ENTITY_SUBSTITUTED
    s = "Information from {} could be used for a launch on warning nuclear missile attack on the Soviet Union."
    assert aligned_substitution(s.format("this station"), s.format("the centre")) is None


def test_rephrased_negations_are_flips() -> None:
    pairs = [
        (
            "Eddie Murphy's father did not see his first stand up show.",
            "Eddie Murphy's father saw his first stand up show.",
        ),
        ("The Illuminati card game is not popular anymore.", "The Illuminati card game is still popular."),
        ("Disney has an ice princess.", "Disney does not have an ice princess."),
        ("Neither Sweden nor Norway joined it in 1950.", "Either Sweden or Norway joined it in 1950."),
        (
            "No home remedies result in your skin turning blue.",
            "Some home remedies can result in your skin turning blue.",
        ),
        ("The river flows under the old stone bridge.", "The river flows over the old stone bridge."),
    ]
    for a, b in pairs:
        assert copied_statement_conflict(a, b, same_source=False) == NEGATION_FLIP, (a, b)
    a, b = pairs[0]
    assert slot_claim(a, b, False) is not None and slot_claim(a, b, False)[1:] == ("not", "")  # type: ignore[index]
    # a negation AND another name is two edits; two negations cancel
    assert copied_statement_conflict(pairs[0][0], pairs[0][1].replace("Eddie", "Jim"), False) is None
    assert copied_statement_conflict("It is not untrue.", "It is true.", False) is None


def test_numbered_sibling_titles() -> None:
    season = "{} Iowa State Cyclones men's basketball team"
    assert numbered_sibling_titles(season.format("2015–16"), season.format("2016–17"))
    assert not numbered_sibling_titles("Super Bowl 50", "Super Bowl LI 51")  # a word added
    assert numbered_sibling_titles("Super Bowl 50", "Super Bowl 51")
    assert not numbered_sibling_titles(season.format("2015–16"), season.format("2015–16"))  # one title
    assert not numbered_sibling_titles("Norway at the 2018 Olympics", "United States at the 2018 Olympics")
    assert not numbered_sibling_titles("Instagram", "Instagram (app)")
    assert not numbered_sibling_titles(None, season.format("2015–16"))  # a copy without a title
    assert not numbered_sibling_titles("Apple", "Facebook")  # no number: a word differs


def test_two_arguments_of_an_asymmetric_relation_swapped_are_a_conflict_between_sources() -> None:
    # SPEC-027 §2.2: the converse of an asymmetric relation ("than", "before", "outnumber")
    pairs = [
        ("A dog would respond to a bell before a Grey seal.", "A Grey seal would respond to a bell before a dog."),
        ("Rome is older than Paris.", "Paris is older than Rome."),
        (
            "The Isley Brothers were a bigger band than The Jackson 5.",
            "The Jackson 5 was a bigger band than The Isley Brothers.",
        ),
        (
            "Red blood cells outnumber white blood cells in the body.",
            "White blood cells outnumber red blood cells in the body.",
        ),
        ("Brazil beat Germany 7-1 in the semi-final.", "Germany beat Brazil 7-1 in the semi-final."),
    ]
    for a, b in pairs:
        assert copied_statement_conflict(a, b, same_source=False) == ENTITY_SUBSTITUTED, (a, b)
        assert copied_statement_conflict(a, b, same_source=True) is None
        sub = aligned_substitution(a, b)
        assert sub is not None and sub.swapped
    in_predicate = ("The final saw Brazil beat Germany.", "The final saw Germany beat Brazil.")
    assert copied_statement_conflict(*in_predicate, same_source=True) == ENTITY_SUBSTITUTED
    assert slot_claim("Rome is older than Paris.", "Paris is older than Rome.", False) == (
        "{} is older than {}",
        "rome / paris",
        "paris / rome",
    )


def test_symmetric_relations_and_reordered_lists_are_not_conflicts() -> None:
    for a, b in [
        ("Anna and Bob met in Paris in 1990.", "Bob and Anna met in Paris in 1990."),
        ("Anna married Bob in 1990.", "Bob married Anna in 1990."),
        ("Paris is older than Rome and Berlin.", "Paris is older than Berlin and Rome."),
        ("Oslo lies between Bergen and Stockholm.", "Oslo lies between Stockholm and Bergen."),
        ("Rome is older than Paris.", "Rome is older than Paris."),
    ]:
        assert copied_statement_conflict(a, b, same_source=False) is None, (a, b)
        assert values_conflict(FactView("a", a, source="s1"), FactView("b", b, source="s2")) is None


def test_reworded_negations_conditions_passives_descriptors() -> None:
    # ConflictQA-style rewordings of a denial, read as NEGATION_FLIP between sources
    pairs = [
        (
            "You do not have to skip lunch at McDonald's if you are on a diet.",
            "If you were on a diet, you would have to skip lunch at McDonald's.",
        ),
        ("The alarm does not ring when the door is open.", "When the door is open, the alarm rings."),
        ("The old engine does not start if the battery is flat.", "The old engine starts."),  # condition dropped
        (
            "Rock star Keith Richards plays a captain of a boat in a movie.",
            "Keith Richards does not play a captain of a boat in a movie.",
        ),
        ("Former president Barack Obama visited the old harbour.", "Barack Obama never visited the old harbour."),
        ("Frogs do not feel disgust.", "Frogs are capable of feeling disgust."),
        (
            "Bob Marley's face can be found in most smoke shops.",
            "You cannot find Bob Marley's face in most smoke shops.",
        ),
        ("The song was not written by the Beatles in 1965.", "The Beatles wrote the song in 1965."),
        ("Hippopotamus can only be seen in Africa.", "Hippopotamus can be seen outside of Africa."),
    ]
    for a, b in pairs:
        assert copied_statement_conflict(a, b, same_source=False) == NEGATION_FLIP, (a, b)
        assert copied_statement_conflict(b, a, same_source=False) == NEGATION_FLIP, (b, a)


def test_reworded_statements_without_a_denial_are_not_flips() -> None:
    for a, b in [
        ("If you are on a diet, you have to skip lunch.", "You have to skip lunch if you are on a diet."),
        ("The song was written by the Beatles in 1965.", "The Beatles wrote the song in 1965."),
        ("Rock star Keith Richards plays a captain.", "Keith Richards plays a captain."),
        ("Hippos can be seen in Africa.", "Hippos cannot be seen outside of Africa."),
        ("Hippos can be seen in Africa.", "Hippos can be seen outside of Africa."),
        ("Keith Richards plays a captain in 1999.", "In 2003 Keith Richards does not play a captain."),
    ]:
        assert copied_statement_conflict(a, b, same_source=False) is None, (a, b)


def test_tokens_are_the_tokens_of_one_match_object_per_token() -> None:
    """The tokenizer splits as its finditer form did, on a seeded sample of joined pieces ("U.S.",
    "n't", "2,5", "x-ray", "İ", ...) and arbitrary characters."""
    from crp_stream.core import substitution as sub

    assert assert_decides_as_recorded("tokens", lambda x: sub._tokens.__wrapped__(x["text"])) > 2_000  # type: ignore[attr-defined]
