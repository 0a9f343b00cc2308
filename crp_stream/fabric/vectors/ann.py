"""An in-process HNSW index (faiss) over a vector index's points: the candidates of filtered top-k.

Qdrant keeps the durable vectors; this is a cache, built from them on the first search of a large
enough index and kept current by every write through the same ``VectorIndex``. The scores it returns
are exact cosines of the stored float32 vectors (only *which* points are visited is approximate), so a
hit it finds ranks exactly as under exact search; recall against exact search is measured by
``python -m ops.bench.ann``. Status and expiry filters are applied to an over-fetched candidate list;
when too few candidates survive, the caller falls back to exact search.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from typing import Final

import faiss
import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]

# HNSW parameters: M 24, efConstruction 96, efSearch 200 (at least the fetch size) give recall >= 0.98 at
# k = 10, 50, 200 on MiniLM vectors of 2Wiki (0.997 / 0.995 / 0.988, ops/bench/ann.py).
CONNECTIVITY: Final = 24
EXPANSION_ADD: Final = 96
EXPANSION_SEARCH: Final = 200
# ingest's k-NN for similarity edges (K 20 + a margin, among clustered neighbours): recall@20 0.998
# against exact search at 100k points (ops/bench/ann.py), at half the cost of EXPANSION_SEARCH
EXPANSION_EDGES: Final = 64
_STATUS_CODES: Final = {"active": 0, "stale": 1, "quarantined": 2, "superseded": 3, "expired": 4}
_REPLACED: Final = 255  # a slot whose fact was written again under a newer slot (HNSW keeps no deletes)
_GROW: Final = 1024
KEPT_MAX: Final = 256  # results kept (``kept``): a micro-batch of requests probes at most this many
_KEPT_MAX: Final = KEPT_MAX
# a search of this many queries (an ingest batch's k-NN) runs on every core; a request's few, on one
_PARALLEL_QUERIES: Final = 32  # queries whose results are kept (~150 hits each)
# an add of at least this many points runs on a thread of its own (faiss releases the GIL), while the
# writer goes on with its SQL; the next read of the graph waits for it. One thread, in write order,
# so the graph still depends only on the order of the writes
_BACKGROUND_ADD: Final = 64


@contextmanager
def _omp_threads(n: int) -> Iterator[None]:
    """faiss's OpenMP on ``n`` threads for one call, then the calling thread's own count again (one
    by default, ``crp_stream/__init__.py``; the environment's ``OMP_NUM_THREADS`` where it sets one)."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class AnnCache:
    """Fact ids, statuses and expiries beside an HNSW graph of their unit vectors (inner product = cosine)."""

    def __init__(self, dim: int, capacity: int = _GROW) -> None:
        self.dim = dim
        self._index = faiss.IndexHNSWFlat(dim, CONNECTIVITY, faiss.METRIC_INNER_PRODUCT)
        self._index.hnsw.efConstruction = EXPANSION_ADD
        self._index.hnsw.efSearch = EXPANSION_SEARCH
        self._adding: threading.Thread | None = None
        self._add_error: BaseException | None = None
        self._slot_of: dict[str, int] = {}
        self._fact: list[str] = []  # by slot, the order of the writes
        self._status = np.zeros(max(capacity, 1), dtype=np.uint8)
        self._expires = np.full(max(capacity, 1), math.inf)
        # kept with every write, so that the share of points a filter passes costs no pass over
        # them all (~0.3 ms at 100k per search, 10x that at 1M): points per status code, and the
        # slots whose point expires (few: most facts never do)
        self._per_code = np.zeros(256, dtype=np.int64)
        self._expiring: list[int] = []
        # recent results, until the next write (``add``, ``set_status``): a window probes its session's
        # sub-queries again window after window, and the graph and the filter are then unchanged
        self.kept: dict[tuple[object, ...], tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        # ``top_slots`` of kept hits (a session's sub-query probes, window after window), by the hits'
        # slot array, held so that its id is not reused: (slots, k, limit, decimals, top)
        self._tops: dict[int, tuple[npt.NDArray[np.int64], int, int, int, npt.NDArray[np.int64]]] = {}
        self.added = 0  # points written so far (a snapshot on disk is behind until it is saved again)
        # ``stored``'s view, until the next add: reading the storage's pointer through faiss's wrappers
        # costs ~50 us, and a request reads it a few times
        self._view: Vector | None = None

    @property
    def index(self) -> faiss.IndexHNSWFlat:
        """The HNSW graph, once every add has reached it."""
        self.settle()
        return self._index

    @index.setter
    def index(self, value: faiss.IndexHNSWFlat) -> None:
        self.settle()
        self._index = value
        self._view = None

    def settle(self) -> None:
        """Wait for the add running in the background, if any (re-raising its error)."""
        adding, self._adding = self._adding, None
        if adding is not None:
            adding.join()
        error, self._add_error = self._add_error, None
        if error is not None:
            raise error

    def _add_in_background(self, index: faiss.IndexHNSWFlat, points: Vector) -> None:
        try:
            index.add(points)
        except BaseException as exc:  # re-raised by the next reader, in its thread
            self._add_error = exc

    @classmethod
    def adopt(
        cls,
        index: faiss.IndexHNSWFlat,
        slots: Sequence[str | None],
        statuses: Sequence[str],
        expires: Sequence[float | None],
    ) -> AnnCache:
        """A cache over a graph read back from disk (``ann_snapshot``): slot i holds the point of fact
        ``slots[i]``, with ``statuses[i]`` and ``expires[i]``; None marks a slot whose point is no
        longer current, never returned (as a replaced one)."""
        n = int(index.ntotal)
        ann = cls(int(index.d), capacity=n + _GROW)
        index.hnsw.efSearch = EXPANSION_SEARCH
        ann.index = index
        ann._fact = [sys.intern(f) if f is not None else "" for f in slots]
        ann._slot_of = {f: i for i, f in enumerate(ann._fact) if slots[i] is not None}
        ann._status[:n] = [_REPLACED if f is None else _STATUS_CODES[st] for f, st in zip(slots, statuses, strict=True)]
        ann._expires[:n] = [
            math.inf if e is None or f is None else float(e) for f, e in zip(slots, expires, strict=True)
        ]
        ann._per_code = np.bincount(ann._status[:n], minlength=256).astype(np.int64)
        ann._expiring = [
            i for i, (f, e) in enumerate(zip(slots, expires, strict=True)) if f is not None and e is not None
        ]
        return ann

    @property
    def expiring(self) -> bool:
        """Whether a point expires: only then do kept results depend on the time searched at."""
        return bool(self._expiring)

    def expires_between(self, lo: float, hi: float) -> bool:
        """Whether a point expires in [lo, hi] (a search alive at any time between finds the same)."""
        if not self._expiring:
            return False
        ends = self._expires[np.asarray(self._expiring, dtype=np.int64)]
        return bool(((ends >= lo) & (ends <= hi)).any())

    def slot_names(self) -> list[str | None]:
        """Per slot, its fact id, or None where the point was replaced (what ``adopt`` takes back)."""
        status = self._status
        return [None if status[i] == _REPLACED else f for i, f in enumerate(self._fact)]

    def stored(self) -> Vector:
        """Every slot's vector as stored in the graph (a view, valid until the next add)."""
        index = self.index  # settled: no add is under way
        view = self._view
        if view is None or view.shape[0] != index.ntotal:
            view = self._view = stored_vectors(index)
        return view

    def ids_of(self, slots: Sequence[int]) -> list[str]:
        """The fact id of each slot (as ``search`` names its hits)."""
        return list(map(self._fact.__getitem__, slots))

    def slot(self, fact_id: str) -> int | None:
        """The slot of a fact the cache holds, else None."""
        return self._slot_of.get(fact_id)

    def slots(self, fact_ids: Sequence[str | None]) -> npt.NDArray[np.int64]:
        """``slot`` of each fact, -1 for a fact the cache does not hold or None (looked up in C)."""
        slot_of: dict[str | None, int] = self._slot_of  # type: ignore[assignment]  # None: never a key
        return np.fromiter(map(slot_of.get, fact_ids, repeat(-1)), dtype=np.int64, count=len(fact_ids))

    def __len__(self) -> int:
        return len(self._slot_of)

    def add(
        self,
        fact_ids: Sequence[str],
        vectors: Vector,
        statuses: Sequence[str],
        expires: Sequence[float | None],
        threads: int = 1,
    ) -> None:
        """Insert or replace points (vectors already unit length, float32). One thread (the default)
        makes the graph, and so every later result, depend only on the order of the writes; the
        bulk build at start-up uses every core (``threads=0``)."""
        if not fact_ids:
            return
        self.kept.clear()
        self._tops.clear()  # slot names change
        self._view = None  # the storage may move
        fact_ids = [sys.intern(str(f)) for f in fact_ids]  # as the fact cache's: dict lookups compare pointers
        start = len(self._fact)
        for f in fact_ids:
            old = self._slot_of.get(f)
            if old is not None:
                self._per_code[self._status[old]] -= 1
                self._per_code[_REPLACED] += 1
                self._status[old] = _REPLACED
        need = start + len(fact_ids)
        if need > len(self._status):
            grow = max(_GROW, need - len(self._status), len(self._status))
            self._status = np.concatenate([self._status, np.zeros(grow, dtype=np.uint8)])
            self._expires = np.concatenate([self._expires, np.full(grow, math.inf)])
        for i, f in enumerate(fact_ids):
            self._slot_of[f] = start + i
        self._fact.extend(fact_ids)
        self._status[start:need] = [_STATUS_CODES[s] for s in statuses]
        self._expires[start:need] = [math.inf if e is None else float(e) for e in expires]
        self._per_code += np.bincount(self._status[start:need], minlength=256)
        self._expiring.extend(start + i for i, e in enumerate(expires) if e is not None)
        points = np.array(vectors, dtype=np.float32, order="C")  # a copy: the caller may reuse its array
        self.added += len(fact_ids)
        if threads == 1 and len(fact_ids) >= _BACKGROUND_ADD:
            index = self.index  # settled: adds reach the graph in write order
            self._adding = threading.Thread(
                target=self._add_in_background, args=(index, points), name="ann-add", daemon=True
            )
            self._adding.start()
            return
        with _omp_threads(threads or os.cpu_count() or 1):
            self.index.add(points)

    def set_status(self, fact_ids: Iterable[str], status: str) -> None:
        slots = [self._slot_of[f] for f in fact_ids if f in self._slot_of]
        if slots:
            self.kept.clear()
            at = np.unique(np.asarray(slots))
            self._per_code -= np.bincount(self._status[at], minlength=256)
            self._per_code[_STATUS_CODES[status]] += at.shape[0]
            self._status[at] = _STATUS_CODES[status]

    def alive_fraction(self, excluded: Sequence[str], alive_at: float | None) -> float:
        n = len(self._fact)
        if n == 0:
            return 0.0
        codes = sorted({*(_STATUS_CODES[s] for s in excluded), _REPLACED})
        if alive_at is not None and not alive_at < math.inf:  # every point has expired (or NaN): a full pass
            passing = ~np.isin(self._status[:n], codes) & (self._expires[:n] > alive_at)
            return float(passing.sum()) / n
        ok = n - int(self._per_code[codes].sum())
        if alive_at is not None and self._expiring:  # minus the passing points expired at ``alive_at``
            at = np.asarray(self._expiring, dtype=np.int64)
            ok -= int((~np.isin(self._status[at], codes) & (self._expires[at] <= alive_at)).sum())
        return float(ok) / n

    def search(
        self,
        queries: Vector,
        limit: int,
        excluded: Sequence[str],
        alive_at: float | None,
        min_score: float | None,
        exclude_id: str | None = None,
        effort: int = EXPANSION_SEARCH,
    ) -> list[list[tuple[str, float]]] | None:
        """Up to ``limit`` (fact_id, cosine) per query that pass the filter, best first; None when the
        filter leaves too few candidates to trust (the caller then searches exactly). ``effort``: the
        HNSW search breadth (at least the fetch size)."""
        found = self.search_slots(queries, limit, excluded, alive_at, min_score, exclude_id, effort)
        if found is None:
            return None
        fact = self._fact
        # only the first ``limit`` become Python tuples, in bulk (tolist: the same ints and floats)
        return [
            list(zip(map(fact.__getitem__, slots.tolist()), scores.tolist(), strict=True)) for slots, scores in found
        ]

    def search_slots(
        self,
        queries: Vector,
        limit: int,
        excluded: Sequence[str],
        alive_at: float | None,
        min_score: float | None,
        exclude_id: str | None = None,
        effort: int = EXPANSION_SEARCH,
        at: Sequence[float] | None = None,
    ) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] | None:
        """``search`` as arrays: per query the slots (``names``) and float64 cosines of its hits.
        ``at``: per query, the time its hits are kept for, instead of ``alive_at`` (the caller
        vouches that no point expires between the two: ``expires_between``)."""
        n = len(self._fact)
        fraction = self.alive_fraction(excluded, alive_at)
        if n == 0 or fraction < 0.5:
            return None
        fetch = min(n, math.ceil(limit / fraction * 1.5) + 16)
        barred = np.zeros(256, dtype=bool)  # by status code: a table lookup, not ``np.isin`` per query
        barred[[*(_STATUS_CODES[s] for s in excluded), _REPLACED]] = True
        q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        # ``alive_at`` only matters through expiring points: without any, the same results whatever it is
        when = alive_at if self._expiring else None
        times = [when] * q.shape[0] if at is None or not self._expiring else list(at)
        keys = [
            (row.tobytes(), limit, tuple(excluded), t, min_score, exclude_id, effort)
            for row, t in zip(q, times, strict=True)
        ]
        kept = self.kept
        todo = [i for i, k in enumerate(keys) if k not in kept]
        if not todo:
            return [kept[k] for k in keys]
        found = self._search(q[todo], fetch, limit, barred, alive_at, min_score, exclude_id, effort)
        if found is None:
            return None
        fresh = dict(zip((keys[i] for i in todo), found, strict=True))
        # answered before any is dropped: a call of more than ``_KEPT_MAX`` queries evicts its own
        out = [fresh[k] if k in fresh else kept[k] for k in keys]
        for k, hits in fresh.items():
            if len(kept) >= _KEPT_MAX:
                del kept[next(iter(kept))]
            kept[k] = hits
        return out

    def top_union(
        self, queries: Vector, k: int, limit: int, excluded: Sequence[str], alive_at: float | None, decimals: int
    ) -> list[str] | None:
        """The fact ids of every query's top ``k`` as ``VectorIndex.search_many`` ranks them (scores
        rounded to ``decimals``, ties by fact id), once each, sorted; from ``limit`` hits fetched per
        query. None when the cache cannot answer or a tie at the k-th place reaches past the fetched
        hits (the caller then asks ``search_many``)."""
        found = self.search_slots(queries, limit, excluded, alive_at, None)
        if found is None:
            return None
        picked = []
        tops = self._tops
        if len(tops) > 2 * _KEPT_MAX:
            tops.clear()
        for slots, scores in found:
            memo = tops.get(id(slots))
            if memo is not None and memo[0] is slots and memo[1:4] == (k, limit, decimals):
                picked.append(memo[4])
                continue
            top = top_slots(slots, scores, k, limit, self._fact, decimals)
            if top is None:
                return None
            tops[id(slots)] = (slots, k, limit, decimals, top)
            picked.append(top)
        fact = self._fact
        ids = list(map(fact.__getitem__, np.unique(np.concatenate(picked)).tolist())) if picked else []
        ids.sort()
        return ids

    def _search(
        self,
        q: Vector,
        fetch: int,
        limit: int,
        barred: npt.NDArray[np.bool_],
        alive_at: float | None,
        min_score: float | None,
        exclude_id: str | None,
        effort: int,
    ) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] | None:
        n = len(self._fact)
        params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]  # missing from its stubs
        params.efSearch = max(effort, fetch)
        if q.shape[0] >= _PARALLEL_QUERIES:  # queries are independent: the same hits on any thread
            with _omp_threads(os.cpu_count() or 1):
                sims, slots = self.index.search(q, fetch, params=params)
        else:
            sims, slots = self.index.search(q, fetch, params=params)
        drop = self._slot_of.get(exclude_id) if exclude_id is not None else None
        out: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = []
        for row in range(q.shape[0]):
            found = slots[row] >= 0
            ks = slots[row][found].astype(np.int64)
            scores = sims[row][found].astype(np.float64)
            ok = ~barred[self._status[ks]]
            if alive_at is not None:
                ok &= self._expires[ks] > alive_at
            if min_score is not None:
                ok &= scores >= min_score
            if drop is not None:
                ok &= ks != drop
            survivors = int(np.count_nonzero(ok))
            # Fewer survivors than asked although the index holds more: not enough to trust.
            if survivors < limit and fetch < n and (min_score is None or bool((scores >= min_score).all())):
                return None
            out.append((ks[ok][:limit], scores[ok][:limit]))
        return out

    def vectors(self, fact_ids: Sequence[str]) -> tuple[list[str], Vector]:
        """The stored vectors of the given facts it holds: (their ids, in the given order; n x dim).

        The HNSW graph keeps every vector as written (flat float32 storage), the same floats Qdrant
        returns; read here, a candidate's vector costs no round trip to the index."""
        slot_of = self._slot_of
        found = [f for f in fact_ids if f in slot_of]
        if not found:
            return [], np.zeros((0, self.dim), dtype=np.float32)
        # a view of the storage (valid until the next add), fancy-indexed into a copy
        return found, self.stored()[np.fromiter((slot_of[f] for f in found), dtype=np.int64, count=len(found))]

    def memory_bytes(self) -> int:
        graph = self.index.ntotal * (self.dim * 4 + CONNECTIVITY * 2 * 4 * 1.1)
        return int(graph) + self._status.nbytes + self._expires.nbytes


def stored_vectors(index: faiss.IndexHNSWFlat) -> Vector:
    """The graph's flat float32 storage, one row per slot (a view, valid until the next add)."""
    storage = faiss.downcast_index(index.storage)
    xb = storage.get_xb()  # type: ignore[attr-defined]  # IndexFlat's, missing from its stubs
    view: Vector = faiss.rev_swig_ptr(xb, index.ntotal * index.d).reshape(-1, index.d)
    return view


def top_slots(
    slots: npt.NDArray[np.int64],
    scores: npt.NDArray[np.float64],
    k: int,
    limit: int,
    names: Sequence[str],
    decimals: int,
) -> npt.NDArray[np.int64] | None:
    """The slots of ``vectors.port.rank(hits)[:k]`` (scores rounded to ``decimals`` by Python's ``round``,
    then ``(-score, fact_id)``), as a set, for ``limit`` hits fetched (``slots``, ``scores``); None
    where ``search_many`` would search again (the last fetched hit ties with the k-th).

    Rounding is monotone: a score more than two units of the last decimal above (below) the k-th
    largest rounds above (below) it, so only the few scores within that band are rounded one by one,
    exactly as ``rank`` rounds them, and the ties among them with the k-th are settled by fact id."""
    band_width = 2.0 * 10.0**-decimals  # more than the 1.5 units that rounding two scores can close
    n = scores.shape[0]
    if n <= k:
        return slots
    ordered = np.sort(scores)
    kth = float(ordered[n - k])
    r_k = round(kth, decimals)
    if n >= limit and not round(float(ordered[0]), decimals) < r_k:
        return None
    sure = scores > kth + band_width
    band = np.flatnonzero(~sure & (scores >= kth - band_width))  # below it: rounds below the k-th
    rounded = [round(x, decimals) for x in scores[band].tolist()]
    above = [int(b) for b, r in zip(band.tolist(), rounded, strict=True) if r > r_k]
    tied = [int(b) for b, r in zip(band.tolist(), rounded, strict=True) if r == r_k]
    room = k - int(np.count_nonzero(sure)) - len(above)
    tied.sort(key=lambda b: names[int(slots[b])])
    return np.concatenate([slots[sure], slots[above], slots[tied[:room]]]).astype(np.int64)
