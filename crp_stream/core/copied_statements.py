"""SPEC-027 §2.2: one statement against a near-copy of it with a span swapped: the
pattern of the conflict, and the claim the two make (``core.substitution`` aligns them)."""

from __future__ import annotations

from collections.abc import Sequence

from crp_stream.core import substitution
from crp_stream.core.substitution import _UNIQUE_WORDS, LONG_REMAINDER, NEAR_COPY, SLOT, aligned_substitution


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


def admit_copies(texts: Sequence[str], sources: Sequence[str], keep: Sequence[bool]) -> list[bool]:
    """SPEC-024 §2.6's relevance gate: a statement the gate drops joins the candidates
    when it is a copy, from another source, of one the gate kept and the two conflict (one span
    swapped). Otherwise a true statement just under the gate leaves its swapped copy alone in the
    envelope, uncontested; with it, SPEC-027 §2 arbitration sees both."""
    out = list(keep)
    kept = [i for i, k in enumerate(keep) if k]
    sets = [substitution._token_set(t) for t in texts]  # through the module: its memo is swapped there
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


__all__ = ["admit_copies", "copied_statement_conflict", "slot_claim", "uniqueness_predicate"]
