"""The n-gram output guard (SPEC-024 §5): a 6-gram blacklist of prior window output, as a penalty.

API
---
- ``NGRAM_N = 6``; ``NGRAM_PENALTY_PER_MATCH = 0.15``; ``NGRAM_PENALTY_CAP = 0.80``.
- ``tokenize(text) -> list[str]``: lower-cased unicode word tokens (``\\w+``).
- ``ngrams(tokens, n=6) -> set[str]``: the token n-grams, space-joined (empty if fewer than n tokens).
- ``update_ngram_blacklist(blacklist, window_output, n=6) -> frozenset[str]`` (§5.1), pure: returns
  the union, never mutates.
- ``ngram_overlap(text, blacklist, n=6) -> int``: distinct n-grams of ``text`` found in the blacklist.
- ``ngram_overlaps(texts, blacklist, n=6) -> list[int]``: ``ngram_overlap`` of each text, faster.
- ``gram_hash_array(text, n=6)``, ``ngram_overlaps_hashed(texts, hashes, blacklist, n=6)``: the same
  counts from n-gram hashes the caller keeps per fact.
- ``ngram_penalty(overlaps) -> NDArray[float64]`` (§5.2): ``min(0.80, 0.15 * overlaps)``.
- ``ngram_guard_activations(penalties) -> int`` (§8.3): candidates with a non-zero penalty.
- ``NGRAM_DIAGNOSTIC_SHARE = 0.20``; ``ngram_guard_diagnostic(activations, candidates) -> str | None``
  (§5.3): the operator diagnostic when more than 20% of the candidates were penalised, else None.

>>> bl = update_ngram_blacklist(frozenset(), "Kubernetes uses a flat network model for pods")
>>> ngram_overlap("kubernetes uses a flat network model!", bl)
1
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence, Set
from itertools import repeat

import numpy as np
from numpy.typing import ArrayLike, NDArray

from crp_stream.core import memo

NGRAM_N = 6
NGRAM_PENALTY_PER_MATCH = 0.15
NGRAM_PENALTY_CAP = 0.80
NGRAM_DIAGNOSTIC_SHARE = 0.20

_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """SPEC-024 §5.1: ``tokenize(window_output)``: lower-cased unicode word tokens, punctuation dropped."""
    return _WORD.findall(text.lower())


def ngrams(tokens: Sequence[str], n: int = NGRAM_N) -> set[str]:
    """SPEC-024 §5.1: the set of ``tokens[i:i+n]``, each joined by single spaces."""
    if n < 1:
        raise ValueError("n must be >= 1")
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def update_ngram_blacklist(blacklist: Set[str], window_output: str, n: int = NGRAM_N) -> frozenset[str]:
    """SPEC-024 §5.1: after each window, every 6-gram of its output joins the session blacklist."""
    return frozenset(blacklist) | frozenset(ngrams(tokenize(window_output), n))


def ngram_overlap(text: str, blacklist: Set[str], n: int = NGRAM_N) -> int:
    """SPEC-024 §5.2: ``count_matching_ngrams``: distinct n-grams of a fact's text in the blacklist."""
    if not blacklist:
        return 0
    return len(ngrams(tokenize(text), n) & blacklist)


def _hash_grams(text: str, n: int) -> set[int]:
    tokens = tokenize(text)
    return {hash(g) for g in zip(*(tokens[k:] for k in range(n)), strict=False)}  # n shorter lists


@memo.text_memo(2.0)
def _gram_hashes(text: str, n: int) -> tuple[int, ...]:
    """Hashes of the text's n-grams as token tuples (made in C by ``zip``, no joined strings); a
    blacklist n-gram splits back into the same tuple (tokens hold no space), see ``_listed``."""
    return tuple(_hash_grams(text, n))


def gram_hash_array(text: str, n: int = NGRAM_N) -> NDArray[np.int64]:
    """``_gram_hashes`` of a text as an int64 array, not remembered: for a caller that keeps it per
    fact (the fact cache) and hands it to ``ngram_overlaps_hashed``."""
    return np.fromiter(_hash_grams(text, n), dtype=np.int64)


@memo.text_memo(0.5)
def _gram_hash(gram: str) -> int:
    """A blacklist n-gram's hash as ``_gram_hashes`` makes it: a session's blacklist is read again in
    every window, so each of its n-grams is split once."""
    return hash(tuple(gram.split(" ")))


def _listed(blacklist: Set[str]) -> set[int]:
    return set(map(_gram_hash, blacklist))


@memo.text_memo(0.2)
def _gram_set(text: str, n: int) -> frozenset[str]:
    """The n-grams of a text the screen flagged: few, and flagged again window after window."""
    return frozenset(ngrams(tokenize(text), n))


def ngram_overlaps(texts: Sequence[str], blacklist: Set[str], n: int = NGRAM_N) -> list[int]:
    """SPEC-024 §5.2: ``ngram_overlap`` of each text (a window's candidates against one blacklist).

    The same counts, faster: a text's n-gram hashes are remembered (fact texts are scored again in
    every window), and only a text with a hash in the blacklist's is counted n-gram by n-gram; a
    text without one has no n-gram in it.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    if not blacklist or not texts:
        return [0] * len(texts)
    listed = _listed(blacklist)
    return [0 if listed.isdisjoint(_gram_hashes(t, n)) else len(_gram_set(t, n) & blacklist) for t in texts]


_SCREEN_BITS = 1 << 16  # the hashed screen's table: a few texts in a window's hundreds flagged in vain


def ngram_overlaps_hashed(
    texts: Sequence[str], hashes: Sequence[NDArray[np.int64] | None], blacklist: Set[str], n: int = NGRAM_N
) -> list[int]:
    """``ngram_overlaps`` with each text's ``gram_hash_array`` given (None: looked up here), screened
    in numpy: a text with an n-gram hash whose low bits are a blacklisted hash's is counted exactly
    (a text with a blacklisted n-gram always is; one flagged in vain counts 0)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    if not blacklist or not texts:
        return [0] * len(texts)
    given: list[NDArray[np.int64]] = list(hashes)  # type: ignore[arg-type]  # filled below where None
    if any(map(operator.is_, given, repeat(None))):  # (``in`` would compare the arrays)
        given = [
            np.fromiter(_gram_hashes(t, n), dtype=np.int64) if h is None else h
            for t, h in zip(texts, given, strict=True)
        ]
    lens = np.fromiter(map(len, given), dtype=np.int64, count=len(given))
    table = _frozen_table(blacklist) if isinstance(blacklist, frozenset) else _screen_table(blacklist)
    hit = table[np.concatenate(given) & (_SCREEN_BITS - 1)]
    out = [0] * len(texts)
    flagged = np.bincount(np.repeat(np.arange(len(texts)), lens)[hit], minlength=len(texts))
    for i in np.flatnonzero(flagged).tolist():  # ascending, each flagged text once
        out[i] = len(_gram_set(texts[i], n) & blacklist)
    return out


def _screen_table(blacklist: Set[str]) -> NDArray[np.bool_]:
    """The hashed screen's table: the low bits of every blacklisted n-gram's hash."""
    listed = _listed(blacklist)
    table = np.zeros(_SCREEN_BITS, dtype=bool)
    table[np.fromiter(listed, dtype=np.int64, count=len(listed)) & (_SCREEN_BITS - 1)] = True
    table.flags.writeable = False  # shared by the memo below
    return table


@memo.text_memo(0.0002)
def _frozen_table(blacklist: frozenset[str]) -> NDArray[np.bool_]:
    """``_screen_table`` of a session's blacklist, remembered: a window screens its candidates, then
    the connectors that join them, against the same one."""
    return _screen_table(blacklist)


def ngram_penalty(overlaps: ArrayLike) -> NDArray[np.float64]:
    """SPEC-024 §5.2: ``ngram_penalty = min(0.80, 0.15 * overlap)``; the score is multiplied by 1 - it."""
    ov = np.asarray(overlaps, dtype=np.float64)
    if (ov < 0).any() or np.isnan(ov).any():
        raise ValueError("overlaps must be counts >= 0")
    return np.minimum(NGRAM_PENALTY_CAP, NGRAM_PENALTY_PER_MATCH * ov)


def ngram_guard_activations(penalties: ArrayLike) -> int:
    """SPEC-024 §8.3: CRP-Context-NGram-Guard-Activations = candidates that received an n-gram penalty."""
    return int(np.count_nonzero(np.asarray(penalties, dtype=np.float64) > 0.0))


def ngram_guard_diagnostic(activations: int, candidates: int) -> str | None:
    """SPEC-024 §5.3: more than 20% of the retrieved facts penalised means CDR's novelty scoring is not
    doing its job, most likely because the CKF lacks depth: the operator should ingest more documents.

    Returns the diagnostic (a NOTE for the envelope) when the share exceeds 0.20, else None.
    """
    if candidates <= 0 or activations <= NGRAM_DIAGNOSTIC_SHARE * candidates:
        return None
    share = 100.0 * activations / candidates
    return (
        f"NGRAM-GUARD: {activations} of {candidates} candidate facts ({share:.0f}%, above 20%) repeat "
        "earlier window output; CDR novelty is not keeping stale material out, the knowledge fabric "
        "likely lacks depth for this task: ingest more documents (SPEC-024 §5.3)"
    )
