"""An in-process HNSW index (usearch) over a vector index's points: the candidates of filtered top-k.

Qdrant keeps the durable vectors; this is a cache, built from them on the first search of a large
enough index and kept current by every write through the same ``VectorIndex``. The scores it returns
are exact cosines of the stored float32 vectors (only *which* points are visited is approximate), so a
hit it finds ranks exactly as under exact search; recall against exact search is measured by
``python -m ops.bench.ann``. Status and expiry filters are applied to an over-fetched candidate list;
when too few candidates survive, the caller falls back to exact search.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
from usearch.index import Index

Vector = npt.NDArray[np.float32]

# HNSW parameters: connectivity 24 (M), expansion 96 at build and 200 at search give recall >= 0.987 at
# k = 10, 50, 200 on MiniLM vectors of 2Wiki (ops/bench/ann.py); 16/128/128 gave 0.984 at k = 200.
CONNECTIVITY: Final = 24
EXPANSION_ADD: Final = 96
EXPANSION_SEARCH: Final = 200
_STATUS_CODES: Final = {"active": 0, "stale": 1, "quarantined": 2, "superseded": 3, "expired": 4}
_GROW: Final = 1024


class AnnCache:
    """Fact ids, statuses and expiries beside an HNSW graph of their unit vectors (cosine)."""

    def __init__(self, dim: int, capacity: int = _GROW) -> None:
        self.dim = dim
        self.index = Index(ndim=dim, metric="cos", dtype="f32", connectivity=CONNECTIVITY,
                           expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)
        self._key_of: dict[str, int] = {}
        self._fact: list[str] = []
        self._status = np.zeros(capacity, dtype=np.uint8)
        self._expires = np.full(capacity, math.inf)

    def __len__(self) -> int:
        return len(self._fact)

    def _slot(self, fact_id: str) -> int:
        key = self._key_of.get(fact_id)
        if key is None:
            key = len(self._fact)
            self._key_of[fact_id] = key
            self._fact.append(fact_id)
            if key >= len(self._status):
                grow = max(_GROW, len(self._status))
                self._status = np.concatenate([self._status, np.zeros(grow, dtype=np.uint8)])
                self._expires = np.concatenate([self._expires, np.full(grow, math.inf)])
        return key

    def add(self, fact_ids: Sequence[str], vectors: Vector, statuses: Sequence[str],
            expires: Sequence[float | None], threads: int = 1) -> None:
        """Insert or replace points (vectors already unit length, float32). One thread (the default)
        makes the graph, and so every later result, depend only on the order of the writes; the
        bulk build at start-up uses every core (``threads=0``)."""
        if not fact_ids:
            return
        replaced = [self._key_of[f] for f in fact_ids if f in self._key_of]
        if replaced:
            self.index.remove(np.asarray(replaced, dtype=np.uint64))
        keys = np.asarray([self._slot(f) for f in fact_ids], dtype=np.uint64)
        self.index.add(keys, np.ascontiguousarray(vectors, dtype=np.float32), threads=threads)
        self._status[keys] = [_STATUS_CODES[s] for s in statuses]
        self._expires[keys] = [math.inf if e is None else float(e) for e in expires]

    def set_status(self, fact_ids: Iterable[str], status: str) -> None:
        keys = [self._key_of[f] for f in fact_ids if f in self._key_of]
        if keys:
            self._status[np.asarray(keys)] = _STATUS_CODES[status]

    def alive_fraction(self, excluded: Sequence[str], alive_at: float | None) -> float:
        n = len(self._fact)
        if n == 0:
            return 0.0
        ok = ~np.isin(self._status[:n], [_STATUS_CODES[s] for s in excluded])
        if alive_at is not None:
            ok &= self._expires[:n] > alive_at
        return float(ok.sum()) / n

    def search(self, queries: Vector, limit: int, excluded: Sequence[str], alive_at: float | None,
               min_score: float | None, exclude_id: str | None = None) -> list[list[tuple[str, float]]] | None:
        """Up to ``limit`` (fact_id, cosine) per query that pass the filter, best first; None when the
        filter leaves too few candidates to trust (the caller then searches exactly)."""
        n = len(self._fact)
        fraction = self.alive_fraction(excluded, alive_at)
        if n == 0 or fraction < 0.5:
            return None
        fetch = min(n, math.ceil(limit / fraction * 1.5) + 16)
        codes = np.asarray([_STATUS_CODES[s] for s in excluded], dtype=np.uint8)
        found = self.index.search(np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32), fetch, threads=1)
        keys = np.atleast_2d(found.keys)
        dist = np.atleast_2d(found.distances)
        counts = np.atleast_1d(np.asarray(getattr(found, "counts", keys.shape[1])))
        out: list[list[tuple[str, float]]] = []
        for row in range(keys.shape[0]):
            ks = keys[row, : counts[row]].astype(np.int64)
            scores = 1.0 - dist[row, : counts[row]].astype(np.float64)
            ok = ~np.isin(self._status[ks], codes)
            if alive_at is not None:
                ok &= self._expires[ks] > alive_at
            if min_score is not None:
                ok &= scores >= min_score
            if exclude_id is not None and exclude_id in self._key_of:
                ok &= ks != self._key_of[exclude_id]
            hits = [(self._fact[int(k)], float(s)) for k, s in zip(ks[ok], scores[ok], strict=True)]
            # Fewer survivors than asked although the index holds more: not enough to trust.
            if len(hits) < limit and fetch < n and (min_score is None or bool((scores >= min_score).all())):
                return None
            out.append(hits[:limit])
        return out

    def memory_bytes(self) -> int:
        return int(self.index.memory_usage) + self._status.nbytes + self._expires.nbytes
