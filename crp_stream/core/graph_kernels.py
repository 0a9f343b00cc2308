"""Compiled loops over the typed graph's edge lists: the CDGR walk (SPEC-025 §2.3) and the path
strengths behind its bridge values (§2.4).

Each kernel is a plain Python function, compiled by numba (``compiled``) into machine code that runs
it over the arrays without a numpy call per step. Why a compiler: per request the walk and the bridge
values were a few hundred numpy calls on arrays of a few thousand entries, where each call's fixed
cost outweighed its work. The kernels do integer bookkeeping, copies and max/min of weights only, so
compiled or not they give the same numbers bit for bit; every floating-point sum stays in numpy
(``cdgr.bridge_values_edges``). The unit tests run each kernel both ways and compare the results.

numba caches the machine code beside this module (``cache=True``; where that directory is read-only,
set ``NUMBA_CACHE_DIR``); ``warm`` compiles or loads every kernel, so a worker does that at start-up,
not in its first request.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

F = TypeVar("F", bound=Callable[..., Any])


def compiled(fn: F) -> F:
    """``fn`` compiled by numba in nopython mode on its first call, the machine code cached on disk
    (typed as ``fn``). numba is imported then, not with this module: a command that walks no graph
    does not load a compiler (~0.2 s and ~70 MiB)."""
    machine: list[Callable[..., Any]] = []

    @functools.wraps(fn)
    def run(*args: Any) -> Any:
        if not machine:
            import numba

            machine.append(numba.njit(cache=True, nogil=True)(fn))
        return machine[0](*args)

    run.machine = machine  # type: ignore[attr-defined]  # the dispatcher, once compiled (tests look)
    return cast(F, run)


def levels_py(
    seeds: NDArray[np.int64], src: NDArray[np.int64], dst: NDArray[np.int64], size: int, max_hops: int
) -> tuple[NDArray[np.int64], int]:
    """Breadth-first levels over the ``src -> dst`` edges (ints below ``size``), as
    ``graph_rank.walk_levels``: 0 for a seed, -1 where not reached; and the depth walked."""
    level = np.full(size, -1, dtype=np.int64)
    frontier = np.zeros(size, dtype=np.bool_)
    for a in seeds:
        level[a] = 0
        frontier[a] = True
    fresh = np.zeros(size, dtype=np.bool_)
    found = np.zeros(size, dtype=np.int64)
    depth = 0
    for hop in range(1, max_hops + 1):
        n = 0
        for e in range(src.shape[0]):
            t = dst[e]
            if frontier[src[e]] and level[t] < 0 and not fresh[t]:
                fresh[t] = True
                found[n] = t
                n += 1
        if n == 0:
            break
        frontier[:] = False
        for i in range(n):
            t = found[i]
            fresh[t] = False
            frontier[t] = True
            level[t] = hop
        depth = hop
    return level, depth


def number_py(
    ints: NDArray[np.int64], stamp: NDArray[np.int64], number: NDArray[np.int64], token: int, base: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Compact numbers for ``ints``: an int stamped ``token`` keeps ``number[int]``; the others are
    numbered from ``base`` on, in order of first appearance, and stamped. Returns every int's number
    and the newly numbered ints, in that order (``stamp`` and ``number`` are updated in place)."""
    out = np.empty(ints.shape[0], dtype=np.int64)
    fresh = np.empty(ints.shape[0], dtype=np.int64)
    n = 0
    for i in range(ints.shape[0]):
        g = ints[i]
        if stamp[g] != token:
            stamp[g] = token
            number[g] = base + n
            fresh[n] = g
            n += 1
        out[i] = number[g]
    return out, fresh[:n]


def gather_rows_py(
    at: NDArray[np.int64],
    start: NDArray[np.int64],
    count: NDArray[np.int64],
    nb: NDArray[np.int64],
    weight: NDArray[np.float64],
    kind: NDArray[np.int8],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.int8]]:
    """The CSR rows of the ints ``at`` (row ``i`` is ``count[i]`` entries from ``start[i]``), one
    after another: (the int each entry belongs to, neighbour, weight, kind)."""
    total = 0
    for i in at:
        total += count[i]
    src = np.empty(total, dtype=np.int64)
    dst = np.empty(total, dtype=np.int64)
    w = np.empty(total, dtype=np.float64)
    k = np.empty(total, dtype=np.int8)
    o = 0
    for i in at:
        s = start[i]
        for j in range(count[i]):
            src[o] = i
            dst[o] = nb[s + j]
            w[o] = weight[s + j]
            k[o] = kind[s + j]
            o += 1
    return src, dst, w, k


def path_strengths_py(
    cons: NDArray[np.int64],
    cols: NDArray[np.int64],
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
    weight: NDArray[np.float64],
    direct: NDArray[np.bool_],
    size: int,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """SPEC-025 §2.4's path strengths on an edge list of a symmetric graph (ints below ``size``).

    ``strength[i, j]``: the strongest path of one edge or two from connector ``cons[i]`` to anchor
    ``cols[j]`` (a path's strength is its weakest edge; two edges of one pair: the stronger), 0 where
    none is > 0 and where the connector is that anchor. ``linked[j, l]``: anchors ``j`` and ``l``
    share an edge marked ``direct``. Only max and min of the weights: the same floats in any order.
    """
    m = cols.shape[0]
    col = np.full(size, -1, dtype=np.int64)
    for j in range(m):
        col[cols[j]] = j
    linked = np.zeros((m, m), dtype=np.bool_)
    near_at = np.full(size, -1, dtype=np.int64)  # the neighbours of anchors, numbered
    n_near = 0
    for e in range(src.shape[0]):
        j = col[src[e]]
        if j < 0:
            continue
        x = dst[e]
        if near_at[x] < 0:
            near_at[x] = n_near
            n_near += 1
        lo = col[x]
        if lo >= 0 and direct[e]:
            linked[j, lo] = True
            linked[lo, j] = True
    near = np.zeros((n_near, m), dtype=np.float64)  # near[x, j]: the x - anchor j edge (0: none)
    for e in range(src.shape[0]):
        j = col[src[e]]
        if j >= 0 and weight[e] > near[near_at[dst[e]], j]:
            near[near_at[dst[e]], j] = weight[e]
    # each neighbour's nonzero cells, so a path visits the anchors its middle fact has, not all m
    first = np.zeros(n_near + 1, dtype=np.int64)
    for r in range(n_near):
        c = 0
        for j in range(m):
            if near[r, j] > 0.0:
                c += 1
        first[r + 1] = first[r] + c
    cell_col = np.empty(first[n_near], dtype=np.int64)
    for r in range(n_near):
        o = first[r]
        for j in range(m):
            if near[r, j] > 0.0:
                cell_col[o] = j
                o += 1
    row = np.full(size, -1, dtype=np.int64)  # a connector listed twice shares one row
    n_row = 0
    for c in cons:
        if row[c] < 0:
            row[c] = n_row
            n_row += 1
    best = np.zeros((n_row, m), dtype=np.float64)
    for c in cons:
        x = near_at[c]
        if x >= 0:  # one edge: the connector is an anchor's neighbour
            r = row[c]
            for q in range(first[x], first[x + 1]):
                j = cell_col[q]
                if near[x, j] > best[r, j]:
                    best[r, j] = near[x, j]
    for e in range(src.shape[0]):  # two edges: connector - x - anchor
        x, c = near_at[src[e]], dst[e]
        if x < 0 or row[c] < 0 or src[e] == c:
            continue
        r, w = row[c], weight[e]
        for q in range(first[x], first[x + 1]):
            j = cell_col[q]
            p = min(w, near[x, j])
            if p > best[r, j]:
                best[r, j] = p
    strength = np.empty((cons.shape[0], m), dtype=np.float64)
    for i in range(cons.shape[0]):
        r = row[cons[i]]
        for j in range(m):
            strength[i, j] = best[r, j]
        own = col[cons[i]]
        if own >= 0:  # a connector is never its own anchor
            strength[i, own] = 0.0
    return strength, linked


levels = compiled(levels_py)
number = compiled(number_py)
gather_rows = compiled(gather_rows_py)
path_strengths = compiled(path_strengths_py)


def warm() -> None:
    """Compile every kernel (or load its cached machine code) on small arrays, once per process."""
    one = np.zeros(1, dtype=np.int64)
    levels(one, one, one, 1, 1)
    number(one, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), 1, 0)
    gather_rows(one, one, np.ones(1, dtype=np.int64), one, np.ones(1), np.zeros(1, dtype=np.int8))
    path_strengths(one, one, one, one, np.ones(1), np.ones(1, dtype=np.bool_), 1)


__all__ = [
    "compiled",
    "gather_rows",
    "gather_rows_py",
    "levels",
    "levels_py",
    "number",
    "number_py",
    "path_strengths",
    "path_strengths_py",
    "warm",
]
