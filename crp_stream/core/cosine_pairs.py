"""Vector pairs above a cosine threshold, decided exactly as the float64 matmul would (the
envelope's duplicate and contradiction screens of SPEC-027 §2 share this screen)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["pairs_above"]


def pairs_above(
    vecs: ArrayLike,
    n: int,
    threshold: float,
    strict: bool,
    gram: NDArray[np.float32] | None = None,
    norms: NDArray[np.float64] | None = None,
    first: int | None = None,
) -> set[tuple[int, int]]:
    """Index pairs i < j whose cosine is above (strict) or at least the threshold, exactly as decided
    by the float64 matmul ``v @ v.T``.

    Screened by a float32 matmul (a few times cheaper) with a margin above its rounding error, so no
    pair is missed; each screened pair's float64 dot decides, unless it lies within float64 rounding
    of the threshold, where the matmul itself decides. ``gram``: that float32 matmul, computed by the
    caller in any summation order (the margin bounds the error of every order). ``norms``: the rows'
    squared norms as ``np.einsum("ij,ij->i", v, v)`` gives them on ``vecs`` as float64, if the caller
    has them; then only the screened rows are converted to float64 (most candidates have no pair).
    ``first``: only the pairs whose i < first (a given ``gram`` may then hold only those rows).
    """
    if norms is None:
        v = np.asarray(vecs, dtype=np.float64)
    else:  # float64 only where needed: the same values, row by row
        v = np.asarray(vecs)
        if norms.shape != (v.shape[0],):
            raise ValueError("norms must be (len(facts),)")
    if n == 0:
        return set()
    if v.ndim != 2 or v.shape[0] != n:
        raise ValueError("vecs must be (len(facts), dim)")
    dim = v.shape[1]
    if norms is None:
        norms = np.einsum("ij,ij->i", v, v)
    scale = max(float(np.max(norms)), 1e-30)  # bounds |a||b| for every pair
    top = n if first is None else max(0, min(first, n))
    if gram is None:
        v32 = v.astype(np.float32)
        gram = v32 @ v32.T if top == n else v32[:top] @ v32.T
    elif gram.shape == (n, n):
        gram = gram[:top]
    elif gram.shape != (top, n):
        raise ValueError("gram must be (len(facts), len(facts)) or, with first, (first, len(facts))")
    near = gram >= threshold - 2.0 * (dim + 4) * 2.0**-24 * scale
    np.fill_diagonal(near, False)
    some = np.flatnonzero(near.any(axis=1))  # few rows have any: scan only those
    rows, cols = np.nonzero(near[some])
    rows = some[rows]
    upper = rows < cols
    screen = np.stack([rows[upper], cols[upper]], axis=1)
    if screen.size == 0:
        return set()
    a, b = (np.asarray(v[screen[:, k]], dtype=np.float64) for k in (0, 1))
    dots = np.einsum("ij,ij->i", a, b)
    if np.any(np.abs(dots - threshold) <= 4.0 * (dim + 4) * 2.0**-53 * scale):
        v = np.asarray(vecs, dtype=np.float64)
        full = v @ v.T  # every pair, as without ``first``: the same decisions
        hit = (full > threshold) if strict else (full >= threshold)
        return {(int(i), int(j)) for i, j in np.argwhere(np.triu(hit, k=1)) if i < top}
    keep = (dots > threshold) if strict else (dots >= threshold)
    return {(int(i), int(j)) for i, j in screen[keep]}
