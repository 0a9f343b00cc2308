"""The fast paths of the pairwise contradiction check decide exactly as before.

``crp_stream.core``'s conflicts, substitution and polarity screen pairs before aligning them
(``polarity.may_flip``, the argument-swap key, ``substitution._ordered_opcodes``) and remember
per-text and per-pair work. ``tests/support/text_rules_before`` holds the modules as they were
(8d84df9); every decision of the current ones is compared with theirs on real texts (the free-text
conflict sets, the HotpotQA sample, the curated examples of the unit tests), on mutations of them
(one span swapped, a negation added, a number changed, a condition moved) and on generated
statements (hypothesis) drawn from the words the rules read.
"""

from __future__ import annotations

import ast
import json
import random
from difflib import SequenceMatcher
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crp_stream.core import conflicts, copied_statements, polarity, substitution
from tests.support.text_rules_before import conflicts as old_conflicts
from tests.support.text_rules_before import polarity as old_polarity
from tests.support.text_rules_before import substitution as old_substitution

DATA = Path(__file__).resolve().parents[1] / "data"
UNIT = Path(__file__).resolve().parent

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
TEMPLATES = [
    "Fact {n} about topic {t}: value {v}.",
    "Topic {t} area {v}: record {n} says the palace river.",
    "fact {n} of the benchmark corpus",
]


def _literals(path: Path) -> list[str]:
    """The statements written in a test module (string constants of three words or more)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if len(node.value.split()) >= 3 and "\n" not in node.value and len(node.value) < 400:
            out.append(node.value)
    return out


@cache
def real_texts() -> tuple[list[list[str]], list[tuple[str, str]]]:
    """(groups of related real statements, known true/poisoned pairs)."""
    groups: list[list[str]] = []
    pairs: list[tuple[str, str]] = []
    for case in json.loads((DATA / "free_text_sets.json").read_text()):
        docs = [s for d in case["true_docs"] + case["poison_docs"] for s in d] + list(case["distractors"])
        groups.append(list(dict.fromkeys(docs)))
        for true_doc, poison_doc in zip(case["true_docs"], case["poison_docs"], strict=False):
            pairs += [(x, y) for x, y in zip(true_doc, poison_doc, strict=False) if x != y]
    for q in json.loads((DATA / "hotpotqa_ci10.json").read_text()):
        sents = [s.strip() for p in q["paragraphs"] for s in (p[1] if isinstance(p, list) else p["sentences"])]
        groups.append([s for s in sents if s])
    curated = []
    for name in ("test_substitution.py", "test_polarity.py", "test_conflicts.py", "test_near_copies.py"):
        curated += _literals(UNIT / name)
    groups.append(list(dict.fromkeys(curated)))
    return groups, pairs


def mutate(text: str, rng: random.Random) -> str:
    """One edit of the kinds the rules look for (or a random one)."""
    words = text.split()
    if not words:
        return text
    k = rng.randrange(len(words))
    kind = rng.randrange(8)
    if kind == 0:  # a span swapped for a word or name
        words[k : k + rng.randint(1, 3)] = rng.sample(VOCAB, rng.randint(1, 3))
    elif kind == 1:  # a negation
        words.insert(k, rng.choice(["not", "never", "no", "did not", "cannot"]))
    elif kind == 2:  # a number changed
        nums = [i for i, w in enumerate(words) if any(c.isdigit() for c in w)]
        at = rng.choice(nums) if nums else k
        words[at] = str(rng.randint(0, 3000)) + rng.choice(["", "", " ms", "%"])
    elif kind == 3:  # two words exchanged (an argument swap)
        j = rng.randrange(len(words))
        words[k], words[j] = words[j], words[k]
    elif kind == 4:  # a leading condition
        return f"If {' '.join(rng.sample(VOCAB, 3))}, {text[:1].lower()}{text[1:]}"
    elif kind == 5:  # every occurrence of a word replaced
        w = words[k]
        new = rng.choice(VOCAB)
        words = [new if x == w else x for x in words]
    elif kind == 6:  # an antonym or a prefix
        words[k] = rng.choice(["un", "in", "dis", "im"]) + words[k].lower()
    else:  # a word deleted
        del words[k]
    return " ".join(words)


def _views(a: str, b: str, how: int) -> tuple[conflicts.FactView, conflicts.FactView]:
    sources = [("s1", "s2"), ("s1", "s1"), ("", "s2"), ("s1", "")][how % 4]
    return (
        conflicts.FactView("a", a, source=sources[0]),
        conflicts.FactView("b", b, source=sources[1]),
    )


def assert_same(a: str, b: str, how: int = 0) -> None:
    """Every public decision on one pair of statements, current against before."""
    assert substitution.aligned_substitution(a, b) == old_substitution.aligned_substitution(a, b), (a, b)
    assert substitution.aligned_substitution(a, b, 1) == old_substitution.aligned_substitution(a, b, 1), (a, b)
    for same in (False, True):
        assert copied_statements.copied_statement_conflict(a, b, same) == old_substitution.copied_statement_conflict(
            a, b, same
        ), (a, b, same)
        assert copied_statements.slot_claim(a, b, same) == old_substitution.slot_claim(a, b, same), (a, b, same)
    va, vb = _views(a, b, how)
    ova, ovb = (old_conflicts.FactView(*v) for v in (va, vb))
    assert conflicts.values_conflict(va, vb) == old_conflicts.values_conflict(ova, ovb), (a, b, how)
    # an unread copy of another source (``core.unread_pairs``) is never a duplicate; else as before
    unread = conflicts.values_conflict(va, vb) is None and conflicts._pair_pattern(va, vb) is not None
    want_same = False if unread else old_conflicts._same_claim(ova, ovb)
    assert conflicts._same_claim(va, vb) == want_same, (a, b, how)
    (la, oa), (lb, ob) = substitution._tokens(a), substitution._tokens(b)
    assert polarity.polarity_flip(la, lb, oa, ob) == old_polarity.polarity_flip(la, lb, oa, ob), (a, b)


def test_real_statements_pair_by_pair() -> None:
    groups, pairs = real_texts()
    rng = random.Random(12)
    checked = found = 0
    for x, y in pairs:
        assert_same(x, y, checked)
        assert_same(y, x, checked + 1)
        checked += 2
        found += substitution.aligned_substitution(x, y) is not None
    assert found >= len(pairs) // 2  # the poisoned copies are read as conflicts
    for group in groups:
        sample = group if len(group) <= 40 else rng.sample(group, 40)
        for i, x in enumerate(sample):
            for y in sample[i + 1 : i + 12]:
                assert_same(x, y, checked)
                checked += 1
    assert checked > 4_000


def test_real_statements_against_their_mutations() -> None:
    groups, _ = real_texts()
    rng = random.Random(3)
    found = 0
    for group in groups:
        for text in group[:60]:
            for _ in range(4):
                other = mutate(text, rng)
                if rng.random() < 0.3:
                    other = mutate(other, rng)
                assert_same(text, other, rng.randrange(4))
                assert_same(other, text, rng.randrange(4))
                found += substitution.aligned_substitution(text, other) is not None
    assert found > 200  # the mutations reach every reading, not only the screens' None


def test_templated_statements() -> None:
    rng = random.Random(5)
    for template in TEMPLATES:
        texts = [
            template.format(n=rng.randint(0, 120_000), t=rng.randint(0, 63), v=rng.randint(0, 999)) for _ in range(150)
        ]
        texts += [template.format(n=n, t=n % 3, v=n % 7) for n in range(30)]  # repeated numbers
        for i, x in enumerate(texts):
            for y in texts[i + 1 : i + 15]:
                assert_same(x, y, i)


_word = st.sampled_from(VOCAB)
_sentence = st.lists(_word, min_size=1, max_size=18).map(" ".join)


@st.composite
def _pair(draw: st.DrawFn) -> tuple[str, str]:
    a = draw(_sentence)
    words = a.split()
    edits = draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 40), _word), max_size=4))
    for kind, at, w in edits:
        k = at % (len(words) + 1)
        if kind == 0 and words:
            words[k % len(words)] = w
        elif kind == 1:
            words.insert(k, w)
        elif kind == 2 and words:
            del words[k % len(words)]
        elif kind == 3 and words:  # every occurrence of one word
            old = words[k % len(words)]
            words = [w if x == old else x for x in words]
        elif kind == 4 and len(words) > 1:
            j = (k + 1 + at) % len(words)
            i = k % len(words)
            words[i], words[j] = words[j], words[i]
        elif kind == 5:
            words.insert(0, f"If {w} {w},")
    end = draw(st.sampled_from(["", ".", "!"]))
    return a + end, " ".join(words) + end


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pair(), st.integers(0, 3))
def test_generated_statements(pair: tuple[str, str], how: int) -> None:
    a, b = pair
    assert_same(a, b, how)
    assert_same(b, a, how)


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
    """A statement never conflicts with itself, before or now, and the alignment of a statement with
    itself (or with a copy differing only in case or a full stop) is one equal block."""
    groups, _ = real_texts()
    for group in groups:
        for text in group[:30]:
            assert substitution.aligned_substitution(text, text) is None
            va, vb = _views(text, text, 0)
            assert conflicts.values_conflict(va, vb) is None
            assert_same(text, text.upper(), 0)
            assert_same(text, text.rstrip(".") + ".", 1)
            pa = substitution._profile(text)
            assert (
                list(substitution._opcodes(pa.low, pa.low, pa, pa))
                == SequenceMatcher(None, pa.low, pa.low, autojunk=False).get_opcodes()
            )


def test_content_and_stem_unchanged() -> None:
    """``polarity._content`` (its prefix test now one set) and the memoised ``stem``."""
    groups, _ = real_texts()
    rng = random.Random(8)
    for group in groups:
        for text in group[:40] + [mutate(t, rng) for t in group[:20]]:
            low, orig = substitution._tokens(text)
            assert polarity._content(low, orig) == old_polarity._content(low, orig)
            assert [polarity.stem(w) for w in low] == [old_polarity.stem(w) for w in low]
    for p in polarity._NEG_PREFIXES:
        for w in polarity._NEUTRAL:
            assert polarity._content((p + w,), (p + w,))[0] == 1


# (a number, one written otherwise within the unit tolerance, a different one)
_NUMBERS = [
    ("12", "12.0", "112"),
    ("1000 rps", "1 krps", "100 rps"),
    ("700 ms", "0.7 s", "70 ms"),
    ("5%", "5.0%", "6%"),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(
        [
            "Fact {} about topic {}: value {}.",
            "The {} team won {} games and {} titles.",
            "In {}, the bridge was {} long and carried {} cars.",
            "Latency is {} at {} and {} at peak.",
        ]
    ),
    st.lists(st.tuples(st.sampled_from(_NUMBERS), st.integers(0, 2)), min_size=3, max_size=3),
)
def test_number_variants_decide_as_before(template: str, slots: list[tuple[tuple[str, str, str], int]]) -> None:
    """``_text_conflict`` on statements differing only in their numbers (each slot the same, within
    the unit tolerance, or different; the first differing one before or after the predicate) decides
    as before its shortcut on equal number tuples."""
    a = template.format(*(n[0] for n, _ in slots))
    b = template.format(*(n[k] for n, k in slots))
    assert conflicts._text_conflict(a, b) == old_conflicts._text_conflict(a, b)
    assert conflicts._text_conflict(b, a) == old_conflicts._text_conflict(b, a)
