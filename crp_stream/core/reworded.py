"""Reworded contradictions read between two sources (SPEC-027 §2.2).

SPEC-027 §2.2 arbitrates the contradictions it can read; the drift seed
(``002_ce3d030fd7bbcd69.txt``, Decision Boundary) asks that poison never be served as if nothing
disagreed with it. Copies of another source's statement that ``core.polarity`` and
``core.substitution`` decline, because their edit is not one clean span, are read here:

- **quantifier negation** (``quantifier_negation``): "None of X are Y" / "At least one of X is Y",
  "No X is Y" / "Some (multiple, several, many) X are Y", "No X are Y" / "There are X Y";
- **short statement negation** (``short_statement_negation``): two or three content words and a
  negator ("Water has viscosity" / "Water does not have viscosity"), below the word count the
  polarity rule needs;
- **spelling variants** (``spelling_variants``): a compound written with a space, a hyphen or as one
  word ("slam dunk" / "slam-dunk" / "slamdunk") is one token for copy detection;
- **two spans swapped at once** (``two_span_swap``): an otherwise copied sentence with two or three
  values of one list changed after its predicate ("red, white, and blue" / "green, yellow, and
  black").

Each applies only between two sources, as the copied-statement rule does: within one source a
templated sentence is another fact. ``reworded_conflict`` is the pattern of the first that reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from crp_stream.core import memo, substitution
from crp_stream.core.copied_statements import copied_statement_conflict
from crp_stream.core.polarity import NEGATORS, stem
from crp_stream.core.substitution import (
    ENTITY_SUBSTITUTED,
    LONG_REMAINDER,
    MAX_SPAN,
    NEAR_COPY,
    NEGATION_FLIP,
    NUMBER_CHANGED,
    near_copy,
)
from crp_stream.core.unread_pairs import STOP_WORDS


def _words(text: str) -> frozenset[str]:
    """A word list written as one string (kept short by the formatter)."""
    return frozenset(text.split())


_NEGATIVE_QUANTIFIERS = _words("no none nobody nothing")
# Words that assert at least one: "some", "several", "there are" (a frame), "at least one".
_EXISTENTIAL = _words("some someone somebody something multiple several many there least")
# Quantifier words that carry no content once the quantifier is read.
_QUANTIFIER_WORDS = _words("least multiple several many all every each")
_RELATIONAL = _words(
    "than before after above below precedes preceded predates predated outlived outlives beat beats defeated "
    "defeats outnumber outnumbers outnumbered outclass outclasses outclassed exceeds exceeded exceed"
)
#: Content words a quantified statement must keep: "No X is Y" with X and Y of one word is too little.
MIN_QUANTIFIED_CONTENT = 3
#: Content words of a short statement (fewer and the polarity rule's word count is not met).
SHORT_STATEMENT = (2, 3)
#: Spans changed at once in a copied sentence (one is ``core.substitution``'s rule).
MAX_SWAPPED_SPANS = 3
# What may stand between the values of one list (commas are no tokens).
_LIST_JOINS = _words("and or nor &")
#: Letters each part of a compound needs ("slam dunk"): "a lot" / "alot" is no name.
_MIN_PART = 3


def _tokens(text: str) -> tuple[str, ...]:
    """Lower-cased tokens with a possessive dropped ("Carol's" -> "carol")."""
    return tuple(t[:-2] if t.endswith("'s") else t for t in substitution._tokens(text)[0])


def _content(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """Stems of the content words, in order: quantifiers, frames and auxiliaries dropped."""
    return tuple(stem(t) for t in tokens if t not in STOP_WORDS and t not in _QUANTIFIER_WORDS)


def _negators(tokens: tuple[str, ...]) -> int:
    return sum(t in NEGATORS for t in tokens)


def _existential(tokens: tuple[str, ...]) -> bool:
    """Does a statement assert at least one ("some", "at least one", "there are")?"""
    if "least" in tokens and "at" in tokens:
        return True
    return any(t in _EXISTENTIAL and t != "least" for t in tokens)


def quantifier_negation(a: str, b: str) -> bool:
    """SPEC-027 §2.2 NEGATION_FLIP by quantifier: one statement denies any X ("none of", "no"), the
    other asserts at least one ("at least one of", "some", "multiple", "there are"), over the same
    content words (stems: "Powers" / "Power", "is" / "are" dropped), at least
    ``MIN_QUANTIFIED_CONTENT`` of them. The negative quantifier is the only negator. Where a relation
    orders its arguments ("than", "exceeds"), the content must also keep its order."""
    ta, tb = _tokens(a), _tokens(b)
    for neg, pos in ((ta, tb), (tb, ta)):
        negators = [t for t in neg if t in NEGATORS]
        if len(negators) != 1 or negators[0] not in _NEGATIVE_QUANTIFIERS:
            continue
        if _negators(pos) or not _existential(pos):
            continue
        cn, cp = _content(neg), _content(pos)
        if len(set(cn)) < MIN_QUANTIFIED_CONTENT or set(cn) != set(cp):
            continue
        if _RELATIONAL.intersection(neg + pos) and cn != cp:
            continue
        return True
    return False


def short_statement_negation(a: str, b: str) -> bool:
    """SPEC-027 §2.2 NEGATION_FLIP on a statement of ``SHORT_STATEMENT`` content words: the same
    content words in the same order (stems), negator counts of different parity ("Water has
    viscosity" / "Water does not have viscosity", "Cranes cannot slamdunk" / "Crane can slamdunk")."""
    ta, tb = _tokens(a), _tokens(b)
    if _negators(ta) % 2 == _negators(tb) % 2:
        return False
    ca, cb = _content(ta), _content(tb)
    return SHORT_STATEMENT[0] <= len(ca) <= SHORT_STATEMENT[1] and ca == cb


_ALPHA = re.compile(r"[a-z]+")


def _compounds(tokens: tuple[str, ...]) -> dict[str, tuple[str, str] | None]:
    """Compounds a statement may write: joined spelling -> its two parts (None: written as one word)."""
    out: dict[str, tuple[str, str] | None] = {}
    for t in tokens:
        parts = t.split("-")
        if len(parts) == 2 and all(_ALPHA.fullmatch(p) and len(p) >= _MIN_PART for p in parts):
            out["".join(parts)] = (parts[0], parts[1])
        elif _ALPHA.fullmatch(t):
            out.setdefault(t, None)
    for x, y in pairwise(tokens):
        if len(x) >= _MIN_PART and len(y) >= _MIN_PART and _ALPHA.fullmatch(x) and _ALPHA.fullmatch(y):
            out.setdefault(x + y, (x, y))
    return out


@memo.text_memo()
def spelling_variants(a: str, b: str) -> tuple[str, str]:
    """SPEC-027 §2.2 copy detection over spelling: a compound one statement writes with a space or a
    hyphen and the other as one word or with the other separator ("slam dunk" / "slamdunk" /
    "slam-dunk") is written as one word in both. Returns the two texts (unchanged when none differ)."""
    ta, tb = _tokens(a), _tokens(b)
    ca, cb = _compounds(ta), _compounds(tb)
    set_a, set_b = frozenset(ta), frozenset(tb)
    for joined in ca.keys() & cb.keys():
        parts = ca[joined] or cb[joined]
        if parts is None:
            continue
        x, y = parts
        # written alike on both sides: nothing to merge ("slam dunk" twice, "the" "sea" inside a phrase)
        written_a = joined in set_a, f"{x}-{y}" in set_a
        written_b = joined in set_b, f"{x}-{y}" in set_b
        if written_a == written_b:
            continue
        pattern = re.compile(rf"\b{re.escape(x)}[\s\-]+{re.escape(y)}\b", re.I)
        a, b = pattern.sub(joined, a), pattern.sub(joined, b)
    return a, b


def two_span_swap(a: str, b: str) -> str | None:
    """SPEC-027 §2.2 on a copied sentence with two or three values of one list changed at once:
    every difference a replacement of 1..``MAX_SPAN`` tokens a side (no negator), at most
    ``MAX_SWAPPED_SPANS`` of them, nothing but "and" / "or" between them, the first after the
    predicate's verb, >= ``LONG_REMAINDER`` tokens
    shared and token-set Jaccard >= ``NEAR_COPY`` ("... streaks of red, white, and blue" / "...
    streaks of green, yellow, and black"). NUMBER_CHANGED when every span is a number, else
    ENTITY_SUBSTITUTED; None otherwise (one span is ``core.substitution``'s rule)."""
    if not near_copy(a, b, NEAR_COPY):
        return None
    (la, oa), (lb, _) = substitution._tokens(a), substitution._tokens(b)
    ops = substitution._opcodes(la, lb)
    changed = [op for op in ops if op[0] != "equal"]
    if not 2 <= len(changed) <= MAX_SWAPPED_SPANS or any(op[0] != "replace" for op in changed):
        return None
    if sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal") < LONG_REMAINDER:
        return None
    spans = [(la[i1:i2], lb[j1:j2]) for _, i1, i2, j1, j2 in changed]
    if any(not (1 <= len(x) <= MAX_SPAN and 1 <= len(y) <= MAX_SPAN) for x, y in spans):
        return None
    if any(NEGATORS.intersection(x + y) for x, y in spans):
        return None  # a negator among the changes: a polarity question
    # one list of values ("red, white, and blue"): separate slots are a template's ("a 27–5 overall
    # record and an 11–3 conference record"), two facts as often as not
    if any(not _LIST_JOINS.issuperset(la[p[2] : q[1]]) for p, q in pairwise(changed)):
        return None
    if sorted(t for x, _ in spans for t in x) == sorted(t for _, y in spans for t in y):
        return None  # the same words moved: no new value
    first = changed[0][1]
    if substitution._subject_position(la[:first], oa[:first]):
        return None  # two subjects in a shared phrasing are two facts
    numeric = all(t[:1].isdigit() for x, y in spans for t in x + y)
    return NUMBER_CHANGED if numeric else ENTITY_SUBSTITUTED


# ``_content``'s dropped words, also with a possessive (``_tokens`` drops it first): a token is a
# content word exactly when it is not in this set, so content words are counted without stemming
_NOT_CONTENT = STOP_WORDS | _QUANTIFIER_WORDS
_NOT_CONTENT_ANY = _NOT_CONTENT | {f"{w}'s" for w in _NOT_CONTENT}


@memo.text_memo()
def _short_key(text: str) -> str | None:
    """A short statement's content stems run together ("Cranes cannot slam dunk" and "Crane can
    slamdunk": "cranslamdunk"), or None past ``SHORT_STATEMENT``'s upper bound plus one (a compound
    written in two words counts two)."""
    low = substitution._tokens(text)[0]
    # most statements are long: counted in C, stemmed only when short
    words = len(low) - sum(map(_NOT_CONTENT_ANY.__contains__, low))
    if not SHORT_STATEMENT[0] <= words <= SHORT_STATEMENT[1] + 1:
        return None
    return "".join(_content(_tokens(text)))


def short_statement_pairs(
    texts: Sequence[str], sources: Sequence[str], inside: int | None = None
) -> set[tuple[int, int]]:
    """Pairs i < j (i < ``inside``) of short statements from different sources with the same content
    words, spelling variants aside: candidates for ``short_statement_negation``, which share too few
    tokens for the near-copy screen ("Water has viscosity" / "Water does not have viscosity")."""
    if len(set(sources) - {""}) < 2:  # the usual case, one source: no pair of different sources
        return set()
    return same_key_pairs([_short_key(t) if s else None for t, s in zip(texts, sources, strict=True)], sources, inside)


def same_key_pairs(
    keys: Sequence[str | None], sources: Sequence[str], inside: int | None = None
) -> set[tuple[int, int]]:
    """Pairs i < j (i < ``inside``) with the same key (None: no key) from different sources."""
    limit = len(keys) if inside is None else min(inside, len(keys))
    by_key: dict[str, list[int]] = {}
    for k, key in enumerate(keys):
        if key is not None:
            by_key.setdefault(key, []).append(k)
    return {
        (i, j)
        for group in by_key.values()
        for x, i in enumerate(group)
        for j in group[x + 1 :]
        if i < limit and sources[i] != sources[j]
    }


@memo.text_memo()
def reworded_conflict(a: str, b: str) -> str | None:
    """SPEC-027 §2.2 between two sources, where ``conflicts.values_conflict`` found nothing: the
    pattern of the first rule that reads the pair, spelling variants merged first (the copied-statement
    rule then runs again on the merged texts), or None. Symmetric."""
    if a == b:
        return None
    ma, mb = spelling_variants(a, b)
    if (ma, mb) != (a, b):
        found = copied_statement_conflict(ma, mb, same_source=False)
        if found is not None:
            return found
    if quantifier_negation(ma, mb) or short_statement_negation(ma, mb):
        return NEGATION_FLIP
    return two_span_swap(ma, mb) or two_span_swap(mb, ma)


__all__ = [
    "MAX_SWAPPED_SPANS",
    "MIN_QUANTIFIED_CONTENT",
    "SHORT_STATEMENT",
    "quantifier_negation",
    "reworded_conflict",
    "same_key_pairs",
    "short_statement_negation",
    "short_statement_pairs",
    "spelling_variants",
    "two_span_swap",
]
