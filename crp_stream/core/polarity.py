"""Negation flips between near-copies, rephrased (SPEC-027 §2.2 NEGATION_FLIP).

A copied statement can deny the original without a single clean edit: "did not see" / "saw",
"is not popular anymore" / "is still popular", "neither X nor Y" / "either X or Y", "No remedies
result" / "Some remedies can result", "over" / "under". Both statements are reduced to their
*polarity-neutral content*: negators counted and removed, auxiliaries, determiners and polarity
adverbs ("still", "anymore") dropped, verbs stemmed (a short table for irregular ones), antonyms
folded into one word plus a negation. Two statements whose contents are the same (up to two
lower-case words of slack, never a name or a number) and whose negation counts differ in parity
assert and deny the same thing.

Rewordings read besides (the ConflictQA misses): a passive against its active ("X can be
found in Y" / "you cannot find X in Y", ``active_order``), a condition moved to the other end of the
sentence ("If A, B" / "not B if A", ``conditional_last``) or given on one side only, a descriptor
before a name dropped ("Rock star Keith Richards plays" / "Keith Richards does not play"), the
"capable of" frame ("do not feel" / "are capable of feeling") and "only in X" as the negation of
"outside (of) X".

API
---
- ``polarity_flip(a, b, orig_a, orig_b) -> tuple[tuple[str, ...], str, str] | None``: on two
  lower-cased token sequences (and their original spellings), (the shared content, the negated
  side's marker, the other's) or None.
- ``conditional_last(text) -> str``: a leading "If/When/Unless ..., " clause moved after the main one.
- ``active_order(tokens) -> list[int] | None``: the token order of a passive clause read as active.
- ``flip_signature(tokens, orig) -> FlipSignature``: what ``polarity_flip`` needs of one side to be
  possible at all (negation parities, stems of the words a negative prefix may pair); remembered
  per sequence.
- ``may_flip(a, b) -> bool``: False proves ``polarity_flip`` None for every reading of the two sides the
  signatures cover (``core.substitution`` screens every pair with it before aligning).
"""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher
from typing import NamedTuple

from crp_stream.core import memo


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NEGATORS = _words("not no never n't none nobody nothing nowhere neither")
NEGATORS = _NEGATORS  # the negators polarity counts, for the rules that count them the same way
# Polarity-neutral words dropped before comparing: auxiliaries, modals, determiners, polarity adverbs,
# and the impersonal frame of "you can't X" / "it is possible to X".
_NEUTRAL = _words(
    "do does did is are was were be been being am can could will would may might shall should must "
    "have has had a an the any some my your his her its our their still anymore yes either also "
    "possible possibly able capable to you it one someone anyone"
)
_REWRITE = {"nor": "or", "neither": "either"}
# Antonyms: the second word reads as the first plus a negation ("under" = not "over").
_ANTONYMS = {
    "under": "over",
    "below": "above",
    "less": "more",
    "fewer": "more",
    "after": "before",
    "lower": "higher",
    "smaller": "larger",
    "shorter": "longer",
    "false": "true",
    "disabled": "enabled",
    "absent": "present",
    "outside": "inside",
    "rarely": "often",
    "lost": "won",
    "lose": "win",
    "loses": "wins",
}
_IRREGULAR = {
    "saw": "see",
    "used": "use",
    "seen": "see",
    "made": "make",
    "taught": "teach",
    "went": "go",
    "gone": "go",
    "took": "take",
    "taken": "take",
    "gave": "give",
    "given": "give",
    "got": "get",
    "gotten": "get",
    "came": "come",
    "knew": "know",
    "known": "know",
    "thought": "think",
    "brought": "bring",
    "bought": "buy",
    "sold": "sell",
    "told": "tell",
    "found": "find",
    "held": "hold",
    "kept": "keep",
    "left": "leave",
    "led": "lead",
    "met": "meet",
    "paid": "pay",
    "ran": "run",
    "said": "say",
    "sent": "send",
    "spent": "spend",
    "stood": "stand",
    "won": "win",
    "wrote": "write",
    "written": "write",
    "built": "build",
    "began": "begin",
    "begun": "begin",
    "became": "become",
    "ate": "eat",
    "eaten": "eat",
    "drank": "drink",
    "flew": "fly",
    "grew": "grow",
    "fought": "fight",
    "caught": "catch",
    "felt": "feel",
    "heard": "hear",
    "meant": "mean",
    "sang": "sing",
    "sung": "sing",
    "spoke": "speak",
    "spoken": "speak",
    "wore": "wear",
    "worn": "wear",
    "fell": "fall",
    "fallen": "fall",
    "drove": "drive",
    "driven": "drive",
    "rode": "ride",
    "swam": "swim",
    "threw": "throw",
    "chose": "choose",
    "chosen": "choose",
    "lay": "lie",
    "lain": "lie",
    "shot": "shoot",
    "hid": "hide",
    "hidden": "hide",
}
_NEG_PREFIXES = ("un", "im", "in", "ir", "il", "non", "dis")
# A neutral word with a negative prefix ("impossible", "unable"): exactly the words ``t`` with
# ``t.startswith(p) and t[len(p):] in _NEUTRAL`` for a prefix ``p``, as one set.
_PREFIXED_NEUTRAL = frozenset(p + w for p in _NEG_PREFIXES for w in _NEUTRAL)
_CONDITIONALS = _words("if when unless whenever")
_BE = _words("is are was were be been being")
# Words that end the agent of a passive ("by the Beatles in 1965"): the rest stays where it is.
_AFTER_AGENT = _words(
    "in on at for from to during since after before as into with when if because while until unless and but"
)
#: Lower-case content words allowed to differ besides the negation ("for someone", "rock star").
SLACK = 2
#: Content words the two statements must share, and words of any kind: a long enough remainder to be
#: one statement ("Disney has an ice princess." / "Disney does not have an ice princess.").
MIN_SHARED = 2
MIN_SHARED_WORDS = 3


@memo.text_memo(0.2)  # a word list's worth: the same words come back in every text
def stem(word: str) -> str:
    """Crude, deterministic stem: irregular table, then -ies/-ied -> y, -es/-ed/-ing/-s dropped, a final
    e dropped, so "lived"/"lives"/"live" and "needs"/"need"/"needed" meet (applied to both sides alike)."""
    word = _IRREGULAR.get(word, word)
    if len(word) > 4 and word.endswith(("ies", "ied")):
        word = word[:-3] + "y"
    else:
        for suffix in ("es", "ed", "ing", "s"):
            if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
    if len(word) > 2 and word.endswith("e"):
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiousl":
        word = word[:-1]  # "stopped" -> "stopp" -> "stop"
    return word


@memo.text_memo()  # a new fact meets ~19 neighbours, each met again by later facts
def _content(tokens: tuple[str, ...], orig: tuple[str, ...]) -> tuple[int, tuple[str, ...], tuple[str, ...], bool]:
    """(negations, stemmed content words, their original spellings, whether a spelling may carry a
    negative prefix: only then can ``_negated_prefix`` change the negation count)."""
    neg = 0
    out: list[str] = []
    spelled: list[str] = []
    for k, (t, o) in enumerate(zip(tokens, orig, strict=True)):
        if t in _NEGATORS:
            neg += 1
        if t == "longer" and k > 0 and tokens[k - 1] in ("no", "any"):
            continue  # "no longer" / "any longer": the negation alone
        if t == "of" and k > 0 and tokens[k - 1] in ("capable", "incapable", "outside"):
            continue  # "capable of feeling": the frame of "feel"; "outside of X" is "outside X"
        if t == "only" and tokens[k + 1 : k + 2] == ("in",):
            continue  # "only in X" is "inside X" (and nowhere else): the negation of "outside X"
        if t == "in" and k > 0 and tokens[k - 1] == "only":
            t = "inside"
        t = _REWRITE.get(t, t)
        if t in _ANTONYMS:
            neg += 1
            t = _ANTONYMS[t]
        if t in _NEGATORS or t in _NEUTRAL:
            continue
        if t in _PREFIXED_NEUTRAL:
            neg += 1  # "impossible": the negation of a neutral frame word
            continue
        out.append(stem(t))
        spelled.append(o)
    prefixed = any(len(w) >= 4 and w.lower().startswith(_NEG_PREFIXES) for w in spelled)
    return neg, tuple(out), tuple(spelled), prefixed


@memo.text_memo()
def _stems(tokens: tuple[str, ...]) -> Counter[str]:
    return Counter(map(stem, tokens))


def _negated_prefix(x: str, y: str) -> bool:
    """Is one word the other with a negative prefix ("possible" / "impossible", "known" / "unknown")?"""
    if min(len(x), len(y)) < 4:
        return False
    return any(
        (w.startswith(p) and (w[len(p) :] == v or stem(w[len(p) :]) == stem(v)))
        for w, v in ((x, y), (y, x))
        for p in _NEG_PREFIXES
    )


def _plain_word(word: str) -> bool:
    """A lower-case word, no digits: slack may be such a word, never a name or a number."""
    return word.islower() and not any(c.isdigit() for c in word)


def polarity_flip(
    a: tuple[str, ...], b: tuple[str, ...], orig_a: tuple[str, ...], orig_b: tuple[str, ...]
) -> tuple[tuple[str, ...], str, str] | None:
    """SPEC-027 §2.2 NEGATION_FLIP: do two token sequences assert and deny one statement?

    Their polarity-neutral contents (module docstring) align with at most ``SLACK`` lower-case words
    differing, a word against its negative-prefixed form ("possible" / "impossible") counting as a
    negation; they share >= ``MIN_SHARED`` content words and ``MIN_SHARED_WORDS`` words (stemmed); and
    their negation counts differ in parity. Read as written, then with each passive clause in active
    order (``active_order``): "X can be found in Y" / "You cannot find X in Y".
    Returns (shared content, "not" for the negated side / "" for the other) or None."""
    found = _flip(a, b, orig_a, orig_b)
    if found is not None:
        return found
    order_a, order_b = active_order(a), active_order(b)
    if order_a is None and order_b is None:
        return None
    ia = order_a if order_a is not None else list(range(len(a)))
    ib = order_b if order_b is not None else list(range(len(b)))
    return _flip(
        tuple(a[k] for k in ia), tuple(b[k] for k in ib), tuple(orig_a[k] for k in ia), tuple(orig_b[k] for k in ib)
    )


class FlipSignature(NamedTuple):
    """What ``polarity_flip`` needs of one side before it can find a flip (``flip_signature``)."""

    parities: frozenset[int]  # negation count mod 2, as written and in active order
    stems: frozenset[str]  # stems of the content words of >= 4 letters (``_negated_prefix``'s floor)
    unprefixed: frozenset[str]  # stems of those words after a negative prefix ("impossible" -> "possibl")


def flip_signature(tokens: tuple[str, ...], orig: tuple[str, ...]) -> FlipSignature:
    """The ``FlipSignature`` of one token sequence, read as written and with its passive clause in
    active order (the two readings ``polarity_flip`` tries)."""
    readings = [(tokens, orig)]
    order = active_order(tokens)
    if order is not None:
        readings.append((tuple(tokens[k] for k in order), tuple(orig[k] for k in order)))
    parities: set[int] = set()
    stems: set[str] = set()
    unprefixed: set[str] = set()
    for t, o in readings:
        neg, _, spelled, _ = _content(t, o)
        parities.add(neg % 2)
        for word in spelled:
            w = word.lower()
            if len(w) < 4:
                continue
            stems.add(stem(w))
            unprefixed.update(stem(w[len(p) :]) for p in _NEG_PREFIXES if w.startswith(p))
    return FlipSignature(frozenset(parities), frozenset(stems), frozenset(unprefixed))


def combined(*signatures: FlipSignature) -> FlipSignature:
    """One signature covering several readings of a side (e.g. with a leading condition moved last)."""
    if len(signatures) == 1:
        return signatures[0]
    return FlipSignature(
        frozenset().union(*(s.parities for s in signatures)),
        frozenset().union(*(s.stems for s in signatures)),
        frozenset().union(*(s.unprefixed for s in signatures)),
    )


def may_flip(a: FlipSignature, b: FlipSignature) -> bool:
    """Can ``polarity_flip`` find a flip between any reading of side a and any of side b?

    ``_flip`` returns a flip only when the two negation counts differ in parity at its end. They
    start as the readings' counts (``_content``); only a one-word replacement of a word by its
    negative-prefixed form (``_negated_prefix``: both words >= 4 letters, the stem of one after a
    prefix equal to the stem of the other) adds to one of them. So one parity over every reading of
    both sides and no such pair of words proves None: the screen is exact, never a guess."""
    if len(a.parities | b.parities) > 1:
        return True
    return not a.unprefixed.isdisjoint(b.stems) or not b.unprefixed.isdisjoint(a.stems)


def active_order(tokens: tuple[str, ...]) -> list[int] | None:
    """SPEC-027 §2.2 NEGATION_FLIP: the order of ``tokens`` with their first passive
    clause read as active, or None when there is none. "X <be> [not] <participle> [by Y] rest" becomes
    "Y [not] <participle> X rest" ("The song was not written by the Beatles in 1965" -> "the Beatles
    not written the song ... in 1965"; "Bob Marley's face can be found in most smoke shops" ->
    "found Bob Marley's face can in most smoke shops"): polarity-neutral words drop out afterwards, so
    only the order of the content matters. The participle ends in -ed or is an irregular one
    ("found", "written"); the agent ends at a preposition or conjunction ("in", "and")."""
    n = len(tokens)
    for k in range(1, n - 1):
        if tokens[k] not in _BE:
            continue
        m = k + 1
        while m < n and tokens[m] in _NEGATORS:
            m += 1
        if m >= n:
            return None
        part = tokens[m]
        if not (part.endswith("ed") and len(part) > 4) and part not in _IRREGULAR:
            continue
        agent: list[int] = []
        rest = m + 1
        if rest < n and tokens[rest] == "by":
            end = rest + 1
            while end < n and tokens[end] not in _AFTER_AGENT:
                end += 1
            agent, rest = list(range(rest + 1, end)), end
            if not agent:
                return None
        return [*agent, *range(k, m + 1), *range(k), *range(rest, n)]
    return None


# "If A B, main": a condition of two words at least, up to its comma.
_LEADING_CONDITION = re.compile(r"^\s*(if|when|unless|whenever)((?:\s+[^\s,;]+){2,}),\s*(.+?)[.!?]?\s*$", re.I)


def conditional_last(text: str) -> str:
    """SPEC-027 §2.2 NEGATION_FLIP: "If you were on a diet, you would have to skip lunch."
    -> "you would have to skip lunch if you were on a diet": a leading conditional clause (up to its
    comma) moved after the main clause, where a copy may have put it ("You do not have to skip lunch
    if you are on a diet."). Other texts are returned unchanged."""
    m = _LEADING_CONDITION.match(text)
    if m is None:
        return text
    return f"{m.group(3)} {m.group(1).lower()}{m.group(2)}."


def _without_condition(
    ca: tuple[str, ...], sa: tuple[str, ...], cb: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A trailing condition on one side only ("... if on a diet" / "..."), dropped: an unconditional
    statement covers the conditioned case, so denying one denies the other there. Only after at least
    ``MIN_SHARED`` content words, and only when the other side states no condition."""
    if _CONDITIONALS.intersection(cb):
        return ca, sa
    at = next((k for k, w in enumerate(ca) if w in _CONDITIONALS), None)
    if at is None or at < MIN_SHARED:
        return ca, sa
    return ca[:at], sa[:at]


def _descriptor(words: tuple[str, ...], follower: str | None) -> bool:
    """A leading descriptor of a name, dropped on one side ("Rock star Keith Richards" / "Keith
    Richards", "President Obama" / "Obama"): at most three words, no digits, right before a
    capitalised word both sides share."""
    return (
        0 < len(words) <= 3
        and follower is not None
        and follower[:1].isupper()
        and not any(c.isdigit() for w in words for c in w)
    )


def _flip(
    a: tuple[str, ...], b: tuple[str, ...], orig_a: tuple[str, ...], orig_b: tuple[str, ...]
) -> tuple[tuple[str, ...], str, str] | None:
    na, ca, sa, pa = _content(a, orig_a)
    nb, cb, sb, pb = _content(b, orig_b)
    if na % 2 == nb % 2 and not (pa or pb):
        return None  # the same parity, and no prefixed word that could change it
    ca, sa = _without_condition(ca, sa, cb)
    cb, sb = _without_condition(cb, sb, ca)
    slack = 0
    shared: list[str] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, ca, cb, autojunk=False).get_opcodes():
        if tag == "equal":
            shared += ca[i1:i2]
            continue
        if tag == "delete" and i1 == j1 == 0 and _descriptor(sa[i1:i2], sa[i2] if i2 < len(sa) else None):
            continue
        if tag == "insert" and i1 == j1 == 0 and _descriptor(sb[j1:j2], sb[j2] if j2 < len(sb) else None):
            continue
        if tag == "replace" and i2 - i1 == 1 and j2 - j1 == 1 and _negated_prefix(sa[i1].lower(), sb[j1].lower()):
            na += len(ca[i1]) > len(cb[j1])
            nb += len(cb[j1]) > len(ca[i1])
            shared.append(min(ca[i1], cb[j1], key=len))
            continue
        words = sa[i1:i2] + sb[j1:j2]
        if not all(_plain_word(w) for w in words):
            return None
        slack += len(words)
    if na % 2 == nb % 2 or slack > SLACK or len(shared) < max(MIN_SHARED, 3 * slack):
        return None
    if sum((_stems(a) & _stems(b)).values()) < MIN_SHARED_WORDS:
        return None
    return tuple(shared), ("not" if na % 2 else ""), ("not" if nb % 2 else "")
