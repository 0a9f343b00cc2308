"""The vector index as a runtime sees it: failures are transient, and uncommitted writes are undone.

The vector index is not part of the database transaction that commits a batch's effects and offsets.
Two consequences, both handled here for every runtime:

- **Qdrant unavailable.** Any error of the index (other than a caller's bad argument) is raised as
  ``VectorUnavailable``, a ``ConnectionError``: the runtime rolls the batch back, commits no offset and
  retries with backoff until the write succeeds. A record is never dead-lettered because Qdrant is down.
- **Writes of a batch that did not commit** (a crash, or a rollback) would stay visible to the redo of
  that batch: a fact superseded or quarantined "in the future", a point whose fact does not exist yet.
  Before each write, the fact ids are noted in a small journal (SQLite, beside the log); after the batch
  commits the journal is cleared. ``reconcile`` (at start-up and after a rollback) puts the journaled
  points back to what the database says: the fact's committed status, or hidden (status
  ``quarantined``, excluded from every search) when the fact was never committed. The redo writes
  them again exactly as the first time, since processing is deterministic.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crp_stream.fabric.fabric import Fabric
from crp_stream.fabric.vectors.port import Constraint, Vector, VectorIndex, VectorItem

log = logging.getLogger(__name__)

HIDDEN = "quarantined"  # excluded from search and from similarity neighbours
_CALLER_ERRORS = (ValueError, TypeError, KeyError)


class VectorUnavailable(ConnectionError):
    """The vector index failed; the runtime retries the batch (transient)."""


class VectorJournal:
    """Fact ids whose vector points were written by a batch that has not committed yet."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # survives kill -9; the batch's log sync covers power loss
        self._db.execute("CREATE TABLE IF NOT EXISTS pending (fact_id TEXT PRIMARY KEY)")
        self._seen: set[str] = set()

    def add(self, fact_ids: Sequence[str]) -> None:
        new = [f for f in fact_ids if f not in self._seen]
        if not new:
            return
        self._db.executemany("INSERT OR IGNORE INTO pending (fact_id) VALUES (?)", [(f,) for f in new])
        self._seen.update(new)

    def ids(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT fact_id FROM pending ORDER BY fact_id")]

    def clear(self) -> None:
        if self._seen or self._db.execute("SELECT 1 FROM pending LIMIT 1").fetchone():
            self._db.execute("DELETE FROM pending")
        self._seen.clear()

    def close(self) -> None:
        self._db.close()


def _guarded(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _CALLER_ERRORS:
            raise
        except Exception as exc:
            raise VectorUnavailable(f"vector index {name} failed: {type(exc).__name__}: {exc}") from exc

    return call


@contextmanager
def _scanning() -> Iterator[None]:
    """A scan's failure as a transient one; NotImplementedError (no scan: exact search) stays as it is."""
    try:
        yield
    except (NotImplementedError, *_CALLER_ERRORS):
        raise
    except Exception as exc:
        raise VectorUnavailable(f"vector index scan failed: {type(exc).__name__}: {exc}") from exc


class GuardedVectors(VectorIndex):
    """A ``VectorIndex`` over another: journals writes before they happen, reports failures as transient.

    The port's shared logic (validation, ranking, ties) runs here; each backend hook is the inner
    index's, guarded."""

    def __init__(self, inner: VectorIndex, journal: VectorJournal):
        self.inner = inner
        self.journal = journal
        # a write reached the backend since its last flush: a batch that wrote no vector (a window
        # request, a report) has nothing to make durable, and qdrant-edge's flush costs ~0.4 ms
        self._unflushed = True

    @property
    def dim(self) -> int | None:
        dim: int | None = _guarded("dim", lambda: self.inner.dim)()
        return dim

    def bound_ids(self, max_ids: int) -> None:
        super().bound_ids(max_ids)
        self.inner.bound_ids(max_ids)  # the backend keeps the map

    def ensure(self, dim: int) -> None:
        self._unflushed = True
        _guarded("ensure", self.inner.ensure)(dim)

    def upsert(self, items: Sequence[VectorItem]) -> None:
        self.journal.add([it.fact_id for it in items])
        super().upsert(items)

    def set_status(self, fact_ids: Sequence[str], status: str) -> None:
        self.journal.add(list(fact_ids))
        super().set_status(fact_ids, status)

    def upsert_committed(self, items: Sequence[VectorItem]) -> None:
        """``upsert`` of points in their committed state (a projection of the database): not journaled,
        since a rollback has nothing of them to put back."""
        super().upsert(items)

    def set_status_committed(self, fact_ids: Sequence[str], status: str) -> None:
        """``set_status`` to the committed status; not journaled, as ``upsert_committed``."""
        super().set_status(fact_ids, status)

    def _upsert(self, ids: list[str], vectors: Vector, payloads: list[dict[str, Any]]) -> None:
        self._unflushed = True
        _guarded("upsert", self.inner._upsert)(ids, vectors, payloads)

    def _set_status(self, fact_ids: list[str], status: str) -> None:
        self._unflushed = True
        _guarded("set_status", self.inner._set_status)(fact_ids, status)

    def _delete(self, fact_ids: list[str]) -> None:
        self._unflushed = True
        _guarded("delete", self.inner._delete)(fact_ids)

    def has_tenants(self) -> bool:
        return bool(_guarded("has_tenants", self.inner.has_tenants)())

    def _query(self, query: Vector, limit: int, where: Constraint, min_score: float | None) -> list[tuple[str, float]]:
        return _guarded("query", self.inner._query)(query, limit, where, min_score)  # type: ignore[no-any-return]

    def _query_many(
        self, queries: Vector, limit: int, where: Constraint, min_score: float | None
    ) -> list[list[tuple[str, float]]]:
        return _guarded("query", self.inner._query_many)(queries, limit, where, min_score)  # type: ignore[no-any-return]

    def expires_between(self, lo: float, hi: float) -> bool:
        return _guarded("count", self.inner.expires_between)(lo, hi)  # type: ignore[no-any-return]

    def get_vectors(self, fact_ids: Sequence[str]) -> dict[str, Vector]:
        return _guarded("get_vectors", self.inner.get_vectors)(fact_ids)  # type: ignore[no-any-return]

    def count(self) -> int:
        return int(_guarded("count", self.inner.count)())

    def delete_all(self) -> None:
        self._unflushed = True
        _guarded("delete_all", self.inner.delete_all)()
        self._ann_reset()

    def _scan(self) -> list[tuple[str, Vector, str, float | None]]:
        with _scanning():
            return self.inner._scan()

    def _scan_chunks(self) -> Iterator[list[tuple[str, Vector, str, float | None]]]:
        with _scanning():
            yield from self.inner._scan_chunks()

    def _scan_meta(self) -> list[tuple[str, str, float | None]]:
        with _scanning():
            return self.inner._scan_meta()

    def flush(self) -> None:
        """Make the writes since the last flush durable; nothing to do when there were none."""
        if not self._unflushed:
            return
        _guarded("flush", self.inner.flush)()
        self._unflushed = False

    def page_out_files(self) -> None:
        self.inner.page_out_files()

    def close(self) -> None:
        self.inner.close()


def reconcile(fabric: Fabric, journal: VectorJournal) -> int:
    """Put every journaled point back to the committed state; returns how many were touched."""
    ids = journal.ids()
    if not ids:
        return 0
    with fabric.unit_of_work() as uow:
        rows = uow.repo.facts_by_ids(ids)
    inner = fabric.vectors.inner if isinstance(fabric.vectors, GuardedVectors) else fabric.vectors
    by_status: dict[str, list[str]] = {}
    for fid in ids:
        by_status.setdefault(rows[fid]["status"] if fid in rows else HIDDEN, []).append(fid)
    for status, group in sorted(by_status.items()):
        _guarded("set_status", inner.set_status)(group, status)
    _guarded("flush", inner.flush)()
    fabric.vectors._ann_restatus(by_status)  # it saw the undone writes: the same statuses, in place
    log.info(
        "vector index: %d points written by an uncommitted batch put back to the committed state "
        "(%d hidden until redone)",
        len(ids),
        sum(1 for f in ids if f not in rows),
    )
    journal.clear()
    return len(ids)


__all__ = ["HIDDEN", "GuardedVectors", "VectorJournal", "VectorUnavailable", "reconcile"]
