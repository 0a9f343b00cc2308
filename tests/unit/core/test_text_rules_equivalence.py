"""The fast paths of the pairwise contradiction check decide exactly as before.

``crp_stream.core``'s conflicts, substitution and polarity screen pairs before aligning them
(``polarity.may_flip``, the argument-swap key, ``substitution._ordered_opcodes``) and remember
per-text and per-pair work. ``tests/data/text_rule_decisions.jsonl.gz`` holds the decisions the
modules made before (8d84df9) on real texts (the free-text conflict sets, the HotpotQA sample, the
curated examples of the unit tests), on mutations of them (one span swapped, a negation added, a
number changed, a condition moved) and on a seeded sample of generated statements drawn from the
words the rules read; every decision of the current ones is compared with the recorded one.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream.core import conflicts, copied_statements, polarity, substitution
from tests.support.text_decisions import assert_decides_as_recorded, recorded

SOURCES = [("s1", "s2"), ("s1", "s1"), ("", "s2"), ("s1", "")]

# Words the rules read: negators, antonyms, prefixed words, relations, predicate verbs, uniqueness,
# conditions, passives, numbers with units, names, possessives, hyphens, abbreviations, repeats.
_VOCAB_TEXT = (
    "the a an of in on at by for to and or is are was were be been has have had did do does not no never "
    "n't isn't cannot can't won't neither nor either none still anymore longer only outside inside "
    "under over below above less more after before lower higher false true disabled enabled lost won "
    "possible impossible able unable known unknown legal illegal regular irregular agree disagree "
    "than beat beats defeated precedes older larger first largest only acquired founded capital won "
    "Norway U.S. Apple Facebook Instagram Paris Rome Berlin Denver-Pitkin Denver-Boulder Fairfax's "
    "Montgomery's Texas Tech University Austin Keith Richards Rock star song written found Beatles "
    "If When Unless you we it they saw see seen uses used play plays played director producer "
    "collected medals team city 39 40 2018 2019 1,000 1000 120 ms 0.12 s 5% 2 GiB 1 krps v3.5 us-east-1"
)
VOCAB = _VOCAB_TEXT.split()
_word = st.sampled_from(VOCAB)


def _views(a: str, b: str, how: int) -> tuple[conflicts.FactView, conflicts.FactView]:
    sources = SOURCES[how % 4]
    return (
        conflicts.FactView("a", a, source=sources[0]),
        conflicts.FactView("b", b, source=sources[1]),
    )


def _pair_decisions(x: dict[str, Any]) -> dict[str, Any]:
    """Every public decision on one pair of statements, as recorded."""
    a, b = x["a"], x["b"]
    va, vb = _views(a, b, x["how"])
    (la, oa), (lb, ob) = substitution._tokens(a), substitution._tokens(b)
    return {
        "aligned_substitution": substitution.aligned_substitution(a, b),
        "aligned_substitution_1": substitution.aligned_substitution(a, b, 1),
        "copied_statement_conflict": [copied_statements.copied_statement_conflict(a, b, s) for s in (False, True)],
        "slot_claim": [copied_statements.slot_claim(a, b, s) for s in (False, True)],
        "values_conflict": conflicts.values_conflict(va, vb),
        "same_claim": conflicts._same_claim(va, vb),
        "polarity_flip": polarity.polarity_flip(la, lb, oa, ob),
    }


def _pair_expected(rec: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    # an unread copy of another source (``core.unread_pairs``) is never a duplicate; else as before
    va, vb = _views(rec["input"]["a"], rec["input"]["b"], rec["input"]["how"])
    unread = now["values_conflict"] is None and conflicts._pair_pattern(va, vb) is not None
    return {**rec["old"], "same_claim": False} if unread else rec["old"]


def test_statement_pairs_decide_as_recorded() -> None:
    """Real statements pair by pair, against their mutations, templated and generated statements,
    and statements against their upper-cased and full-stopped copies."""
    assert assert_decides_as_recorded("pair", _pair_decisions, _pair_expected) > 20_000


def test_the_recorded_pairs_reach_every_reading() -> None:
    """The corpus is not only the screens' None: substitutions, flips and conflicts of every pattern."""
    old = [r["old"] for r in recorded()["pair"]]
    assert sum(o["aligned_substitution"] is not None for o in old) > 4_000
    assert sum(o["polarity_flip"] is not None for o in old) > 500
    assert sum(o["same_claim"] for o in old) > 500
    patterns = {o["values_conflict"] for o in old} | {c for o in old for c in o["copied_statement_conflict"]}
    assert {conflicts.NUMBER_CHANGED, conflicts.ENTITY_SUBSTITUTED, conflicts.NEGATION_FLIP} <= patterns


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from([*VOCAB[:40], "x", "y", "z"]), max_size=14), st.lists(_word, max_size=14))
def test_ordered_opcodes_are_difflibs(a: list[str], b: list[str]) -> None:
    """The identity of the alignment: where the shortcut answers, it is difflib's answer."""
    ta, tb = " ".join(a), " ".join(b)
    pa, pb = substitution._profile(ta), substitution._profile(tb)
    want = SequenceMatcher(None, pa.low, pb.low, autojunk=False).get_opcodes()
    assert list(substitution._opcodes(pa.low, pb.low, pa, pb)) == want
    got = substitution._ordered_opcodes(pa, pb)
    assert got is None or got == want


def test_identity() -> None:
    """A statement never conflicts with itself, and the alignment of a statement with itself is one
    equal block (its comparison with an upper-cased or full-stopped copy is among the recorded pairs)."""
    for rec in recorded()["content"]:
        text = rec["input"]["text"]
        assert substitution.aligned_substitution(text, text) is None
        va, vb = _views(text, text, 0)
        assert conflicts.values_conflict(va, vb) is None
        pa = substitution._profile(text)
        assert (
            list(substitution._opcodes(pa.low, pa.low, pa, pa))
            == SequenceMatcher(None, pa.low, pa.low, autojunk=False).get_opcodes()
        )


def test_content_and_stem_unchanged() -> None:
    """``polarity._content`` (its prefix test now one set) and the memoised ``stem``."""

    def decide(x: dict[str, Any]) -> dict[str, Any]:
        low, orig = substitution._tokens(x["text"])
        return {"content": polarity._content(low, orig), "stems": [polarity.stem(w) for w in low]}

    assert assert_decides_as_recorded("content", decide) > 800
    for p in polarity._NEG_PREFIXES:
        for w in polarity._NEUTRAL:
            assert polarity._content((p + w,), (p + w,))[0] == 1


def test_number_variants_decide_as_recorded() -> None:
    """``_text_conflict`` on statements differing only in their numbers (each slot the same, within
    the unit tolerance, or different; the first differing one before or after the predicate), every
    combination of four templates: as before its shortcut on equal number tuples."""
    n = assert_decides_as_recorded("text_conflict", lambda x: conflicts._text_conflict(x["a"], x["b"]))
    assert n > 10_000
