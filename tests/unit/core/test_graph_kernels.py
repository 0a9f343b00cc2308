"""The compiled graph kernels equal their Python sources and the numpy rules they replaced."""

from __future__ import annotations

import numpy as np
import pytest

from crp_stream.core import graph_kernels as gk


def _edges(rng: np.random.Generator, n: int, e: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = rng.integers(0, n, e), rng.integers(0, n, e)
    w = np.round(rng.uniform(-0.2, 1.0, e), 3)  # ties, zeros and negatives among them
    return np.r_[a, b].astype(np.int64), np.r_[b, a].astype(np.int64), np.r_[w, w]  # symmetric


def _numpy_levels(seeds: np.ndarray, s: np.ndarray, d: np.ndarray, size: int, hops: int) -> tuple[np.ndarray, int]:
    """The frontier walk of numpy arrays the kernel replaced."""
    level = np.full(size, -1, dtype=np.int64)
    level[seeds] = 0
    frontier = np.zeros(size, dtype=bool)
    frontier[seeds] = True
    depth = 0
    for hop in range(1, hops + 1):
        reached = np.zeros(size, dtype=bool)
        reached[d[frontier[s]]] = True
        frontier = reached & (level < 0)
        if not frontier.any():
            break
        level[frontier] = hop
        depth = hop
    return level, depth


@pytest.mark.parametrize("seed", range(12))
def test_levels_compiled_python_and_numpy_agree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    s, d, _w = _edges(rng, n, int(rng.integers(0, 3 * n)))
    seeds = rng.integers(0, n, int(rng.integers(1, 8))).astype(np.int64)  # repeats too
    for hops in (0, 1, 2, 3):
        want = _numpy_levels(seeds, s, d, n, hops)
        for kernel in (gk.levels, gk.levels_py):
            level, depth = kernel(seeds, s, d, n, hops)
            assert level.tolist() == want[0].tolist() and depth == want[1]


def test_number_gives_new_ints_the_next_numbers_in_first_appearance_order() -> None:
    for kernel in (gk.number, gk.number_py):
        stamp, number = np.zeros(10, dtype=np.int64), np.zeros(10, dtype=np.int64)
        out, fresh = kernel(np.array([7, 3, 7, 5], dtype=np.int64), stamp, number, 4, 0)
        assert out.tolist() == [0, 1, 0, 2] and fresh.tolist() == [7, 3, 5]
        out, fresh = kernel(np.array([5, 9, 2, 9], dtype=np.int64), stamp, number, 4, 3)
        assert out.tolist() == [2, 3, 4, 3] and fresh.tolist() == [9, 2]
        out, fresh = kernel(np.array([5, 1], dtype=np.int64), stamp, number, 8, 0)  # another walk's token
        assert out.tolist() == [0, 1] and fresh.tolist() == [5, 1]


def test_gather_rows_is_the_rows_one_after_another() -> None:
    rng = np.random.default_rng(5)
    count = rng.integers(0, 5, 40).astype(np.int64)
    start = (np.cumsum(count) - count).astype(np.int64)
    total = int(count.sum())
    nb, w, k = rng.integers(0, 40, total), rng.random(total), rng.integers(0, 3, total).astype(np.int8)
    at = rng.permutation(40)[:25].astype(np.int64)
    want = [(int(i), int(nb[j]), float(w[j]), int(k[j])) for i in at for j in range(start[i], start[i] + count[i])]
    for kernel in (gk.gather_rows, gk.gather_rows_py):
        src, dst, ws, ks = kernel(at, start, count, nb.astype(np.int64), w, k)
        got = list(zip(src.tolist(), dst.tolist(), ws.tolist(), ks.tolist(), strict=True))
        assert got == want


def _dict_strengths(
    cons: np.ndarray, cols: np.ndarray, s: np.ndarray, d: np.ndarray, w: np.ndarray, direct: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Every path of one edge or two, by dicts: the rule the kernel computes."""
    adj: dict[int, dict[int, float]] = {}
    for a, b, x in zip(s.tolist(), d.tolist(), w.tolist(), strict=True):
        adj.setdefault(a, {})[b] = max(adj.get(a, {}).get(b, 0.0), x)
    m = len(cols)
    linked = np.zeros((m, m), dtype=bool)
    for a, b, x in zip(s.tolist(), d.tolist(), direct.tolist(), strict=True):
        if x and a in cols.tolist() and b in cols.tolist():
            i, j = cols.tolist().index(a), cols.tolist().index(b)
            linked[i, j] = linked[j, i] = True
    out = np.zeros((len(cons), m))
    for i, c in enumerate(cons.tolist()):
        for j, a in enumerate(cols.tolist()):
            if c == a:
                continue
            best = max(0.0, adj.get(c, {}).get(a, 0.0))
            for x, w1 in adj.get(c, {}).items():
                if x != c:
                    best = max(best, min(w1, adj.get(x, {}).get(a, 0.0)))
            out[i, j] = best
    return out, linked


@pytest.mark.parametrize("seed", range(10))
def test_path_strengths_compiled_python_and_dicts_agree(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 60))
    s, d, w = _edges(rng, n, int(rng.integers(1, 4 * n)))
    direct = rng.random(s.shape[0]) < 0.7
    cols = np.unique(rng.integers(0, n, int(rng.integers(2, 10)))).astype(np.int64)
    cons = rng.integers(0, n, int(rng.integers(1, 30))).astype(np.int64)  # anchors and repeats among them
    want, want_linked = _dict_strengths(cons, cols, s, d, w, direct)
    for kernel in (gk.path_strengths, gk.path_strengths_py):
        strength, linked = kernel(cons, cols, s, d, w, direct, n)
        assert strength.tolist() == want.tolist()
        assert linked.tolist() == want_linked.tolist()


def test_warm_compiles_every_kernel() -> None:
    gk.warm()
    for kernel in (gk.levels, gk.number, gk.gather_rows, gk.path_strengths):
        assert kernel.machine[0].signatures  # type: ignore[attr-defined]  # numba's dispatcher, compiled
