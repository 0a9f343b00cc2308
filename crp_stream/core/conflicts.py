"""Fact Authority Resolution (SPEC-027 §2): detect intra-envelope contradictions, arbitrate by authority.

API
---
- ``FactView``: frozen view of one candidate fact (fields below; only fact_id and text required).
- ``NUMBER_CHANGED``, ``ENTITY_SUBSTITUTED``, ``NEGATION_FLIP``: the conflict patterns.
- ``extract_numbers(text) -> list[tuple[float, str | None]]``: numbers in canonical units ("120 ms"
  -> (0.12, "s"), "1 krps" -> (1000.0, "rps"), "2 GiB" -> (2147483648.0, "B"), "5%" -> (5.0, "%")).
- ``values_conflict(a, b) -> str | None`` (§2.2): the pattern, or None.
- ``SOURCE_AUTHORITY``; ``source_authority(source_type, trust) -> float`` (§2.3, SPEC-009 §4.4).
- ``authority(source_auth, recency, importance) -> NDArray`` (§2.3), broadcasting.
- ``fact_authority(fact) -> float``: ``authority`` of one ``FactView``.
- ``resolve_contradiction(a, b) -> Resolution`` (§2.3/§2.5).
- ``resolve_pair(a, b, pattern) -> Resolution``: as ``resolve_contradiction``; an unread pair
  (``core.unread_pairs``) always ties (§2.5).
- ``same_claim_duplicates(facts, vecs, threshold=0.97) -> list[list[int]]``: partition into same-value groups.
- ``detect_envelope_contradictions(facts, vecs, pair_threshold=0.85, inside=None) -> list[(i, j, pattern)]``
  (§2.2); ``inside``: only pairs touching the first n facts (the envelope) against the rest; with
  the copies of another source the text rules cannot read (``core.unread_pairs``, patterns ``UNREAD_*``).
- ``pair_pattern(a, b) -> str | None``: what ``detect_envelope_contradictions`` reads for one pair:
  ``values_conflict``, then between two sources a reworded contradiction (``core.reworded``) or an
  unread copy.
- ``stale_statement_contest(demoted, live) -> bool`` (§2.5): a stale free-text statement
  against a weaker fresher one is a tie.
- ``unresolved_conflict_note(a_text, b_text) -> str`` (§2.5).
- ``arbitrate_contradictions(facts, contradictions) -> Arbitration``: all pairs resolved at once.
- ``conflicts_resolved_header(detected, unresolved) -> str`` (§2.4/§2.5): ``"n"`` or ``"n; unresolved=m"``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import starmap
from operator import itemgetter
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from crp_stream.core import memo, reworded, unread_pairs
from crp_stream.core.authority import AUTHORITY_TIE_EPSILON, DEMOTED_STATUSES, Resolution, fact_authority
from crp_stream.core.copied_statements import copied_statement_conflict
from crp_stream.core.cosine_pairs import pairs_above
from crp_stream.core.near_copies import near_copy_pairs
from crp_stream.core.quantities import NUM_RE, Num, canonical_unit, extract_numbers, same_numbers

NUMBER_CHANGED = "NUMBER_CHANGED"
ENTITY_SUBSTITUTED = "ENTITY_SUBSTITUTED"
NEGATION_FLIP = "NEGATION_FLIP"

DEFAULT_PAIR_THRESHOLD = 0.85
#: Token-set Jaccard from which two facts of different sources are checked whatever their cosine: a
#: reworded copy ("None of X are" / "At least one of X is") shares less than a swapped name does.
REWORDED_COPY = 0.4
DEFAULT_DUPLICATE_THRESHOLD = 0.97
#: Statuses that lose any contradiction against a fact not in this set, whatever the trust.


class FactView(NamedTuple):
    """What conflict handling needs to know about one candidate fact (immutable; a named tuple, built
    for every candidate of every window: three times cheaper than a frozen dataclass)."""

    fact_id: str
    text: str
    subject: str | None = None
    attribute: str | None = None
    value: str | float | None = None
    unit: str | None = None
    source: str = ""
    source_type: str = "official"
    trust: float = 1.0
    importance: float = 1.0
    recency: float = 1.0
    status: str = "active"
    epoch_seconds: float = 0.0
    relevance: float = 0.0


_WORD_RE = re.compile(r"\w+(?:['\-./]\w+)*")
_NEGATORS = frozenset({"not", "no", "never"})
_NEG_BASE = {"cannot": "can", "can't": "can", "won't": "will", "shan't": "shall"}
_ANTONYMS = {"disabled": "enabled", "false": "true", "unsupported": "supported", "unavailable": "available"}
_BOOL_WORDS = dict.fromkeys(("true", "yes", "on", "enabled"), 1.0)
_BOOL_WORDS.update(dict.fromkeys(("false", "no", "off", "disabled"), 0.0))
_NEG = "\x00neg"


class _Claim(NamedTuple):
    """One text as ``_text_conflict`` reads it (``_claim_tokens``)."""

    low: tuple[str, ...]  # lower-cased tokens with number placeholders and negation markers
    orig: tuple[str, ...]  # the original token of each
    numbers: tuple[Num, ...]  # in canonical units (``extract_numbers``)
    plain: tuple[str, ...]  # ``low`` without the negation markers
    negations: int  # how many markers
    slots: tuple[int, ...]  # where the number placeholders are
    predicate: int  # the first index from which ``_has_predicate`` holds for a prefix (len + 1: never)


@memo.text_memo()
def _claim_tokens(text: str) -> _Claim:
    """``_Claim`` of a text. Remembered per text: duplicate groups and arbitration compare the same
    texts pair by pair."""
    text = text.replace("’", "'")
    low: list[str] = []
    orig: list[str] = []
    numbers: list[Num] = []

    def words(chunk: str) -> None:
        for w in _WORD_RE.findall(chunk):
            lw = w.lower()
            if lw in _NEG_BASE or lw.endswith("n't"):  # "isn't" -> "is" + negation
                toks: tuple[str, ...] = (_NEG_BASE.get(lw, lw[:-3]), _NEG)
            elif lw in _ANTONYMS:  # "disabled" -> "enabled" + negation
                toks = (_ANTONYMS[lw], _NEG)
            else:
                toks = (_NEG,) if lw in _NEGATORS else (lw,)
            low.extend(toks)
            orig.extend([w] * len(toks))

    pos = 0
    for m in NUM_RE.finditer(text):
        words(text[pos : m.start()])
        family, factor = canonical_unit(m.group("unit"))
        low.append(f"\x00num:{family}")
        orig.append(m.group(0))
        pos = m.end()
        # ``extract_numbers`` of the same text, from the same matches
        numbers.append((float(m.group("num").replace(",", "")) * (1e3 if m.group("k") else 1.0) * factor, family))
    words(text[pos:])
    plain = tuple(t for t in low if t != _NEG)
    slots = tuple(k for k, tok in enumerate(low) if tok.startswith("\x00num"))
    predicate = next((k for k in range(len(low)) if _predicate_at(k, low[k], orig[k])), len(low) + 1)
    return _Claim(tuple(low), tuple(orig), tuple(numbers), plain, len(low) - len(plain), slots, predicate)


def _entity_like(token: str) -> bool:
    return token[:1].isupper() or any(c.isdigit() for c in token) or any(c.isupper() for c in token[1:])


def _words(text: str) -> frozenset[str]:
    """A word list written as one string (kept short by the formatter)."""
    return frozenset(text.split())


# Verbs that open a predicate; other verbs are recognised by their -s/-ed ending.
_PREDICATE_VERBS = _words(
    "is are was were be been being am has have had do does did can could will would shall should may "
    "might must use run ran become became remain remains stay stays hold holds held keep kept listen "
    "default point map go went win won lead led make made"
)


def _predicate_at(k: int, low: str, word: str) -> bool:
    """Does token k (lower-cased ``low``, written ``word``) open a predicate (``_has_predicate``)?"""
    if low in _PREDICATE_VERBS:
        return True
    return k > 0 and word.islower() and len(low) > 3 and low.endswith(("s", "ed")) and not low.endswith("ss")


def _has_predicate(prefix: Sequence[str], orig: Sequence[str]) -> bool:
    """Does the shared prefix contain a verb, i.e. does a substitution after it sit in the predicate?
    (For a text's own prefix, ``_Claim.predicate`` answers at once: its first predicate token.)"""
    return any(_predicate_at(k, low, word) for k, (low, word) in enumerate(zip(prefix, orig, strict=True)))


def _text_conflict(a: str, b: str) -> str | None:
    ta, tb = _claim_tokens(a), _claim_tokens(b)
    la, lb, na, nb = ta.low, tb.low, ta.numbers, tb.numbers
    if la == lb:
        # Only a number in the predicate is a value: "The 1984-85 team ..." vs "The 1989-90 team ..."
        # are two subjects. Equal tuples are the same number (read from digits: never NaN), so
        # ``same_numbers`` runs only on the pairs that differ; -1: every number the same.
        first = next((k for k, x, y in zip(ta.slots, na, nb, strict=True) if x != y and not same_numbers([x], [y])), -1)
        return NUMBER_CHANGED if first >= 0 and ta.predicate < first else None  # ``_has_predicate(la[:first], ...)``
    if na != nb and not same_numbers(na, nb):
        return None  # both readings below keep every number
    if ta.plain == tb.plain and ta.negations % 2 != tb.negations % 2:
        return NEGATION_FLIP
    # One substituted span of 1-3 tokens, everything else identical (numbers included).
    short = min(len(la), len(lb))
    if abs(len(la) - len(lb)) > 2:
        return None  # the two spans differ in length as the texts do, and spans of 1-3 tokens by 2 at most
    p = next((k for k in range(short) if la[k] != lb[k]), short)
    s = next((k for k in range(short - p) if la[-1 - k] != lb[-1 - k]), short - p)
    span_a, span_b = la[p : len(la) - s], lb[p : len(lb) - s]
    if not (1 <= len(span_a) <= 3 and 1 <= len(span_b) <= 3):
        return None
    if any(t == _NEG or t.startswith("\x00num") for t in span_a + span_b) or sorted(span_a) == sorted(span_b):
        return None  # a negator is a polarity question; the same words reordered ("A and B") no new value
    oa, ob = ta.orig, tb.orig
    entity = oa[p : len(oa) - s] + ob[p : len(ob) - s]
    if not any(_entity_like(t) for t in entity):
        return None
    # A different name before the predicate is a different subject ("A is a director" vs "B is a
    # director"), not two values of one claim.
    return ENTITY_SUBSTITUTED if ta.predicate < p else None  # ``_has_predicate(la[:p], oa[:p])``


def _claim_key(f: FactView) -> tuple[str, str] | None:
    subj, attr = (f.subject or "").strip().casefold(), (f.attribute or "").strip().casefold()
    return (subj, attr) if subj and attr else None


# A structured value: (kind "num" | "bool" | "str", number in canonical unit, unit family, text).
_Val = tuple[str, float, str | None, str]


def _structured_value(f: FactView) -> _Val | None:
    """The fact's structured value, numbers in canonical units; None when it carries no value."""
    v = f.value
    if isinstance(v, bool):
        return "bool", float(v), None, ""
    if isinstance(v, int | float):
        family, factor = canonical_unit(f.unit)
        return "num", float(v) * factor, family, ""
    s = (v or "").strip()
    m = NUM_RE.fullmatch(s)
    if not s:
        return None
    if s.lower() in _BOOL_WORDS:
        return "bool", _BOOL_WORDS[s.lower()], None, ""
    if m is None:
        return "str", 0.0, None, " ".join(s.casefold().split())
    (num, unit), (family, factor) = extract_numbers(s)[0], canonical_unit(f.unit)
    # "2379" takes the unit field; "120ms" carries its own unit.
    return ("num", num * factor, family, "") if m.group("unit") is None else ("num", num, unit, "")


def _structured_pattern(va: _Val, vb: _Val) -> str | None:
    if va[0] == vb[0] == "num":
        return None if same_numbers([va[1:3]], [vb[1:3]]) else NUMBER_CHANGED
    if va == vb:
        return None
    if va[0] == vb[0] == "bool":
        return NEGATION_FLIP
    return NUMBER_CHANGED if "num" in (va[0], vb[0]) else ENTITY_SUBSTITUTED


def _statement_conflict(a: FactView, b: FactView) -> str | None:
    """The text rules: ``_text_conflict``, then, between different sources, a copied statement with one
    span swapped (``core.copied_statements.copied_statement_conflict``)."""
    return _texts_conflict(a.text, b.text, bool(a.source) and bool(b.source) and a.source != b.source)


@memo.text_memo()
def _texts_conflict(a: str, b: str, two_sources: bool) -> str | None:
    """``_statement_conflict`` of two texts, remembered per pair: the same candidates meet in every
    arbitration round of a window and in window after window."""
    found = _text_conflict(a, b)
    if found is not None or not two_sources:
        return found
    return copied_statement_conflict(a, b, same_source=False)


def values_conflict(a: FactView, b: FactView) -> str | None:
    """SPEC-027 §2.2: do two facts assert different values for the same attribute, and by which pattern?

    Both with subject+attribute: different keys never conflict; equal keys with different normalised
    values do (numbers -> NUMBER_CHANGED, booleans -> NEGATION_FLIP, names -> ENTITY_SUBSTITUTED).
    Otherwise text heuristics (SPEC-005 §3b applied pairwise): same text but a different number (unit
    aware: "1000 rps" == "1 krps"); a negation ("not", "no", "never", "n't", "cannot", disabled vs
    enabled) in exactly one; or one substituted span of <= 3 tokens with a capitalised/alphanumeric token
    after the predicate's verb (a name swapped in subject position means another subject). Between
    two sources, a near-copy differing in one span is also read: a subject swapped in a
    statement that shares a long remainder or a uniqueness predicate is a copy with its answer swapped.
    """
    if a.value is None or b.value is None:  # free text, the usual case: no structured value to compare
        if a.subject and a.attribute and b.subject and b.attribute:
            ka, kb = _claim_key(a), _claim_key(b)
            if ka is not None and kb is not None and ka != kb:
                return None
        return _statement_conflict(a, b)
    ka, kb, va, vb = _claim_key(a), _claim_key(b), _structured_value(a), _structured_value(b)
    if ka is None or kb is None or va is None or vb is None:
        return None if (ka is not None and kb is not None and ka != kb) else _statement_conflict(a, b)
    return _structured_pattern(va, vb) if ka == kb else None


def stale_statement_contest(demoted: FactView, live: FactView) -> bool:
    """SPEC-027 §2.5 with the drift seed's Decision Boundary rule 3: a free-text
    statement the arbiter marked ``stale`` (STALE_HIGH_TRUST: two later partitions assert another
    value) against a fresher statement of LOWER authority is not decided: both are served with the
    §2.5 note. Two later partitions rule out poisoning only if epochs cannot be spoofed (the seed's
    accepted trade); a copied sentence with its answer swapped is exactly what such an attacker
    writes, so the envelope hands the conflict to the model instead of silently swapping the answer.
    Structured readings (subject/attribute/value, e.g. the seed's 47 telemetry records) keep the
    seed's effect: the fresher value is served alone."""
    if demoted.status != "stale" or live.status in DEMOTED_STATUSES:
        return False
    if _structured_value(demoted) is not None or _structured_value(live) is not None:
        return False
    return fact_authority(live) < fact_authority(demoted)


def resolve_contradiction(a: FactView, b: FactView) -> Resolution:
    """SPEC-027 §2.3/§2.5: keep the higher-authority fact, suppress the other; equal authority -> tie.

    A demoted fact (status stale/superseded/expired/quarantined) loses to a non-demoted one whatever its
    trust, except in a ``stale_statement_contest`` (a tie). Authorities within 1e-9 tie: neither is
    suppressed (§2.5). Symmetric in its arguments.
    """
    aa, ab = fact_authority(a), fact_authority(b)
    da, db = a.status in DEMOTED_STATUSES, b.status in DEMOTED_STATUSES
    if da != db and not stale_statement_contest(*((a, b) if da else (b, a))):
        return Resolution(b, a, False, ab, aa) if da else Resolution(a, b, False, aa, ab)
    if da != db or abs(aa - ab) <= AUTHORITY_TIE_EPSILON:
        first, second = (a, b) if a.fact_id <= b.fact_id else (b, a)
        return Resolution(first, second, True, fact_authority(first), fact_authority(second))
    return Resolution(a, b, False, aa, ab) if aa > ab else Resolution(b, a, False, ab, aa)


def resolve_pair(a: FactView, b: FactView, pattern: str) -> Resolution:
    """SPEC-027 §2.3/§2.5 for a detected pair: ``resolve_contradiction``, except that an unread
    pair is never resolved by authority (``unread_pairs.unread_tie``)."""
    return unread_pairs.unread_tie(a, b) if unread_pairs.is_unread(pattern) else resolve_contradiction(a, b)


def _same_claim(a: FactView, b: FactView) -> bool:
    ka, kb, va, vb = _claim_key(a), _claim_key(b), _structured_value(a), _structured_value(b)
    if ka is not None and kb is not None and (ka != kb or (va is not None and vb is not None)):
        return ka == kb and va is not None and vb is not None and _structured_pattern(va, vb) is None
    equal_numbers = same_numbers(_claim_tokens(a.text).numbers, _claim_tokens(b.text).numbers)
    # an unread copy is no duplicate: collapsed, the copy could stand for the statement uncontested
    return equal_numbers and _statement_conflict(a, b) is None and _pair_pattern(a, b) is None


_KEY_FIELDS = itemgetter(1, 2, 3, 4, 5)  # FactView's text, subject, attribute, value, unit: the arguments below
# per-fact reads mapped in C over a window's ~250 candidates (no Python frame per fact)
_TEXT_OF, _SOURCE_OF = itemgetter(1), itemgetter(6)
_CLAIM_FIELDS = itemgetter(2, 3, 4)  # subject, attribute, value
_FREE_TEXT = (None, None, None)


@memo.text_memo()
def _normalised(text: str) -> str:
    """A free-text fact's text as its duplicate key holds it (``_duplicate_keys``): one str argument,
    so the memo's key is the text itself."""
    return " ".join(text.casefold().split())


@memo.text_memo(2.0, typed=True)
def _duplicate_keys(
    text: str, subject: str | None, attribute: str | None, value: str | float | None, unit: str | None
) -> tuple[object, object | None]:
    """The buckets of ``same_claim_duplicates`` a fact falls in (same normalised text and value; same
    claim and value), remembered: a fact is a candidate in window after window."""
    if value is None and not (subject and attribute):  # free text: no claim key, no value
        return ("text", _normalised(text), None, None), None
    f = FactView(fact_id="", text=text, subject=subject, attribute=attribute, value=value, unit=unit)
    key, val = _claim_key(f), _structured_value(f)
    vtok = None if val is None else (val[0], float(f"{val[1]:.12g}"), val[2], val[3])
    text_key = ("text", " ".join(text.casefold().split()), key, vtok)
    return text_key, (("value", key, vtok) if key is not None and vtok is not None else None)


def same_claim_duplicates(
    facts: Sequence[FactView],
    vecs: ArrayLike,
    threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
    gram: NDArray[np.float32] | None = None,
    norms: NDArray[np.float64] | None = None,
) -> list[list[int]]:
    """SPEC-027 §2 (crp-stream): group facts asserting the SAME value, e.g. 47 identical readings.

    Candidates: same (subject, attribute, value), same case/whitespace-normalised text, or cosine >=
    threshold; two groups join only if no cross pair differs in value or numbers (complete linkage).
    Returned as a partition (singletons too), each sorted, ordered by first index; the processor
    collapses a group into one entry with ``support`` = its size. ``gram``: the float32 cosines of
    ``vecs``, ``norms`` their rows' squared norms, if the caller has them (``pairs_above``).
    """
    n = len(facts)
    pairs = pairs_above(vecs, n, threshold, strict=False, gram=gram, norms=norms)
    # the usual case, free text only (no subject, attribute or value) and every normalised text
    # distinct: no bucket holds two facts (``_duplicate_keys``' text keys are then those texts)
    free = list(map(_CLAIM_FIELDS, facts)).count(_FREE_TEXT) == n
    if not free or len(set(map(_normalised, map(_TEXT_OF, facts)))) < n:
        keys = list(starmap(_duplicate_keys, map(_KEY_FIELDS, facts)))  # in C: no Python frame per fact
        if len({k for k, _v in keys}) < n or any(v is not None for _k, v in keys):
            buckets: dict[object, list[int]] = {}
            for i, (text_key, value_key) in enumerate(keys):
                buckets.setdefault(text_key, []).append(i)
                if value_key is not None:
                    buckets.setdefault(value_key, []).append(i)
            for bucket in buckets.values():
                if len(bucket) > 1:
                    pairs.update((bucket[0], j) for j in bucket[1:])
    if not pairs:  # the usual case: every fact alone
        return [[i] for i in range(n)]
    root, members = list(range(n)), {i: [i] for i in range(n)}

    def find(i: int) -> int:
        while root[i] != i:
            i = root[i]
        return i

    for i, j in sorted(pairs):
        lo, hi = sorted((find(i), find(j)))
        # Complete linkage: a chain A~B~C never groups an A and a C that disagree.
        if lo != hi and all(_same_claim(facts[x], facts[y]) for x in members[lo] for y in members[hi]):
            root[hi] = lo
            members[lo] += members.pop(hi)
    return sorted(sorted(g) for g in members.values())


def detect_envelope_contradictions(
    facts: Sequence[FactView],
    vecs: ArrayLike,
    pair_threshold: float = DEFAULT_PAIR_THRESHOLD,
    inside: int | None = None,
    gram: NDArray[np.float32] | None = None,
    norms: NDArray[np.float64] | None = None,
) -> list[tuple[int, int, str]]:
    """SPEC-027 §2.2: pairs ``(i, j, pattern)``, i < j, of selected facts that contradict each other.

    A pair is checked when cosine > pair_threshold (0.85) or, whatever the cosine, when both facts
    carry the same (subject, attribute) or come from different sources and share many of their
    words (``near_copy_pairs``, token-set Jaccard >= ``REWORDED_COPY``) or are one short statement
    (``reworded.short_statement_pairs``); it is reported when
    ``pair_pattern`` finds one.
    With ``inside`` = n, facts from index n on are candidates outside the envelope: only their pairs
    with the first n are checked (a copy the envelope left out is still found). ``gram``, ``norms``: as
    for ``same_claim_duplicates`` (with ``inside``, ``gram`` may hold only the first n rows).
    """
    candidates = pairs_above(vecs, len(facts), pair_threshold, strict=True, gram=gram, norms=norms, first=inside)
    texts, sources = list(map(_TEXT_OF, facts)), list(map(_SOURCE_OF, facts))
    candidates |= near_copy_pairs(texts, sources, inside, REWORDED_COPY)
    candidates |= reworded.short_statement_pairs(texts, sources, inside)
    by_key: dict[tuple[str, str] | None, list[int]] = {}
    for i, f in enumerate(facts):
        if f.subject and f.attribute:  # else no key (``_claim_key``): most facts are free text
            by_key.setdefault(_claim_key(f), []).append(i)
    by_key.pop(None, None)
    for members in by_key.values():
        candidates.update((i, j) for x, i in enumerate(members) for j in members[x + 1 :])
    if inside is not None:
        candidates = {(i, j) for i, j in candidates if i < inside}
    found = ((i, j, _pair_pattern(facts[i], facts[j])) for i, j in sorted(candidates))
    return [(i, j, p) for i, j, p in found if p is not None]


def _pair_pattern(a: FactView, b: FactView) -> str | None:
    """``values_conflict``, else, for two free-text facts of different sources, a reworded
    contradiction (``core.reworded``: arbitrated as any other), else an unread copy
    (``core.unread_pairs``): contested, never arbitrated."""
    found = values_conflict(a, b)
    if found is not None or a.value is not None or b.value is not None:
        return found
    if not a.source or not b.source or a.source == b.source or (_claim_key(a) and _claim_key(b)):
        return None
    # through the modules: their memos
    return reworded.reworded_conflict(a.text, b.text) or unread_pairs.unread_pair(a.text, b.text)


pair_pattern = _pair_pattern  # the envelope's reading of one pair, for the benches and tests


def unresolved_conflict_note(a_text: str, b_text: str) -> str:
    """SPEC-027 §2.5: the annotation injected when two contradictory facts tie on authority."""
    return (
        "NOTE: The following two facts conflict and could not be automatically\n"
        f"arbitrated. Treat with caution and prefer the more specific:\n  {a_text}\n  {b_text}"
    )


@dataclass(frozen=True)
class Arbitration:
    """All contradictions of one envelope: resolutions in pair order, losers, NOTEs for ties."""

    resolutions: tuple[tuple[int, int, str, Resolution], ...]
    suppressed: tuple[int, ...]
    notes: tuple[str, ...]  # one per unresolved (tied) contradiction


def arbitrate_contradictions(facts: Sequence[FactView], contradictions: Sequence[tuple[int, int, str]]) -> Arbitration:
    """SPEC-027 §2.3–§2.5: resolve every detected pair; suppress every loser; NOTE each live tie.

    Winners follow one total order (non-demoted first, then authority), so the best fact of a chain
    of conflicts is never suppressed. A tie (an unread pair always) whose facts both survive yields
    one NOTE (§2.5).
    """
    res = tuple((i, j, p, resolve_pair(facts[i], facts[j], p)) for i, j, p in contradictions)
    lost = {(j if r.kept is facts[i] else i) for i, j, _, r in res if not r.tie}
    notes = tuple(
        unresolved_conflict_note(r.kept.text, r.suppressed.text)
        for i, j, _, r in res
        if r.tie and i not in lost and j not in lost
    )
    return Arbitration(res, tuple(sorted(lost)), notes)


def conflicts_resolved_header(detected: int, unresolved: int = 0) -> str:
    """SPEC-027 §2.4/§2.5: CRP-Context-Conflicts-Resolved: ``"n"``, or ``"n; unresolved=m"`` with ties."""
    return f"{detected}; unresolved={unresolved}" if unresolved else str(detected)
