"""The near-copy screen over a whole candidate set at once (SPEC-027 §2.2, SPEC-024 §2.6).

``core.substitution.near_copy_pairs`` and ``admit_copies`` compare token sets pair by pair in Python;
a window's ~150 candidates make ~11,000 pairs. Here the same decisions come from one matrix product:

- every text's token set (``substitution._token_set``) as its sorted token hashes, remembered per
  text (fact texts come back window after window);
- intersection sizes of every pair as ``M @ M.T`` over the hashes that occur in two texts or more
  (a hash in one text adds to its size only), integer counts, exact in float32;
- the Jaccard test ``|a & b| >= NEAR_COPY * |a | b|`` on those counts. Equal hashes of two different
  tokens would skew the counts, so when the texts' tokens have fewer distinct hashes than tokens
  every pair is decided on the token sets themselves; otherwise the counts are the sets' own (no
  pair needs deciding again). Either way the result is exactly the scalar one.

API
---
- ``near_copy_matrix(texts, rows, cols, min_overlap) -> bool (len(rows), len(cols))``.
- ``near_copy_pairs(texts, sources, inside=None, min_overlap=NEAR_COPY) -> set[(i, j)]``: as
  ``substitution.near_copy_pairs``.
- ``admit_copies(texts, sources, keep) -> list[bool]``: as ``copied_statements.admit_copies``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from crp_stream.core import memo, substitution
from crp_stream.core.copied_statements import copied_statement_conflict
from crp_stream.core.substitution import NEAR_COPY


@memo.text_memo(2.0)
def _token_hashes(text: str) -> NDArray[np.int64]:
    return np.unique(np.fromiter((hash(t) for t in substitution._token_set(text)), dtype=np.int64))


def _codes(sources: Sequence[str]) -> NDArray[np.int64]:
    """Each source as a small integer, equal for equal sources (compared as arrays, not strings)."""
    seen: dict[str, int] = {}
    return np.fromiter((seen.setdefault(s, len(seen)) for s in sources), dtype=np.int64, count=len(sources))


def _near(a: frozenset[str], b: frozenset[str], min_overlap: float) -> bool:
    union = len(a | b)
    return bool(union) and len(a & b) >= min_overlap * union


def near_copy_matrix(
    texts: Sequence[str], rows: Sequence[int], cols: Sequence[int], min_overlap: float = NEAR_COPY
) -> NDArray[np.bool_]:
    """``substitution.near_copy(texts[r], texts[c], min_overlap)`` for every r in ``rows``
    and c in ``cols``, as a boolean matrix; the token-set Jaccard of every pair in one product."""
    out = np.zeros((len(rows), len(cols)), dtype=bool)
    if not rows or not cols:
        return out
    used = sorted(set(rows) | set(cols))
    at = {t: k for k, t in enumerate(used)}
    grams = [_token_hashes(texts[t]) for t in used]
    sizes = np.asarray([g.shape[0] for g in grams], dtype=np.float64)
    flat = np.concatenate(grams)
    owner = np.repeat(np.arange(len(used)), [g.shape[0] for g in grams])
    _, col, count = np.unique(flat, return_inverse=True, return_counts=True)
    shared = count[col] >= 2  # a hash of one text only never counts in an intersection
    kept = np.unique(col[shared], return_inverse=True)[1]
    m = np.zeros((len(used), int(kept.max(initial=-1)) + 1), dtype=np.float32)
    m[owner[shared], kept] = 1.0
    r = np.asarray([at[t] for t in rows])
    c = np.asarray([at[t] for t in cols])
    inter = (m[r] @ m[c].T).astype(np.float64)
    inter = np.where(r[:, None] == c[None, :], sizes[r][:, None], inter)  # a text with itself: all of it
    union = sizes[r][:, None] + sizes[c][None, :] - inter
    maybe: NDArray[np.bool_] = (union > 0) & (inter >= min_overlap * union)
    sets = [substitution._token_set(texts[t]) for t in used]
    if len(count) == len(frozenset().union(*sets)):
        return maybe  # no two tokens share a hash: the counts are the token sets' own, already exact
    for i, j in np.ndindex(*out.shape):  # a hash collision (never seen): every pair on the sets themselves
        out[i, j] = _near(sets[at[rows[i]]], sets[at[cols[j]]], min_overlap)
    return out


def near_copy_pairs(
    texts: Sequence[str], sources: Sequence[str], inside: int | None = None, min_overlap: float = NEAR_COPY
) -> set[tuple[int, int]]:
    """SPEC-027 §2.2: ``core.substitution.near_copy_pairs``, vectorised: pairs i < j of
    statements from different sources (i's source set) with token-set Jaccard >= ``min_overlap``; with
    ``inside``, i < inside."""
    n = len(texts)
    limit = n if inside is None else min(inside, n)
    if limit <= 0 or n < 2 or len(set(sources)) < 2:  # one source: no pair of different sources
        return set()
    src = _codes(sources)
    other = src[:limit, None] != src[None, :]
    other &= np.triu(np.ones((limit, n), dtype=bool), k=1)
    other[[k for k in range(limit) if not sources[k]]] = False
    rows = np.flatnonzero(other.any(axis=1)).tolist()
    if not rows:  # the usual case: one source
        return set()
    cols = np.flatnonzero(other[rows].any(axis=0)).tolist()
    near = near_copy_matrix(texts, rows, cols, min_overlap) & other[np.ix_(rows, cols)]
    i, j = np.nonzero(near)
    return set(zip(np.asarray(rows)[i].tolist(), np.asarray(cols)[j].tolist(), strict=True))


def admit_copies(texts: Sequence[str], sources: Sequence[str], keep: Sequence[bool]) -> list[bool]:
    """SPEC-024 §2.6: ``core.copied_statements.admit_copies``, vectorised: a statement the
    gate drops joins the candidates when it is a near-copy, from another source, of one the gate kept
    and ``copied_statement_conflict`` finds a swapped span (the kept ones tried in order)."""
    out = list(keep)
    if len(set(sources)) < 2:  # the usual case, one source: no copy from another source
        return out
    kept = [i for i, k in enumerate(keep) if k]
    dropped = [j for j, k in enumerate(keep) if not k and sources[j]]
    if not kept or not dropped:
        return out
    src = _codes(sources)
    other = src[dropped][:, None] != src[kept][None, :]
    rows = [j for j, any_other in zip(dropped, other.any(axis=1).tolist(), strict=True) if any_other]
    if not rows:  # the usual case: one source
        return out
    other = other[other.any(axis=1)]
    near = near_copy_matrix(texts, rows, kept) & other
    for r, j in enumerate(rows):
        for c in np.flatnonzero(near[r]).tolist():
            if copied_statement_conflict(texts[kept[c]], texts[j], same_source=False) is not None:
                out[j] = True
                break
    return out


__all__ = ["admit_copies", "near_copy_matrix", "near_copy_pairs"]
