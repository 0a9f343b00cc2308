"""Near-duplicate statements that differ in one span: a copied statement with its answer swapped.

SPEC-027 §2.2 names the contradiction patterns (NUMBER_CHANGED, ENTITY_SUBSTITUTED, NEGATION_FLIP);
the drift seed (``002_ce3d030fd7bbcd69.txt``, Core Distinction) needs a claim to compare partitions
on. For free text both come from a token-level alignment of two statements: everything identical
but one span (the same substitution wherever it recurs, e.g. a name repeated twice) or one negator.
The span is the claim's *slot*; the rest, with the slot marked, is its *template*.
Two arguments of an asymmetric relation exchanged ("A is older than B" / "B is older than A") are
one claim too, its template marking both (``_argument_swap``).

A swap in the predicate ("X was acquired by Facebook / by Apple") is a conflict whoever wrote it.
A swap in subject position ("Norway / U.S. collected 39 medals") is a conflict only when it looks
like a copy of another partition's statement, not another fact in a shared phrasing ("X / Y was born
in 1950"): the two statements come from different sources AND they share a long identical remainder
or a uniqueness predicate ("the largest", "the first", "acquired", "won"), which only one subject
can hold.

API
---
- ``Substitution``: the aligned difference (template, the two span texts, kind, shared tokens,
  whether the slot sits before the predicate's verb).
- ``aligned_substitution(a, b, max_span=3) -> Substitution | None``.
- ``uniqueness_predicate(template) -> bool``.
- ``copied_statement_conflict(a, b, same_source) -> str | None``: the pattern, or None.
- ``slot_claim(a, b, same_source) -> tuple[str, str, str] | None``: (template key, value of a,
  value of b) of a conflicting pair; the arbiter's text-claim key and values.
- ``near_copy(a, b) -> bool``: the screen before alignment (token-set Jaccard >= ``NEAR_COPY``).
- ``near_copy_pairs(texts, sources, inside=None) -> set[(i, j)]``: cross-source candidate pairs.
- ``admit_copies(texts, sources, keep) -> list[bool]``: the relevance gate's mask, plus conflicting
  copies of kept statements.
- ``numbered_sibling_titles(title_a, title_b) -> bool``: two documents of one numbered series (the
  2015–16 and 2016–17 seasons of a team): their templated statements are about different subjects.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from functools import lru_cache
from typing import NamedTuple

from tests.support.text_rules_before.polarity import conditional_last, polarity_flip

NUMBER_CHANGED = "NUMBER_CHANGED"
ENTITY_SUBSTITUTED = "ENTITY_SUBSTITUTED"
NEGATION_FLIP = "NEGATION_FLIP"

SLOT = "\x00slot"
#: Longest span (tokens per side) read as one substituted value: "United States" / "Norway".
MAX_SPAN = 3
#: Shared tokens from which a subject-position swap between two sources reads as a copy.
LONG_REMAINDER = 10
#: Shared tokens from which a statement is a copied passage: a lower-case word swapped in it is a value.
COPIED_PASSAGE = 20
#: Token-set Jaccard from which two statements of different sources are checked as copies (a
#: rephrased negation, "has" / "does not have", shares less than a swapped name does).
NEAR_COPY = 0.5
#: Longest name or title (tokens per side) read as one swapped value: "Lalee's Kin: The Legacy of Cotton".
MAX_NAME = 8


def _words(text: str) -> frozenset[str]:
    """A word list written as one string (kept short by the formatter)."""
    return frozenset(text.split())


_ABBREVIATION = re.compile(r"(?:[A-Za-z]\.)+")
_TOKEN = re.compile(r"\d[\d,.]*\d%?|\d%?|\w+(?:['’.\-]\w+)*\.?", re.UNICODE)
_NEGATORS = frozenset({"not", "no", "never", "n't"})
# Verbs that open a predicate; other verbs are recognised by their -s/-ed ending (lower-case only).
_PREDICATE_VERBS = _words(
    "is are was were be been being am has have had do does did can could will would shall should may "
    "might must use run ran become became remain remains stay stays hold holds held keep kept listen "
    "default point map go went win won lead led make made bought sold wrote built took gave got beat paid "
    "owns own"
)
# Predicates only one subject can hold at a time: superlatives, firsts, acquisitions, victories.
_UNIQUE_WORDS = _words(
    "first only sole last largest biggest smallest highest lowest most least oldest youngest longest "
    "shortest fastest best worst record acquired acquisition bought purchased won wins winner champion "
    "founded founder invented inventor discovered created creator directed director capital headquartered "
    "ceo president owner owns owned"
)
# Asymmetric relations: "A <rel> B" and "B <rel> A" cannot both hold (comparatives with "than",
# temporal and spatial order, defeats).
_RELATIONAL = _words(
    "than before after ahead behind above below precedes preceded predates predated outlived outlives "
    "beat beats defeated defeats outnumber outnumbers outnumbered outclass outclasses outclassed exceeds exceeded"
)
# One verb in the agreement of either subject ("The Isley Brothers were" / "The Jackson 5 was").
_AGREEMENT = {"are": "is", "were": "was", "have": "has", "do": "does"}


class Substitution(NamedTuple):
    """The one difference of two aligned statements (lower-cased tokens; spans in original spelling)."""

    template: tuple[str, ...]
    span_a: str
    span_b: str
    kind: str
    shared: int
    before_predicate: bool
    swapped: bool = False  # two arguments of an asymmetric relation exchanged (``_argument_swap``)


@lru_cache(maxsize=100_000)
def _tokens(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(lower-cased tokens, original tokens); "isn't" -> "is" + "n't", trailing dots dropped."""
    low: list[str] = []
    orig: list[str] = []
    for m in _TOKEN.finditer(text.replace("’", "'")):
        w = m.group(0)
        if w.endswith(".") and not _ABBREVIATION.fullmatch(w):  # keep "U.S.", drop a full stop
            w = w.rstrip(".")
        if not w:
            continue
        lw = w.lower()
        if lw.endswith("n't") and len(lw) > 3:
            base = {"can't": "can", "won't": "will", "shan't": "shall"}.get(lw, lw[:-3])
            low += [base, "n't"]
            orig += [w, ""]
        elif lw == "cannot":
            low += ["can", "n't"]
            orig += [w, ""]
        else:
            low.append(lw.replace(",", "") if lw[:1].isdigit() else lw)
            orig.append(w)
    return tuple(low), tuple(orig)


def _join(words: tuple[str, ...]) -> str:
    return " ".join(w for w in words if w)


def _entity_like(token: str) -> bool:
    return token[:1].isupper() or any(c.isdigit() for c in token) or any(c.isupper() for c in token[1:])


def _has_predicate(prefix: tuple[str, ...], orig: tuple[str, ...]) -> bool:
    for k, (low, word) in enumerate(zip(prefix, orig, strict=False)):
        if low in _PREDICATE_VERBS:
            return True
        if k > 0 and word.islower() and len(low) > 3 and low.endswith(("s", "ed")) and not low.endswith("ss"):
            return True
    return False


_Op = tuple[str, int, int, int, int]


def _merge_close(ops: list[_Op], gap: int = 2) -> list[_Op]:
    """Edits at most ``gap`` equal tokens apart are one replacement: "The University of Texas at
    Austin" / "Texas Tech University" aligns "texas" inside both names, which is still one name."""
    out: list[_Op] = []
    for op in ops:
        if out and op[1] - out[-1][2] <= gap and op[3] - out[-1][4] <= gap:
            prev = out.pop()
            op = ("replace", prev[1], op[2], prev[3], op[4])
        out.append(op)
    return [("replace" if (i2 > i1 and j2 > j1) else t, i1, i2, j1, j2) for t, i1, i2, j1, j2 in out]


_FUNCTION = _words(
    "the a an in on at of for by to from with and or as after before since during its his her their this that "
    "these those"
)


def _subject_position(prefix: tuple[str, ...], orig: tuple[str, ...]) -> bool:
    """Is a slot after ``prefix`` the statement's subject? No verb before it (``_has_predicate``) and
    at most one lower-case content word ("The 1984-85 team", "In 2018, Norway"), whereas "The
    anchors on Rede Globo speak Chinese" has opened its predicate with a verb the list lacks."""
    if _has_predicate(prefix, orig):
        return False
    content = [t for t, o in zip(prefix, orig, strict=False) if o.islower() and t not in _FUNCTION and len(t) > 2]
    return len(content) < 2


def _canonical(sa: tuple[str, ...], sb: tuple[str, ...]) -> tuple[str, str]:
    """One occurrence of a swap, as the swapped value: a possessive both spans carry and hyphenated
    parts both share are context ("Fairfax's" / "Montgomery's", "Denver-Pitkin" / "Denver-Boulder")."""
    x, y = " ".join(sa), " ".join(sb)
    if x.endswith("'s") and y.endswith("'s"):
        x, y = x[:-2], y[:-2]
    px, py = x.split("-"), y.split("-")
    while len(px) > 1 and len(py) > 1 and px[0] == py[0]:
        px, py = px[1:], py[1:]
    while len(px) > 1 and len(py) > 1 and px[-1] == py[-1]:
        px, py = px[:-1], py[:-1]
    return "-".join(px), "-".join(py)


def _one_value(pairs: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The swap every occurrence makes, or None: each occurrence is the shortest one's swap, alone or
    inside a longer token ("pitkin" -> "boulder" in "denver-pitkin" -> "denver-boulder")."""
    base = min(pairs, key=lambda p: (len(p[0]) + len(p[1]), p))
    for x, y in pairs:
        if (x, y) != base and not (base[0] in x and x.replace(base[0], base[1]) == y):
            return None
    return base


def _name_like(words: tuple[str, ...]) -> bool:
    """A title or a name of several words ("Lalee's Kin: The Legacy of Cotton", "The Fast and the
    Furious"): capitalised at both ends, at least half its words capitalised."""
    words = tuple(w for w in words if w)
    if not words or not (_entity_like(words[0]) and _entity_like(words[-1])):
        return False
    return 2 * sum(_entity_like(w) for w in words) >= len(words)


def _opcodes(la: tuple[str, ...], lb: tuple[str, ...]) -> Sequence[_Op]:
    """``SequenceMatcher(None, la, lb, autojunk=False).get_opcodes()``, with a shortcut for the most
    common near-copy: one token replaced by a token found nowhere in the other statement. Then no
    matching block can hold either token, so difflib finds exactly prefix + suffix (the longer one
    first, each unique at its length); the ingest path aligns every new fact with its neighbours."""
    if len(la) == len(lb):
        diff = [i for i in range(len(la)) if la[i] != lb[i]]
        if len(diff) == 1:
            i = diff[0]
            if la[i] not in lb and lb[i] not in la:
                ops: list[_Op] = [("equal", 0, i, 0, i)] if i else []
                ops.append(("replace", i, i + 1, i, i + 1))
                if i + 1 < len(la):
                    ops.append(("equal", i + 1, len(la), i + 1, len(lb)))
                return ops
    return SequenceMatcher(None, la, lb, autojunk=False).get_opcodes()


@lru_cache(maxsize=100_000)
def aligned_substitution(a: str, b: str, max_span: int = MAX_SPAN) -> Substitution | None:
    """SPEC-027 §2.2 patterns on free text: the one value in which two statements differ.

    Token-level alignment (``difflib``, no junk heuristic). Either every difference is the same swap
    of one value, wherever it recurs, possessive or inside a hyphenated word included
    (``_one_value``): 1..``max_span`` tokens a side, more inside a long copied passage, up to
    ``MAX_NAME`` when both sides are names or titles and the shared remainder is twice as long. Or
    the two assert and deny one statement (``core.polarity.polarity_flip``: "did not see" / "saw",
    "is not ... anymore" / "is still ...", "neither ... nor" / "either ... or"). Anything else (two
    different swaps, a reworded clause) is None, as are identical statements.
    """
    la, oa = _tokens(a)
    lb, ob = _tokens(b)
    if la == lb:
        return None
    all_ops = _opcodes(la, lb)
    ops = _merge_close([op for op in all_ops if op[0] != "equal"])
    shared = sum(i2 - i1 for tag, i1, i2, _, _ in all_ops if tag == "equal")
    flip = polarity_flip(la, lb, oa, ob)
    if flip is None and (conditional_last(a) != a or conditional_last(b) != b):
        (ca, oca), (cb, ocb) = _tokens(conditional_last(a)), _tokens(conditional_last(b))
        flip = polarity_flip(ca, cb, oca, ocb)
    if flip is not None:  # first: "Neither A nor B" / "Either A or B" also reads as one swapped span
        content, mark_a, mark_b = flip
        return Substitution((SLOT, *content), mark_a, mark_b, NEGATION_FLIP, len(content), False)
    swap = _argument_swap(la, lb, oa, ob)
    if swap is not None:
        return swap
    if not ops or any(op[0] != "replace" for op in ops):
        return None
    return _value_swap(la, oa, ob, ops, shared, max_span)


def _argument_swap(
    la: tuple[str, ...], lb: tuple[str, ...], oa: tuple[str, ...], ob: tuple[str, ...]
) -> Substitution | None:
    """SPEC-027 §2.2 ENTITY_SUBSTITUTED, each argument swapped for the other: "A dog would
    respond to a bell before a Grey seal" / "A Grey seal would respond to a bell before a dog", "Rome
    is older than Paris" / "Paris is older than Rome". The same words (a verb agreeing with each
    subject, "were" / "was", aside) in two changed spans, each the other's text, of 1..``MAX_NAME``
    tokens, no negator, and between them an asymmetric relation (``_RELATIONAL``: "than", "before",
    "after", "above", "beat", "outnumber"...): "A and B met" / "B and A met" or "A married B" / "B
    married A" say one thing. The template marks both arguments."""
    na = tuple(_AGREEMENT.get(t, t) for t in la)
    nb = tuple(_AGREEMENT.get(t, t) for t in lb)
    if na == nb or sorted(na) != sorted(nb) or not _RELATIONAL.intersection(na):
        return None  # a swap keeps every word: the cheap test first
    n = len(na)
    p = next(k for k in range(n) if na[k] != nb[k])
    q = next(k for k in range(n) if na[n - 1 - k] != nb[n - 1 - k])
    ma, mb = na[p : n - q], nb[p : n - q]
    # "x M y" / "y M x", the shortest arguments first (difflib may align an argument, not the relation)
    for lx, ly in sorted(((i, j) for i in range(1, MAX_NAME + 1) for j in range(1, MAX_NAME + 1)), key=sum):
        if lx + ly >= len(ma):
            continue
        x, y, mid = ma[:lx], mb[:ly], ma[lx : len(ma) - ly]
        if ma[len(ma) - ly :] == y and mb[len(mb) - lx :] == x and mb[ly : len(mb) - lx] == mid and x != y:
            break
    else:
        return None
    if _NEGATORS.intersection(x + y) or not _RELATIONAL.intersection(mid):
        return None
    a1, a2, c1, c2 = p, p + lx, n - q - ly, n - q
    template = (*la[:a1], SLOT, *la[a2:c1], SLOT, *la[c2:])
    span_a = f"{_join(oa[a1:a2])} / {_join(oa[c1:c2])}"
    span_b = f"{_join(ob[p : p + ly])} / {_join(ob[n - q - lx : n - q])}"
    shared = n - lx - ly
    before = _subject_position(la[:a1], oa[:a1])  # "The final saw A beat B": in the predicate
    return Substitution(template, span_a, span_b, ENTITY_SUBSTITUTED, shared, before, swapped=True)


def _value_swap(
    la: tuple[str, ...], oa: tuple[str, ...], ob: tuple[str, ...], ops: list[_Op], shared: int, max_span: int
) -> Substitution | None:
    lb_spans = [tuple(w.lower() for w in ob[j1:j2] if w) for _, _, _, j1, j2 in ops]
    if any(t in _NEGATORS for _, i1, i2, _, _ in ops for t in la[i1:i2]) or any(
        t in _NEGATORS for span in lb_spans for t in span
    ):
        return None  # a negator among the changed words: a polarity question, not a value
    value = _one_value([_canonical(la[i1:i2], sb) for (_, i1, i2, _, _), sb in zip(ops, lb_spans, strict=True)])
    if value is None:
        return None
    # the first occurrence that is exactly the value names it (else the first occurrence)
    at = next((k for k, op in enumerate(ops) if _canonical(la[op[1] : op[2]], lb_spans[k]) == value), 0)
    _, i1, i2, j1, j2 = ops[at]
    sa, sb = tuple(value[0].split()), tuple(value[1].split())
    if sa != sb and sorted(sa) == sorted(sb) and not any(c.isdigit() for t in sa for c in t):
        return None  # the same words reordered ("Rome and Berlin" / "Berlin and Rome"): no new value
    span_a, span_b = _join(oa[i1:i2]), _join(ob[j1:j2])
    # a longer name is still one value inside a long copied passage ("The University of Texas at Austin")
    limit = max(max_span, min(2 * max_span, shared // 5))
    fits = 1 <= len(sa) <= limit and 1 <= len(sb) <= limit
    # names only ever raise the limit: read only for spans over it (ingest aligns every new fact)
    long_names = not fits and shared >= max(LONG_REMAINDER, 2 * max(len(sa), len(sb)))
    if long_names and _name_like(oa[i1:i2]) and _name_like(ob[j1:j2]):
        limit = max(limit, MAX_NAME)
        fits = 1 <= len(sa) <= limit and 1 <= len(sb) <= limit
    if not fits:
        return None
    num_a, num_b = (any(t[:1].isdigit() for t in s) for s in (sa, sb))
    if num_a and num_b:
        kind = NUMBER_CHANGED
    elif not num_a and not num_b and all(any(_entity_like(t) for t in o) for o in (oa[i1:i2], ob[j1:j2])):
        kind = ENTITY_SUBSTITUTED
    elif not num_a and not num_b and shared >= COPIED_PASSAGE and not _FUNCTION.intersection(sa + sb):
        kind = ENTITY_SUBSTITUTED  # content words swapped in a copied passage ("director" -> "architect")
    else:
        # in a sentence, lower-case words ("director" / "producer") may both hold, and a name for a
        # date is two different statements, not two values of one slot
        return None
    slotted: list[str] = []
    pos = 0
    for _, x1, x2, _, _ in ops:
        slotted += [*la[pos:x1], SLOT]
        pos = x2
    slotted += la[pos:]
    first = ops[0][1]
    return Substitution(tuple(slotted), span_a, span_b, kind, shared, _subject_position(la[:first], oa[:first]))


def uniqueness_predicate(template: tuple[str, ...]) -> bool:
    """Does the shared statement hold a predicate only one subject can hold ("the largest",
    "the first", "acquired", "won")? Superlatives after "the" ("the tallest") count too."""
    for k, t in enumerate(template):
        if t in _UNIQUE_WORDS:
            return True
        if k > 0 and template[k - 1] == "the" and len(t) > 4 and t.endswith("est"):
            return True
    return False


def copied_statement_conflict(a: str, b: str, same_source: bool) -> str | None:
    """SPEC-027 §2.2: the pattern by which one statement contradicts a near-copy of it.

    A substitution after the predicate's verb is a contradiction (as ``core.conflicts`` reads it). One
    in subject position is a contradiction only between different sources, and only when the
    statements share >= ``LONG_REMAINDER`` tokens or a uniqueness predicate: a copy of another
    partition's statement with its answer swapped, not a second fact in a common phrasing ("X was born
    in 1950" / "Y was born in 1950"). Two arguments of an asymmetric relation exchanged ("A is older
    than B" / "B is older than A", ``_argument_swap``) are a contradiction between two sources.
    """
    sub = aligned_substitution(a, b)
    if sub is None:
        return None
    if not sub.before_predicate:
        return sub.kind
    if same_source:
        return None
    if sub.swapped or sub.shared >= LONG_REMAINDER or uniqueness_predicate(sub.template):
        return sub.kind
    return None


def slot_claim(a: str, b: str, same_source: bool) -> tuple[str, str, str] | None:
    """The claim two conflicting near-duplicates make: (template key, value of a, value
    of b). The template is the shared statement with the slot marked ("{} collected 39 medals in
    2018 ..."); values are the spans, lower-cased with whitespace collapsed ("" for a missing negator)."""
    sub = aligned_substitution(a, b)
    if sub is None or copied_statement_conflict(a, b, same_source) is None:
        return None
    key = " ".join("{}" if t == SLOT else t for t in sub.template)
    return key, " ".join(sub.span_a.lower().split()), " ".join(sub.span_b.lower().split())


@lru_cache(maxsize=100_000)
def _token_set(text: str) -> frozenset[str]:
    return frozenset(_tokens(text)[0])


def near_copy(a: str, b: str, min_overlap: float = NEAR_COPY) -> bool:
    """May two statements be copies of each other (token-set Jaccard >= ``min_overlap``)? The
    cheap screen before the token alignment, the same for the arbiter's text claims and the envelope's
    pairs (``near_copy_pairs``); a pair above the contradiction cosine is aligned whatever its words."""
    x, y = _token_set(a), _token_set(b)
    union = len(x | y)
    return bool(union) and len(x & y) >= min_overlap * union


def near_copy_pairs(
    texts: Sequence[str], sources: Sequence[str], inside: int | None = None, min_overlap: float = NEAR_COPY
) -> set[tuple[int, int]]:
    """Pairs i < j of statements from different sources that may be copies of each other
    (token-set Jaccard >= ``min_overlap``, default ``NEAR_COPY``), whatever their cosine: a swapped
    name can move a short sentence's embedding below the pair threshold. With ``inside``, pairs of two indices >= inside
    are skipped (two facts outside the envelope). Only candidates: ``values_conflict`` decides."""
    n = len(texts)
    limit = n if inside is None else min(inside, n)
    sets = [_token_set(t) for t in texts]
    out: set[tuple[int, int]] = set()
    for i in range(limit):
        for j in range(i + 1, n):
            if not sources[i] or sources[i] == sources[j]:
                continue
            a, b = sets[i], sets[j]
            union = len(a | b)
            if union and len(a & b) >= min_overlap * union:
                out.add((i, j))
    return out


def admit_copies(texts: Sequence[str], sources: Sequence[str], keep: Sequence[bool]) -> list[bool]:
    """SPEC-024 §2.6's relevance gate: a statement the gate drops joins the candidates
    when it is a copy, from another source, of one the gate kept and the two conflict (one span
    swapped). Otherwise a true statement just under the gate leaves its swapped copy alone in the
    envelope, uncontested; with it, SPEC-027 §2 arbitration sees both."""
    out = list(keep)
    kept = [i for i, k in enumerate(keep) if k]
    sets = [_token_set(t) for t in texts]
    for j, k in enumerate(keep):
        if k or not sources[j]:
            continue
        for i in kept:
            if sources[i] == sources[j] or len(sets[i] & sets[j]) < NEAR_COPY * len(sets[i] | sets[j]):
                continue
            if copied_statement_conflict(texts[i], texts[j], same_source=False) is not None:
                out[j] = True
                break
    return out


_TITLE_WORD = re.compile(r"\w+")


def _title_template(title: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(words with every number-bearing word replaced by one placeholder, the number-bearing words)."""
    words = _TITLE_WORD.findall(title.casefold())
    numbered = tuple(w for w in words if any(c.isdigit() for c in w))
    return tuple("\x00n" if any(c.isdigit() for c in w) else w for w in words), numbered


def numbered_sibling_titles(title_a: str | None, title_b: str | None) -> bool:
    """SPEC-027 §2.2: are two documents members of one numbered series ("2015–16 Iowa
    State Cyclones men's basketball team" / "2016–17 ..."), i.e. one title template with different
    numbers? Such articles are written from one template, and a statement of each ("The Cyclones were
    coached by X, who was in his second / 1st season") names its subject (the season) only in the
    title: two facts, not a copy with its answer swapped. Untitled documents, equal titles and titles
    that differ in a word are never siblings: a copy keeps its original's title or has none."""
    if not title_a or not title_b:
        return False
    (ta, na), (tb, nb) = _title_template(title_a), _title_template(title_b)
    return bool(na) and ta == tb and na != nb
