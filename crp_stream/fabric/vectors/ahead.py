"""The top-K probes of a micro-batch of window requests, searched together before any is served.

Each request then asks ``VectorIndex.search_union`` for its own probes as before and is answered
from memory with the same hits: through the ANN cache, from its ``kept`` results (one
``search_slots`` call per fetch size); by exact search, from ``VectorIndex.ahead`` (one
``_query_many`` call per fetch size and tenant). A search's hits depend on the time it is made at
only through points expiring in between, so requests of different times share a call unless a
point expires between the first and the last of them (then each time searches apart).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from crp_stream.fabric.vectors.port import TIE_MARGIN, Constraint, VectorIndex, normalise, scope


class Probes(NamedTuple):
    """One request's search: its probe vectors, top ``k``, the time and the tenant it searches at."""

    vectors: Sequence[npt.ArrayLike]
    k: int
    now: float
    tenant: str | None


def search_ahead(index: VectorIndex, batch: Sequence[Probes], exclude_statuses: Sequence[str]) -> None:
    """Search every probe of ``batch`` now, in as few engine calls as the filters allow; until
    ``forget`` the index answers these searches from memory."""
    dim = index.dim
    batch = [p for p in batch if p.k > 0 and len(p.vectors)]
    if dim is None or not batch:
        return
    excluded = tuple(sorted(set(exclude_statuses)))
    exact: list[Probes] = []
    shared = [p for p in batch if scope(p.tenant) is None]
    ann = index.ann() if shared and not index.has_tenants() else None
    if ann is None:
        exact = batch
    else:
        exact = [p for p in batch if scope(p.tenant) is not None]
        by_k: dict[int, list[Probes]] = {}
        for p in shared:
            by_k.setdefault(p.k, []).append(p)
        for k, group in by_k.items():
            for part in _same_hits(group, ann.expires_between):
                units = [normalise(q, dim) for p in part for q in p.vectors]
                at = [p.now for p in part for _q in p.vectors]  # each kept for its own request's time
                if ann.search_slots(np.stack(units), k + TIE_MARGIN, excluded, part[-1].now, None, at=at) is None:
                    exact.extend(part)  # the cache cannot answer: the requests search exactly
    ahead: dict[tuple[object, ...], list[tuple[str, float]]] = dict(index.ahead or {})
    by_scope: dict[tuple[int, str | None], list[Probes]] = {}
    for p in exact:
        by_scope.setdefault((p.k, scope(p.tenant)), []).append(p)
    for (k, tenant), part in by_scope.items():
        limit = k + TIE_MARGIN
        runs = _same_hits(part, index.expires_between)
        for run in runs:
            rows = _rows(run, dim)
            where = Constraint(exclude_statuses=excluded, alive_at=float(run[-1].now), tenant=tenant)
            found = dict(zip(rows, index._query_many(np.stack(list(rows.values())), limit, where, None), strict=True))
            for p in run:  # filed under each request's own filter, as its search will ask
                own = Constraint(exclude_statuses=excluded, alive_at=float(p.now), tenant=tenant)
                for key in _rows([p], dim):
                    ahead[(key, limit, own, None)] = found[key]
    index.ahead = ahead


def _same_hits(batch: list[Probes], expires_between: Callable[[float, float], bool]) -> list[list[Probes]]:
    """``batch`` in runs whose searches find the same hits whatever their times: all of it unless a
    point expires between its first and last time, else one run per time (in time order)."""
    times = sorted({p.now for p in batch})
    if len(times) == 1 or not expires_between(times[0], times[-1]):
        return [sorted(batch, key=lambda p: p.now)]
    return [[p for p in batch if p.now == t] for t in times]


def forget(index: VectorIndex) -> None:
    """The batch is served: searches go to the engine again."""
    index.ahead = None


def _rows(batch: Sequence[Probes], dim: int) -> dict[bytes, npt.NDArray[np.float32]]:
    """The probes' unit vectors as ``search_many`` normalises them, once each, by their bytes."""
    out: dict[bytes, npt.NDArray[np.float32]] = {}
    for p in batch:
        for q in p.vectors:
            v = normalise(q, dim)
            out.setdefault(v.tobytes(), v)
    return out


__all__ = ["Probes", "forget", "search_ahead"]
