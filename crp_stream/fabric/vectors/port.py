"""The vector-index port: one abstract ``VectorIndex`` that every backend implements.

Backends: ``edge.EdgeVectorIndex`` (embedded qdrant-edge, the default) and
``qdrant.QdrantVectorIndex`` (a Qdrant server through qdrant-client, or its local mode in tests).

Contract, shared by every backend (tests/contract/test_vectors.py runs them all through it):

- One point per fact. The point id is ``core.ids.point_id(fact_id)``; the payload is
  ``{"fact_id", "status", "expires_at", "source"}`` (``expires_at``: epoch seconds or null = never),
  plus ``"tenant"`` for a named tenant's fact. Every search is scoped to one tenant (``tenant=None``:
  the default one, whose points carry no tenant field).
- The dimension is fixed by the first ``ensure(dim)`` or the first ``upsert``; a vector of another
  dimension is a ``ValueError``. ``dim`` is ``None`` until then (and again after ``delete_all``).
- Vectors are L2-normalised here (float32) before they reach a backend, so scores are cosines.
  A vector with NaN/inf, of norm 0, or not 1-D is a ``ValueError``.
- Results are deterministic: scores are rounded to 6 decimals and hits sorted by
  ``(-score, fact_id)``; ties at the k-th place are resolved by fetching more, never by engine order.
- Before the first write every read answers empty (``[]``, ``{}``, ``0``).

API (all backends)::

    dim -> int | None                         ensure(dim)
    upsert([VectorItem(fact_id, vector, status, expires_at, source)])    # idempotent by fact_id
    set_status(fact_ids, status)              # unknown ids skipped; status in STATUSES
    search(query, k, now, exclude_statuses=DEFAULT_EXCLUDED) -> [(fact_id, cosine)]
        # status not excluded AND (expires_at is null OR expires_at > now)
    neighbours(query, k, min_score, exclude_id=None) -> [(fact_id, cosine >= min_score)]
        # every status but quarantined, expiry ignored: for similarity-edge maintenance
    neighbours_many(queries, k, min_score, exclude_ids=None) -> [[...], ...]   # batched, same results
    get_vectors(fact_ids) -> {fact_id: unit float32 vector}
    count()    delete_all()    flush()    close()    (also a context manager)
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import numpy as np
import numpy.typing as npt

from crp_stream.fabric.heap_trim import give_back
from crp_stream.fabric.vectors import ann_snapshot
from crp_stream.fabric.vectors.ann import EXPANSION_EDGES, EXPANSION_SEARCH, AnnCache
from crp_stream.fabric.vectors.checks import Vector as Vector
from crp_stream.fabric.vectors.checks import _reject as _reject
from crp_stream.fabric.vectors.checks import normalise as normalise
from crp_stream.fabric.vectors.payload import F_EXPIRES_AT as F_EXPIRES_AT
from crp_stream.fabric.vectors.payload import F_FACT_ID as F_FACT_ID
from crp_stream.fabric.vectors.payload import F_SOURCE as F_SOURCE
from crp_stream.fabric.vectors.payload import F_STATUS as F_STATUS
from crp_stream.fabric.vectors.payload import F_TENANT as F_TENANT
from crp_stream.fabric.vectors.payload import Constraint as Constraint
from crp_stream.fabric.vectors.payload import VectorItem as VectorItem
from crp_stream.fabric.vectors.payload import payload_of as payload_of
from crp_stream.fabric.vectors.payload import scanned_meta as scanned_meta
from crp_stream.fabric.vectors.payload import scanned_point as scanned_point
from crp_stream.fabric.vectors.payload import scope as scope

log = logging.getLogger(__name__)


STATUSES: Final = frozenset({"active", "stale", "quarantined", "superseded", "expired"})
DEFAULT_EXCLUDED: Final = ("quarantined", "expired", "superseded")
SCORE_DECIMALS: Final = 6
# Extra hits fetched beyond k so that a tie at the k-th place can be seen and broken by fact_id.
TIE_MARGIN: Final = 8


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; expected one of {sorted(STATUSES)}")


def rank(hits: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Round scores to 6 decimals and sort by (-score, fact_id): the deterministic order of the port."""
    rounded = [(fid, round(float(s), SCORE_DECIMALS)) for fid, s in hits]
    # (-score, fact_id) as two stable sorts with C keys: by id, then by score descending
    rounded.sort(key=itemgetter(0))
    rounded.sort(key=itemgetter(1), reverse=True)
    return rounded


class VectorIndex(ABC):
    """Port: a filtered cosine top-k index of fact vectors. Not thread-safe; one writer."""

    # The in-process ANN cache (fabric/vectors/ann.py): off until ``enable_ann``; built on the first search of
    # an index of at least ``_ann_min`` points, dropped (exact search) above ``_ann_max``.
    _ann: AnnCache | None = None
    _ann_min: int | None = None
    _ann_max: int = 0
    _ann_unknown = True  # the index may have reached ``_ann_min`` since the last look
    _ann_snapshot: Path | None = None  # where the cache is kept between runs (``ann_snapshot``)
    _ann_saved = 0  # the cache's ``added`` when it was last saved or read back

    _ids_max: int = 100_000  # point -> fact id entries a backend may keep (``bound_ids``)
    # exact hits of a micro-batch's probes, searched together ahead of its requests (``ahead``)
    ahead: dict[tuple[Any, ...], list[tuple[str, float]]] | None = None

    def bound_ids(self, max_ids: int) -> None:
        """Keep at most about ``max_ids`` point -> fact id entries (a per-process cache; a miss reads
        the point's payload again)."""
        if max_ids < 1:
            raise ValueError(f"max_ids must be >= 1, got {max_ids}")
        self._ids_max = max_ids

    def enable_ann(self, min_points: int, max_points: int, snapshot: Path | None = None) -> None:
        """Search through an in-process HNSW cache once the index holds ``min_points`` points;
        ``snapshot``: a directory where the cache is kept between runs (``ann_snapshot``)."""
        self._ann_min, self._ann_max, self._ann_unknown = min_points, max_points, True
        self._ann_snapshot = snapshot

    def save_ann(self) -> None:
        """Write the ANN cache to its snapshot if points were added since it was last read or saved
        (at shutdown: the next start reads the graph back instead of building it)."""
        ann, where = self._ann, self._ann_snapshot
        if ann is None or where is None or ann.added == self._ann_saved:
            return
        try:
            ann_snapshot.save(ann, where)
        except (OSError, RuntimeError) as exc:  # a cache: the next start builds it again
            log.warning("could not save the ANN cache to %s: %s", where, exc)
            return
        self._ann_saved = ann.added

    def ann(self) -> AnnCache | None:
        """The ANN cache, built now if the index became large enough; None while exact search serves."""
        if self._ann is not None or self._ann_min is None or not self._ann_unknown:
            return self._ann
        self._ann_unknown = False
        dim, n = self.dim, self.count()
        if dim is None or n < self._ann_min or n > self._ann_max:
            return None
        # the pages the shard read when it opened (1.6 GiB at 1M facts) are not held beside the graph
        self.page_out_files()
        try:
            snapshot, ann = self._ann_snapshot, None
            if snapshot is not None:  # read back against the store's scan in its own order
                ann = ann_snapshot.restore(snapshot, dim, ann_snapshot.paged(self._scan_chunks(), self.page_out_files))
            self._ann_saved = 0 if ann is not None else -1
            if ann is None:  # built in fact_id order, the vectors read a chunk at a time by id
                ann = AnnCache(dim, capacity=n + 1024)
                ann_snapshot.add_all(ann, self._scan_meta(), self.get_vectors, dim)
        except NotImplementedError:
            self._ann_min = None
            return None
        self._ann = ann
        self.save_ann()  # a crash later still finds this graph; ``restore`` adds what came after
        give_back()  # the scan's rows and each chunk's arrays: their free heap back to the system
        self.page_out_files()  # searches and stored vectors now come from the cache, not the backend's files
        return ann

    def stored_vectors(self, fact_ids: Sequence[str]) -> dict[str, Vector]:
        """``get_vectors``, served from the ANN cache for the facts it holds (the same floats)."""
        found, matrix = self.stored_matrix(fact_ids)
        return dict(zip(found, matrix, strict=True))

    def stored_matrix(self, fact_ids: Sequence[str]) -> tuple[list[str], Vector]:
        """``stored_vectors`` as (the ids found, one float32 row each): those the ANN cache holds in
        the given order, then the backend's (no array per fact when the cache holds them all)."""
        ann = self._ann
        found, matrix = ann.vectors(fact_ids) if ann is not None else ([], np.zeros((0, self.dim or 0), np.float32))
        held = set(found)
        rest = self.get_vectors([f for f in fact_ids if f not in held]) if len(held) < len(fact_ids) else {}
        if rest:
            found = [*found, *rest]
            matrix = np.concatenate([matrix.reshape(-1, self.dim or 0), np.stack(list(rest.values()))])
        return found, matrix

    def _ann_reset(self) -> None:
        self._ann, self._ann_unknown = None, True

    def _ann_restatus(self, by_status: dict[str, list[str]]) -> None:
        """The backend's points were put back to these statuses behind the port (``reconcile``): the
        cache follows them in place. Rebuilding it instead cost a full HNSW build (minutes at 1M)
        after every rollback, and at start-up after a crash."""
        if self._ann is not None:
            for status, ids in sorted(by_status.items()):
                self._ann.set_status(ids, status)

    def has_tenants(self) -> bool:
        """Whether any point belongs to a named tenant (the ANN cache serves an index without any:
        it keeps no tenants). Unknown: True."""
        return True

    def _delete(self, fact_ids: list[str]) -> None:
        """Remove the points of these facts; unknown ids are skipped."""
        raise NotImplementedError

    def delete(self, fact_ids: Sequence[str]) -> None:
        """Remove the points of forgotten facts (``crp-stream forget``): vectors and payloads."""
        ids = sorted(set(fact_ids))
        if ids and self.dim is not None:
            self._delete(ids)
            if self._ann is not None:
                self._ann.set_status(ids, "superseded")
                self._ann_reset()  # its graph still holds the vectors: built again without them

    def _scan(self) -> list[tuple[str, Vector, str, float | None]]:
        """Every point as (fact_id, unit vector, status, expires_at), in fact_id order."""
        raise NotImplementedError

    def _scan_chunks(self) -> Iterator[list[tuple[str, Vector, str, float | None]]]:
        """``_scan``, a chunk at a time in the backend's own order; backends that can, stream it."""
        yield self._scan()

    def _scan_meta(self) -> list[tuple[str, str, float | None]]:
        """Every point as (fact_id, status, expires_at), in fact_id order, without its vector (for the
        ANN cache, which reads the vectors a chunk at a time); backends that can, scan without them."""
        return [(f, status, exp) for f, _v, status, exp in self._scan()]

    def _candidates(
        self,
        queries: Vector,
        limit: int,
        where: Constraint,
        min_score: float | None,
        effort: int = EXPANSION_SEARCH,
    ) -> list[list[tuple[str, float]]]:
        """``_query_many``, through the ANN cache when there is one and it can answer."""
        ann = self.ann() if where.tenant is None and not self.has_tenants() else None
        if ann is not None:
            found = ann.search(
                queries, limit, where.exclude_statuses, where.alive_at, min_score, where.exclude_id, effort
            )
            if found is not None:
                return found
        ahead = self.ahead
        if ahead is not None:
            keys = [(q.tobytes(), limit, where, min_score) for q in queries]
            if all(k in ahead for k in keys):
                return [list(ahead[k]) for k in keys]
        return self._query_many(queries, limit, where, min_score)

    @property
    def ann_now(self) -> AnnCache | None:
        """The ANN cache as built now, never building it (``ann`` would, when due)."""
        return self._ann

    def page_out_files(self) -> None:
        """Let go of the resident pages of the files the backend maps, which the ANN cache makes
        unread (``mapped_pages``); a backend that maps none does nothing."""
        return None

    def expires_between(self, lo: float, hi: float) -> bool:
        """Whether a point expires in (``lo``, ``hi``]: if none does, a search alive at any time in
        [``lo``, ``hi``] finds the same hits. A backend that cannot tell says True."""
        return True

    # ---- backend hooks ------------------------------------------------------------------------------

    @property
    @abstractmethod
    def dim(self) -> int | None:
        """The vector dimension, or None before the first ``ensure``/``upsert``."""

    @abstractmethod
    def ensure(self, dim: int) -> None:
        """Create the collection if missing; a different ``dim`` than the existing one is a ValueError."""

    @abstractmethod
    def _upsert(self, ids: list[str], vectors: Vector, payloads: list[dict[str, Any]]) -> None:
        """Write normalised ``vectors`` (n x dim) with their payloads; replaces existing points."""

    @abstractmethod
    def _set_status(self, fact_ids: list[str], status: str) -> None:
        """Set the status payload of the points that exist; silently skip unknown ids."""

    @abstractmethod
    def _query(self, query: Vector, limit: int, where: Constraint, min_score: float | None) -> list[tuple[str, float]]:
        """Top ``limit`` (fact_id, raw score) by cosine under ``where``, scores >= ``min_score``."""

    def _query_many(
        self, queries: Vector, limit: int, where: Constraint, min_score: float | None
    ) -> list[list[tuple[str, float]]]:
        """``_query`` for each row of ``queries`` (m x dim); backends override it with a batch call."""
        return [self._query(q, limit, where, min_score) for q in queries]

    @abstractmethod
    def get_vectors(self, fact_ids: Sequence[str]) -> dict[str, Vector]:
        """The stored (normalised) vectors of the given facts; unknown ids are absent from the result."""

    @abstractmethod
    def count(self) -> int:
        """Number of points, whatever their status."""

    @abstractmethod
    def delete_all(self) -> None:
        """Drop every point and the collection itself (for a rebuild); ``dim`` becomes None."""

    @abstractmethod
    def flush(self) -> None:
        """Make every write so far durable."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release the backend; idempotent."""

    # ---- the port, shared by every backend ---------------------------------------------------------

    def upsert(self, items: Sequence[VectorItem]) -> None:
        """Insert or replace points; idempotent by fact_id. The first write fixes the dimension."""
        if not items:
            return
        dim = self.dim
        if dim is None:  # the first write fixes it; a malformed first vector is rejected in the loop
            head = np.asarray(items[0].vector)
            dim = int(head.shape[0]) if head.ndim == 1 else 0
        last: dict[str, int] = {}
        rows: list[npt.NDArray[np.float64]] = []
        for row, item in enumerate(items):
            if not item.fact_id:
                raise ValueError("fact_id must be a non-empty string")
            _check_status(item.status)
            if item.expires_at is not None and not math.isfinite(item.expires_at):
                raise ValueError(f"expires_at of {item.fact_id!r} must be finite or None")
            v = np.asarray(item.vector, dtype=np.float64)
            if v.shape != (dim,):
                _reject(item.fact_id, v, dim)
            rows.append(v)
            last[item.fact_id] = row
        # Normalised as one matrix: per-row numpy calls cost more than the engine's write itself.
        stacked = np.stack(rows)
        norms = np.linalg.norm(stacked, axis=1)
        bad = ~np.isfinite(norms) | (norms == 0.0)
        if bad.any():
            first = int(np.argmax(bad))
            _reject(items[first].fact_id, stacked[first], dim)
        matrix = (stacked / norms[:, None]).astype(np.float32)
        self.ensure(dim)
        # A fact repeated within one batch: the last occurrence wins, as with separate calls.
        keep = sorted(last.values())
        ids = [items[r].fact_id for r in keep]
        self._upsert(ids, matrix[keep], [payload_of(items[r]) for r in keep])
        if self._ann is not None:
            self._ann.add(ids, matrix[keep], [items[r].status for r in keep], [items[r].expires_at for r in keep])
            if len(self._ann) > self._ann_max:
                self._ann_reset()
                self._ann_min = None  # past the cap: exact search from now on
        else:
            self._ann_unknown = True

    def set_status(self, fact_ids: Sequence[str], status: str) -> None:
        """Set the status of known facts (unknown ids are skipped): active/stale/quarantined/..."""
        _check_status(status)
        ids = sorted(set(fact_ids))
        if ids and self.dim is not None:
            self._set_status(ids, status)
            if self._ann is not None:
                self._ann.set_status(ids, status)

    def search(
        self,
        query: npt.ArrayLike,
        k: int,
        now: float,
        exclude_statuses: Sequence[str] = DEFAULT_EXCLUDED,
        tenant: str | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k (fact_id, cosine) of ``tenant`` whose status is not excluded and which are unexpired at ``now``."""
        where = Constraint(
            exclude_statuses=tuple(sorted(set(exclude_statuses))), alive_at=float(now), tenant=scope(tenant)
        )
        return self._top_k(query, k, where, None)

    def search_many(
        self,
        queries: Sequence[npt.ArrayLike] | npt.NDArray[Any],
        k: int,
        now: float,
        exclude_statuses: Sequence[str] = DEFAULT_EXCLUDED,
        tenant: str | None = None,
    ) -> list[list[tuple[str, float]]]:
        """``search`` for many queries at once (one engine pass, same filter), same results."""
        dim = self.dim
        if k <= 0 or dim is None or len(queries) == 0:
            return [[] for _ in range(len(queries))]
        where = Constraint(
            exclude_statuses=tuple(sorted(set(exclude_statuses))), alive_at=float(now), tenant=scope(tenant)
        )
        matrix = np.stack([normalise(q, dim) for q in queries])
        limit = k + TIE_MARGIN
        out: list[list[tuple[str, float]]] = []
        for q, raw in zip(matrix, self._candidates(matrix, limit, where, None), strict=True):
            ranked = rank(raw)
            if len(ranked) < limit or ranked[-1][1] < ranked[k - 1][1]:
                out.append(ranked[:k])
            else:  # a tie reaches past the fetched hits: settle it one query at a time
                out.append(self._top_k(q, k, where, None))
        return out

    def search_union(
        self,
        queries: Sequence[npt.ArrayLike] | npt.NDArray[Any],
        k: int,
        now: float,
        exclude_statuses: Sequence[str] = DEFAULT_EXCLUDED,
        tenant: str | None = None,
    ) -> list[str]:
        """The fact ids of ``search_many``'s hits of every query, once each, sorted. From the ANN
        cache's arrays (no tuple per hit) when it can answer, else from ``search_many``."""
        dim = self.dim
        if k <= 0 or dim is None or len(queries) == 0:
            return []
        ann = self.ann() if scope(tenant) is None and not self.has_tenants() else None
        if ann is not None:
            excluded = tuple(sorted(set(exclude_statuses)))
            matrix = np.stack([normalise(q, dim) for q in queries])
            ids = ann.top_union(matrix, k, k + TIE_MARGIN, excluded, float(now), SCORE_DECIMALS)
            if ids is not None:
                return ids
        found = self.search_many(queries, k, now, exclude_statuses, tenant)
        return sorted({fid for hits in found for fid, _s in hits})

    def neighbours(
        self,
        query: npt.ArrayLike,
        k: int,
        min_score: float,
        exclude_id: str | None = None,
        tenant: str | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k (fact_id, cosine >= min_score) of any status but quarantined, for similarity edges."""
        where = Constraint(exclude_statuses=("quarantined",), exclude_id=exclude_id, tenant=scope(tenant))
        return [h for h in self._top_k(query, k, where, min_score, EXPANSION_EDGES) if h[1] >= min_score]

    def neighbours_many(
        self,
        queries: Sequence[npt.ArrayLike] | npt.NDArray[Any],
        k: int,
        min_score: float,
        exclude_ids: Sequence[str | None] | None = None,
        tenant: str | None = None,
    ) -> list[list[tuple[str, float]]]:
        """``neighbours`` for many queries at once, same results; the engine scores them in one pass."""
        n = len(queries)
        excluded: list[str | None] = [None] * n if exclude_ids is None else list(exclude_ids)
        if len(excluded) != n:
            raise ValueError(f"{n} queries but {len(excluded)} exclude_ids")
        dim = self.dim
        if k <= 0 or dim is None or n == 0:
            return [[] for _ in range(n)]
        matrix = np.stack([normalise(q, dim) for q in queries])
        # One filter for the whole batch (so the engine can share the scan); self-hits dropped here.
        where = Constraint(exclude_statuses=("quarantined",), tenant=scope(tenant))
        limit = k + 1 + TIE_MARGIN
        out: list[list[tuple[str, float]]] = []
        hits = self._candidates(matrix, limit, where, min_score, EXPANSION_EDGES)
        for q, ex, raw in zip(matrix, excluded, hits, strict=True):
            ranked = [h for h in rank(raw) if h[0] != ex and h[1] >= min_score]
            if len(raw) < limit or (len(ranked) > k and ranked[-1][1] < ranked[k - 1][1]):
                out.append(ranked[:k])
            else:  # a tie reaches past the fetched hits: settle it one query at a time
                out.append(self.neighbours(q, k, min_score, ex, tenant))
        return out

    def _top_k(
        self,
        query: npt.ArrayLike,
        k: int,
        where: Constraint,
        min_score: float | None,
        effort: int = EXPANSION_SEARCH,
    ) -> list[tuple[str, float]]:
        dim = self.dim
        if k <= 0 or dim is None:
            return []
        q = normalise(query, dim)
        limit = k + TIE_MARGIN
        while True:
            ranked = rank(self._candidates(q.reshape(1, -1), limit, where, min_score, effort)[0])
            # Complete when the engine ran out, or the k-th score beats the lowest fetched one:
            # then nothing left unfetched can tie with the k-th hit.
            if len(ranked) < limit or ranked[-1][1] < ranked[k - 1][1]:
                return ranked[:k]
            limit *= 2

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
