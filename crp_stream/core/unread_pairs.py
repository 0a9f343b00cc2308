"""Copies the text rules cannot read: contested in the envelope, never arbitrated.

SPEC-027 §2.2 arbitrates the contradictions it can read (NUMBER_CHANGED, ENTITY_SUBSTITUTED,
NEGATION_FLIP); §2.5 serves a pair it cannot arbitrate with both facts and a NOTE. The drift seed
(``002_ce3d030fd7bbcd69.txt``, Decision Boundary) asks the same of a detector that cannot tell
which side is right: say "I do not know" and refuse to act, never default to trust. Some copies
of another source's statement carry a change the text rules deliberately do not read as a
contradiction, because the same shape is also two true facts ("X / Y was born in 1950"):

- a name or number swapped in subject position over a short shared remainder ("Alyaksey
  Vasilewski / Earl Buxton (born 2 June 1993) is a Belarusian professional footballer"), a birth
  date inside the subject's parenthesis ("Bradbury (March 23 / 26, 1886 - ...)"), a repeated name
  longer than one value ("died in New York, New York / Michel Audiard, Michel Audiard");
- a negation reworded beyond ``core.polarity``: a synonym ("cannot buy" / "has the financial
  ability to buy"), a quantifier ("No letters ... are missing" / "There are letters ... missing"),
  a changed frame ("not likely to experience" / "likely to cause").

Such a pair from two different sources is UNREAD: it is never resolved by authority (nothing is
suppressed), it always ties, so the envelope carries the §2.5 note and a CONTRADICTION_UNRESOLVED
audit. The pair must be a near-copy (token-set Jaccard >= ``NEAR_COPY``, or for a negation
``MIN_CONTENT_OVERLAP`` of content words) sharing >= ``MIN_SHARED_CONTENT`` content words, so
two statements in a common phrasing ("X is an American actor" / "Y is an American actor") or
about different people in different frames never pair.

API
---
- ``UNREAD_SUBSTITUTION``, ``UNREAD_NEGATION``: the two patterns; ``UNREAD_PATTERNS``.
- ``content_words(text) -> frozenset[str]``: stems of a statement's content words.
- ``unread_pair(a, b) -> str | None``: the pattern of two statements (of different sources, the
  text rules having found no contradiction), or None.
- ``is_unread(pattern) -> bool``.
- ``unread_tie(a, b) -> Resolution``: the arbitration of an unread pair, always a tie.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crp_stream.core import memo, polarity, substitution
from crp_stream.core.authority import Resolution, fact_authority
from crp_stream.core.copied_statements import copied_statement_conflict
from crp_stream.core.substitution import MAX_NAME, MAX_SPAN, NEAR_COPY, SLOT, near_copy

if TYPE_CHECKING:  # annotations only: conflicts imports this module
    from crp_stream.core.conflicts import FactView

UNREAD_SUBSTITUTION = "UNREAD_SUBSTITUTION"
UNREAD_NEGATION = "UNREAD_NEGATION"
UNREAD_REWORDING = "UNREAD_REWORDING"
UNREAD_PATTERNS = frozenset({UNREAD_SUBSTITUTION, UNREAD_NEGATION, UNREAD_REWORDING})

#: Content words a copy must share besides what it changed: "X was born in 1950" shares two.
MIN_SHARED_CONTENT = 3
#: Content-word Jaccard from which two statements of opposite polarity are one statement reworded.
MIN_CONTENT_OVERLAP = 0.6
#: A whole clause reworded ("did not predate" / "existed before") keeps less of the words but more of
#: them: content-word Jaccard and shared content words of ``reworded_clause``.
CLAUSE_OVERLAP = 0.5
CLAUSE_SHARED = 4
_NEG_PREFIXES = ("un", "im", "in", "ir", "il", "non", "dis")


def _words(text: str) -> frozenset[str]:
    """A word list written as one string (kept short by the formatter)."""
    return frozenset(text.split())


# Words that carry no content of their own: articles, prepositions, auxiliaries and modals,
# pronouns, negators, and the frames of a reworded statement ("it is true that", "there are").
_STOP = _words(
    "the a an in on at of for by to from with and or as after before since during its his her their this "
    "that these those do does did is are was were be been being am can could will would may might shall "
    "should must have has had any some my your our it one someone anyone you he she they we them him "
    "still anymore yes either also possible possibly able capable not no never n't none nobody nothing "
    "neither nor true there while which who whom whose than then so but if when"
)
STOP_WORDS = _STOP  # the same words for the reworded-statement rules (``core.reworded``)
# Verbs of an asymmetric relation, as stems (``polarity.stem``): "A outnumber B" / "B outnumber A".
_RELATIONAL = frozenset(
    map(polarity.stem, _words("precedes predates outlives beats defeats outnumbers outclasses exceeds surpasses"))
)


@memo.text_memo()
def content_words(text: str) -> frozenset[str]:
    """The stems (``polarity.stem``) of a statement's content words: its tokens without ``_STOP``."""
    return frozenset(polarity.stem(t) for t in substitution._token_set(text) if t not in _STOP)


def _names(text: str) -> frozenset[str]:
    """Names and numbers after the first token (a capital there only opens the sentence)."""
    low, orig = substitution._tokens(text)
    return frozenset(
        t for t, o in zip(low[1:], orig[1:], strict=True) if o and (o[:1].isupper() or any(c.isdigit() for c in o))
    )


def _negations(text: str) -> int:
    """Negators in a statement, "cannot" and "isn't" included (``substitution._tokens`` splits them)."""
    return sum(t in polarity.NEGATORS for t in substitution._tokens(text)[0])


def _repeated_value(span: str) -> bool:
    """A span that is one value of <= ``MAX_SPAN`` words written two or three times ("New York, New
    York"): the same swap wherever it recurs, which the alignment merges into one longer span."""
    words = tuple(w.strip(",;").lower() for w in span.split())
    return any(
        len(words) % k == 0 and len(words) // k <= MAX_SPAN and words == words[: len(words) // k] * k for k in (2, 3)
    )


def _unread_substitution(a: str, b: str) -> bool:
    """One span swapped (``aligned_substitution``: a value of <= ``MAX_SPAN`` tokens a side, or one
    repeated) that the copied-statement rule declines, between near-copies sharing >=
    ``MIN_SHARED_CONTENT`` content words besides it. Longer spans are reworded clauses, not values;
    a negation besides the swap is a second edit."""
    if _negations(a) % 2 != _negations(b) % 2:
        return False
    sub = substitution.aligned_substitution(a, b)  # through the module: its memo
    if sub is None:
        sub = substitution.aligned_substitution(a, b, MAX_NAME)
        if sub is None or not (_repeated_value(sub.span_a) and _repeated_value(sub.span_b)):
            return False
    if copied_statement_conflict(a, b, same_source=False) is not None:
        return False
    shared = frozenset(polarity.stem(t) for t in sub.template if t != SLOT and t not in _STOP)
    return len(shared) >= MIN_SHARED_CONTENT and near_copy(a, b, NEAR_COPY)


def _unread_negation(a: str, b: str) -> bool:
    """Opposite polarity (negator counts differ in parity) over the same names and numbers and
    >= ``MIN_CONTENT_OVERLAP`` of the content words, >= ``MIN_SHARED_CONTENT`` of them shared."""
    if _negations(a) % 2 == _negations(b) % 2 or _names(a) != _names(b):
        return False
    ca, cb = content_words(a), content_words(b)
    shared = len(ca & cb)
    return shared >= MIN_SHARED_CONTENT and shared >= MIN_CONTENT_OVERLAP * len(ca | cb)


def _loose_names(text: str) -> frozenset[str]:
    """``_names`` with a possessive dropped ("Robinson's" -> "robinson")."""
    return frozenset(t[:-2] if t.endswith("'s") else t for t in _names(text))


def _plain_tokens(text: str) -> frozenset[str]:
    return frozenset(t[:-2] if t.endswith("'s") else t for t in substitution._tokens(text)[0])


def _prefixed_negations(ca: frozenset[str], cb: frozenset[str]) -> tuple[int, frozenset[str]]:
    """Words of ``ca`` that are a word of ``cb`` with a negative prefix ("unimportant" / "important"):
    how many, and ``ca`` with each written as its base."""
    count, out = 0, set(ca)
    for w in ca:
        base = next((w[len(p) :] for p in _NEG_PREFIXES if w.startswith(p) and w[len(p) :] in cb), None)
        if base is not None and len(base) >= 4 and base not in ca:
            count += 1
            out.discard(w)
            out.add(base)
    return count, frozenset(out)


def reworded_clause(a: str, b: str) -> bool:
    """SPEC-027 §2.5 for a copy with a whole clause reworded: the drift seed's "refuse to act" where
    no rule reads it. Either opposite polarity (negators, or a word against its negative-prefixed
    form: "unimportant" / "important") with >= ``CLAUSE_SHARED`` content words shared and a Jaccard
    >= ``CLAUSE_OVERLAP`` ("The Qwerty keyboard layout existed before the invention of computers" /
    "... did not predate computers"); or the same content words of an asymmetric relation in another
    order ("American teams outnumber Canadian teams in the National Hockey League" / "Canadian teams
    in National Hockey League outnumber American teams"). Each side's names (a possessive dropped)
    must be words of the other: "1941 Operation Barbarossa" / "Operation Barbarossa" pair, "Oprah
    Winfrey" / "Bill Gates" never."""
    la, lb = _plain_tokens(a), _plain_tokens(b)
    if not (_loose_names(a) <= lb and _loose_names(b) <= la):
        return False
    ca, cb = content_words(a), content_words(b)
    pa, ca = _prefixed_negations(ca, cb)
    pb, cb = _prefixed_negations(cb, ca)
    shared = len(ca & cb)
    if (_negations(a) + pa) % 2 != (_negations(b) + pb) % 2:
        return shared >= CLAUSE_SHARED and shared >= CLAUSE_OVERLAP * len(ca | cb)
    if ca != cb or len(ca) < CLAUSE_SHARED or not _RELATIONAL.intersection(ca):
        return False
    order_a = [polarity.stem(t) for t in substitution._tokens(a)[0] if t not in _STOP]
    order_b = [polarity.stem(t) for t in substitution._tokens(b)[0] if t not in _STOP]
    return order_a != order_b


@memo.text_memo()
def unread_pair(a: str, b: str) -> str | None:
    """SPEC-027 §2.5 and the drift seed's Decision Boundary ("refuse to act"): is a statement and
    another source's statement a copy the text rules cannot read? ``UNREAD_SUBSTITUTION`` (one span
    swapped where the copied-statement rule reads no contradiction), ``UNREAD_NEGATION`` (a
    negation reworded beyond ``core.polarity``), or None. Called where ``conflicts.values_conflict``
    found no contradiction; the caller checks that the two sources differ. Symmetric."""
    if a == b:
        return None
    if _unread_substitution(a, b) and _unread_substitution(b, a):  # the alignment read both ways
        return UNREAD_SUBSTITUTION
    if _unread_negation(a, b):
        return UNREAD_NEGATION
    return UNREAD_REWORDING if reworded_clause(a, b) else None


def is_unread(pattern: str) -> bool:
    """Is a contradiction's pattern an unread pair's (always a tie, SPEC-027 §2.5)?"""
    return pattern in UNREAD_PATTERNS


def unread_tie(a: FactView, b: FactView) -> Resolution:
    """SPEC-027 §2.5 with the drift seed's "refuse to act": an unread pair is never resolved, whatever
    the two facts' authority or status; both stay (``kept`` is the lower fact_id, as for any tie)."""
    first, second = (a, b) if a.fact_id <= b.fact_id else (b, a)
    return Resolution(first, second, True, fact_authority(first), fact_authority(second))


__all__ = [
    "CLAUSE_OVERLAP",
    "CLAUSE_SHARED",
    "MIN_CONTENT_OVERLAP",
    "MIN_SHARED_CONTENT",
    "STOP_WORDS",
    "UNREAD_NEGATION",
    "UNREAD_PATTERNS",
    "UNREAD_REWORDING",
    "UNREAD_SUBSTITUTION",
    "content_words",
    "is_unread",
    "reworded_clause",
    "unread_pair",
    "unread_tie",
]
