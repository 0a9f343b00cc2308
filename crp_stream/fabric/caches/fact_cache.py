"""In-memory cache of candidate facts for envelope assembly: their fixed columns and unit vectors.

Every window request reads the rows and vectors of a few hundred candidates; from the store that is a
``SELECT *`` turned into dicts plus a vector-index round trip with vectors as Python lists, more
than the whole flat top-K. What is cached is what never changes once a fact is committed:

- A fact's columns other than ``status`` and ``claim_key`` are written once (``insert_facts`` ignores
  a repeated id; no update touches them), and its vector is written once with it (ingest upserts only
  facts not in the store). So an entry can never go stale, in this process or because of another
  worker: no invalidation across processes is needed.
- ``status`` changes (arbiter, operator, supersede), always through ``Repository.set_fact_status``,
  which moves the meta counter ``facts_generation`` atomically. Statuses are kept with the counter
  value they were read at: a call that finds another value (a write by another process, or a
  rolled-back one) drops them all; this process's own writes drop only their facts (``written``,
  as ``GraphCache`` does). Statuses are read, with the facts' existence, only for the facts not
  known (a narrow ``SELECT fact_id, status`` in the caller's transaction).
- What a transaction read may be its own uncommitted write: ``Fabric.unit_of_work`` clears the cache
  when a transaction does not commit. Rebuilds (which rewrite every fact) run with workers stopped.
- The vectors of misses come through ``VectorIndex.stored_vectors``: from the ANN cache's storage when
  the index has one (the same floats, no round trip), else from the index. A fact whose vector the ANN
  cache holds when it is cached keeps no copy here, only its slot there: a slot's vector never changes
  (the HNSW storage only grows; a fact written again gets a new slot), so reads gather the rows from
  the ANN cache's storage in one fancy-indexing copy, and a 1M-fact process holds its 100k cached
  vectors once (146 MiB). When the index builds another ANN cache, the entries are dropped.
- Bounded: past ``max_facts`` entries the least recently used are dropped (~2.5 KB a fact at 384-d:
  ~250 MB at the default bound). Vectors live in one float32 matrix, and the numeric columns scoring
  reads for every candidate (importance, modified time, TTL, epoch, expiry: ``Columns``) in two
  matrices beside it, so a candidate set is a few fancy-indexing copies (``columns``) instead of a
  pass over row dicts per column. Not thread-safe (one record at a time).
- A fact not known yet is read with its status in one statement (``READ_FIELDS``); statuses of cached
  facts whose status is not known (another writer moved ``facts_generation``) alone.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from itertools import filterfalse, repeat
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from crp_stream.core import ngram
from crp_stream.fabric.caches.fact_batch import (
    FIELDS,
    HEAD_FIELDS,
    NEVER,
    READ_FIELDS,
    Batch,
    Columns,
    Loaded,
    head_of,
    joined,
    numbers,
)
from crp_stream.fabric.sql.repository import FACTS_GENERATION, Repository
from crp_stream.fabric.vectors.ann import AnnCache
from crp_stream.fabric.vectors.port import VectorIndex

_FREE = np.iinfo(np.int64).max  # ``_used`` of a free slot: after every held one in LRU order


def least_recent(used: npt.NDArray[np.int64], n: int) -> npt.NDArray[np.intp]:
    """The ``n`` slots of smallest ``used``, ties in slot order: ``argsort(used, kind="stable")[:n]``
    in O(size), not O(size log size). At 1M facts the cache is full and evicts on every window that
    misses, and the full sort of its 100k slots cost ~20 ms a window."""
    if n >= used.shape[0]:
        return np.argsort(used, kind="stable")[:n]
    edge = used[np.argpartition(used, n - 1)[n - 1]]  # the n-th smallest value
    below = np.flatnonzero(used < edge)
    ties = np.flatnonzero(used == edge)[: n - below.shape[0]]  # flatnonzero ascends: slot order
    out = np.concatenate([below, ties])
    return out[np.lexsort((out, used[out]))]


class FactCache:
    def __init__(self, max_facts: int = 100_000) -> None:
        if max_facts < 1:
            raise ValueError(f"max_facts must be >= 1, got {max_facts}")
        self.max_facts = max_facts
        self._slot: dict[str, int] = {}  # least recently used first
        self._rows: list[dict[str, Any] | None] = []
        self._heads: list[tuple[Any, ...] | None] = []  # by slot: ``HEAD_FIELDS`` of its row
        self._grams: list[npt.NDArray[np.int64] | None] = []  # by slot: its text's n-gram hashes, if preloaded
        self._free: list[int] = []
        self._mat = np.zeros((0, 0), dtype=np.float32)  # rows of the slots whose ``_aslot`` is -1 only
        # per slot: its vector's slot in ``_ann``'s storage, or -1 where ``_mat`` holds it
        self._aslot = np.zeros(0, dtype=np.int64)
        self._owned = 0  # slots of -1: while 0, ``_mat``'s pages are never written (not resident)
        self._ann: AnnCache | None = None  # the ANN cache ``_aslot`` points into
        self._num = np.zeros((0, 3), dtype=np.float64)  # per slot: importance, modified_at_us, ttl (inf: none)
        self._int = np.zeros((0, 2), dtype=np.int64)  # per slot: epoch_us, expires_at_us (NEVER: none)
        self._used = np.zeros(0, dtype=np.int64)  # per slot: ``_clock`` at its last use (LRU order)
        self._clock = 0
        self._status: dict[str, str] = {}  # of facts known to exist, as of ``_generation``
        # ``_status`` of the cached facts again, per slot, as a code into ``_status_names`` (-1: not
        # known): a request whose facts are all cached and known reads one dict per fact (``_slot``)
        self._code = np.zeros(0, dtype=np.int16)
        self._status_names: list[str] = []
        self._status_code: dict[str, int] = {}
        self._generation: object = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, fact_id: object) -> bool:
        return fact_id in self._slot

    def clear(self) -> None:
        self._clear_rows()
        self._forget_statuses()
        self._generation = None

    def _forget_statuses(self) -> None:
        self._status.clear()
        self._code[:] = -1

    def _know(self, statuses: Iterable[tuple[str, str]]) -> None:
        """Statuses read from the store: kept, and mirrored into the slots of cached facts."""
        known, slot = self._status, self._slot
        for f, st in statuses:
            known[f] = st
            s = slot.get(f)
            if s is not None:
                self._code[s] = self._code_of(st)

    def _code_of(self, status: str) -> int:
        c = self._status_code.get(status)
        if c is None:
            c = self._status_code[status] = len(self._status_names)
            self._status_names.append(status)
        return c

    def _clear_rows(self) -> None:
        self._slot.clear()
        self._rows.clear()
        self._heads.clear()
        self._grams.clear()
        self._free.clear()
        self._mat = np.zeros((0, 0), dtype=np.float32)
        self._aslot = np.zeros(0, dtype=np.int64)
        self._owned = 0
        self._ann = None
        self._num = np.zeros((0, 3), dtype=np.float64)
        self._int = np.zeros((0, 2), dtype=np.int64)
        self._used = np.zeros(0, dtype=np.int64)
        self._code = np.zeros(0, dtype=np.int16)

    def written(self, old: object, new: object, fact_ids: Sequence[str]) -> None:
        """This process moved ``facts_generation`` from ``old`` to ``new`` by changing these statuses."""
        if self._generation == str(old):
            for f in fact_ids:
                self._status.pop(f, None)
                s = self._slot.get(f)
                if s is not None:
                    self._code[s] = -1
        else:  # another writer came between: no status kept can be trusted
            self._forget_statuses()
        self._generation = str(new)

    def _current(self, repo: Repository) -> None:
        """Forget every status when ``facts_generation`` moved (another writer) or too many are kept."""
        generation = repo.get_meta(FACTS_GENERATION) or "0"
        if generation != self._generation or len(self._status) > 2 * self.max_facts:
            self._forget_statuses()
            self._generation = generation

    def _statuses(self, repo: Repository, fact_ids: Sequence[str]) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        """The statuses of the facts known to exist, read for the facts not known; with the rows of
        those not cached either, read in the same statement (one round trip for a new topic's facts).
        After ``_current``."""
        known = self._status
        ask = list(filterfalse(known.__contains__, fact_ids))
        read: dict[str, dict[str, Any]] = {}
        if ask:
            slot = self._slot
            fresh = [f for f in ask if f not in slot]
            if fresh:
                read = cast(dict[str, dict[str, Any]], repo.fact_rows(fresh, READ_FIELDS))
                self._know((f, r["status"]) for f, r in read.items())
            cached = [f for f in ask if f in slot]
            if cached:
                self._know(repo.fact_statuses(cached).items())  # facts that do not exist stay unknown
        return known, read

    def candidates(
        self, repo: Repository, vectors: VectorIndex, fact_ids: Sequence[str]
    ) -> tuple[list[str], list[dict[str, Any]], npt.NDArray[np.float32]]:
        """The facts of ``fact_ids`` that exist in the store and have a vector, in the given order:
        their ids, rows (``FIELDS`` + the current ``status``) and unit vectors (n x dim, float32).

        The rows are the cache's own dicts, their ``status`` set by this call: read them, never
        mutate them, and not after the caller's transaction."""
        ids, rows, vecs, _cols, status, _heads, _grams = self.columns(repo, vectors, fact_ids)
        for row, st in zip(rows, status or [], strict=True):
            row["status"] = st
        return ids, rows, vecs

    def columns(self, repo: Repository, vectors: VectorIndex, fact_ids: Sequence[str]) -> Batch:
        """``candidates`` with the numeric columns of the same facts as arrays (``Columns``)."""
        if len(fact_ids) > self.max_facts:  # storing a part's misses may evict the part before it
            parts = [
                self.columns(repo, vectors, fact_ids[i : i + self.max_facts])
                for i in range(0, len(fact_ids), self.max_facts)
            ]
            return joined(parts)
        held = self._held(repo, vectors, fact_ids)
        if held is not None:  # every fact cached, its status known
            return self._hits(list(fact_ids), *held)
        slot = self._slot
        status, read = self._statuses(repo, fact_ids)
        missing = [f for f in fact_ids if f in status and f not in slot]
        self.hits += sum(map(status.__contains__, fact_ids)) - len(missing)
        loaded: dict[str, tuple[dict[str, Any], npt.NDArray[np.float32]]] = {}
        if missing:
            self.misses += len(missing)
            rows = dict(read)  # FIELDS + status, in that order: kept as they are (status is set below)
            unread = [f for f in missing if f not in rows]  # status known from an earlier call
            if unread:
                rows.update(cast(dict[str, dict[str, Any]], repo.fact_rows(unread, FIELDS)))
            vecs = vectors.stored_vectors(missing)
            loaded = {f: (rows[f], np.asarray(vecs[f], dtype=np.float32)) for f in missing if f in rows and f in vecs}
        ids = [f for f in fact_ids if f in status and (f in slot or f in loaded)]
        if loaded and self._slot and self._mat.shape[1] != next(iter(loaded.values()))[1].shape[0]:
            self._clear_rows()  # vectors of another width (another model): every fact read again
            return self.columns(repo, vectors, fact_ids)
        return self._stored_then_read(ids, status, loaded, vectors)

    def read_ahead(self, repo: Repository, vectors: VectorIndex, fact_ids: Sequence[str]) -> None:
        """``columns`` for its effect only: the facts' misses read into the cache (a micro-batch's
        requests then read their parts of it), and no batch built when every one is held."""
        if len(fact_ids) > self.max_facts or self._held(repo, vectors, fact_ids) is None:
            self.columns(repo, vectors, fact_ids)

    def _held(
        self, repo: Repository, vectors: VectorIndex, fact_ids: Sequence[str]
    ) -> tuple[list[int], npt.NDArray[np.intp], npt.NDArray[np.int16]] | None:
        """The slots of the facts when every one is cached with its status known, else None."""
        self._current(repo)
        if self._ann is not None and vectors.ann_now is not self._ann:  # slots into a cache now gone
            self._clear_rows()
        got = list(map(self._slot.get, fact_ids))
        if None in got:
            return None
        at = np.fromiter(got, dtype=np.intp, count=len(got))
        codes = self._code[at]
        if not codes.shape[0] or int(codes.min()) < 0:
            return None
        return got, at, codes  # type: ignore[return-value]  # no None

    def _stored_then_read(
        self,
        ids: list[str],
        status: dict[str, str],
        loaded: dict[str, tuple[dict[str, Any], npt.NDArray[np.float32]]],
        vectors: VectorIndex,
    ) -> Batch:
        """``columns`` once the misses are read: the hits marked used, the misses stored, and then every
        fact read from the slots, in C-level maps and fancy indexing. Storing evicts none of them: they
        fit in the cache (``columns`` reads a larger request in parts), the hits just marked are the
        most recently used, and the vectors keep their width (``columns`` starts over otherwise)."""
        slot = self._slot
        held = np.fromiter(map(slot.get, ids, repeat(-1)), dtype=np.intp, count=len(ids))
        self._touch(held[held >= 0])
        if loaded:
            rows = [r for r, _v in loaded.values()]
            self._store(loaded, Loaded(np.stack([v for _r, v in loaded.values()]), *numbers(rows)), vectors)
        got = list(map(slot.__getitem__, ids))
        return self._read(ids, got, np.fromiter(got, dtype=np.intp, count=len(got)), list(map(status.__getitem__, ids)))

    def _read(self, ids: list[str], slots: list[int], at: npt.NDArray[np.intp], status: list[str]) -> Batch:
        """The batch of the held facts ``ids``, at ``slots`` (``at`` as an array), with their statuses:
        C-level maps and fancy indexing."""
        rows = list(map(self._rows.__getitem__, slots))
        heads = list(map(self._heads.__getitem__, slots))
        grams = list(map(self._grams.__getitem__, slots))
        num, whole = self._num[at], self._int[at]
        cols = Columns(num[:, 0], num[:, 1], num[:, 2], whole[:, 0], whole[:, 1])
        vecs = self._vectors(at) if slots else np.zeros((0, self._mat.shape[1]), dtype=np.float32)
        return Batch(ids, rows, vecs, cols, status, heads, grams)  # type: ignore[arg-type]  # held: no None

    def aging(
        self, fact_ids: Sequence[str]
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The places in ``fact_ids`` of the facts held, with their ``modified_at_us`` and ``ttl_s``
        (``Columns``'s floats): what a fact's recency depends on, which never changes once it is
        committed. A peek: no status is read and the LRU order is not touched."""
        got = np.fromiter(map(self._slot.get, fact_ids, repeat(-1)), dtype=np.intp, count=len(fact_ids))
        places = np.flatnonzero(got >= 0)
        at = got[places]
        return places, self._num[at, 1], self._num[at, 2]

    def _hits(self, ids: list[str], slots: list[int], at: npt.NDArray[np.intp], codes: npt.NDArray[np.int16]) -> Batch:
        """``columns`` when every fact is cached with a known status."""
        self.hits += len(ids)
        self._touch(at)
        return self._read(ids, slots, at, list(map(self._status_names.__getitem__, codes.tolist())))

    def _vectors(self, at: npt.NDArray[np.intp]) -> npt.NDArray[np.float32]:
        """The vectors of the cached slots ``at``: the ANN cache's rows, and the cache's own."""
        ann = self._ann
        if ann is None:
            return self._mat[at]
        aslot = self._aslot[at]
        if not self._owned:
            return ann.stored()[aslot]
        mine = aslot < 0
        out = np.empty((at.shape[0], self._mat.shape[1]), dtype=np.float32)
        out[mine] = self._mat[at[mine]]
        out[~mine] = ann.stored()[aslot[~mine]]
        return out

    def _touch(self, slots: Sequence[int] | npt.NDArray[np.intp]) -> None:
        """Mark the slots used now: eviction drops the least recently used first."""
        if len(slots):
            self._clock += 1
            self._used[slots] = self._clock

    def preload(self, repo: Repository, vectors: VectorIndex, fact_ids: Sequence[str], batch: int = 5_000) -> int:
        """Read the first ``max_facts`` of ``fact_ids`` (rows, vectors, statuses) in the caller's
        transaction: at start-up, beside ``GraphCache.preload``, so that the first windows read no
        row from the store. Returns the entries held."""
        ids = list(fact_ids[: self.max_facts])
        for start in range(0, len(ids), batch):
            _ids, rows, _vecs = self.candidates(repo, vectors, ids[start : start + batch])
            for f, row in zip(_ids, rows, strict=True):  # the n-gram screen's hashes: no window tokenises them
                self._grams[self._slot[f]] = ngram.gram_hash_array(row["text"])
        self.hits = self.misses = 0  # the counters describe the requests served
        return len(self)

    def _store(
        self, loaded: dict[str, tuple[dict[str, Any], npt.NDArray[np.float32]]], new: Loaded, vectors: VectorIndex
    ) -> None:
        dim = new.vecs.shape[1]
        if self._mat.shape[1] != dim:  # first load (or another model after a rebuild): start over
            self._clear_rows()
        keep = list(loaded)[-self.max_facts :]
        first = len(loaded) - len(keep)
        over = len(self._slot) + len(keep) - self.max_facts
        if over > 0:  # the least recently used held slots (free slots are marked _FREE, never chosen)
            for s in least_recent(self._used, over).tolist():
                self._release(s)
        self._grow(len(keep), dim)
        slots = [self._free.pop() for _ in keep]
        known = self._status
        for f, s in zip(keep, slots, strict=True):
            self._slot[sys.intern(str(f))] = s  # the ANN cache's ids are interned too: lookups compare pointers
            self._rows[s] = loaded[f][0]
            self._heads[s] = head_of(loaded[f][0])
            self._grams[s] = None
            st = known.get(f)
            self._code[s] = -1 if st is None else self._code_of(st)
        ann = vectors.ann_now
        if self._ann is None and ann is not None:
            self._ann = ann
        at = np.asarray(slots, dtype=np.intp)
        held = ann if ann is self._ann else None  # a cache this process no longer reads: keep them here
        aslot = held.slots(keep) if held is not None else np.full(len(keep), -1, dtype=np.int64)
        mine = aslot < 0
        self._owned += int(mine.sum()) - int((self._aslot[at] < 0).sum())
        self._aslot[at] = aslot
        if mine.any():
            self._mat[at[mine]] = new.vecs[first:][mine]
        self._num[slots], self._int[slots] = new.num[first:], new.whole[first:]
        self._touch(slots)

    def _release(self, s: int) -> None:
        row = self._rows[s]
        assert row is not None
        del self._slot[row["fact_id"]]
        self._rows[s] = None
        self._heads[s] = None
        self._grams[s] = None
        self._code[s] = -1
        if self._aslot[s] < 0:
            self._owned -= 1
        self._aslot[s] = 0  # a free slot counts as one the ANN cache holds (not in ``_owned``)
        self._used[s] = _FREE
        self._free.append(s)

    def _grow(self, need: int, dim: int) -> None:
        short = need - len(self._free)
        if short <= 0:
            return
        old = self._mat.shape[0]
        size = min(max(old * 2, old + short, 1024), self.max_facts)
        mat = np.zeros((size, dim), dtype=np.float32)  # pages mapped on first write: only own rows'
        if self._owned:
            mat[:old] = self._mat[:old]
        self._mat = mat
        aslot = np.zeros(size, dtype=np.int64)  # free slots: 0 (see ``_release``)
        aslot[:old] = self._aslot[:old]
        self._aslot = aslot
        num = np.zeros((size, 3), dtype=np.float64)
        num[:old] = self._num[:old]
        self._num = num
        whole = np.zeros((size, 2), dtype=np.int64)
        whole[:old] = self._int[:old]
        self._int = whole
        used = np.full(size, _FREE, dtype=np.int64)
        used[:old] = self._used[:old]
        self._used = used
        codes = np.full(size, -1, dtype=np.int16)
        codes[:old] = self._code[:old]
        self._code = codes
        self._rows.extend([None] * (size - old))
        self._heads.extend([None] * (size - old))
        self._grams.extend([None] * (size - old))
        self._free.extend(range(size - 1, old - 1, -1))  # popped from the end: lowest slot first


__all__ = ["FIELDS", "HEAD_FIELDS", "NEVER", "Batch", "Columns", "FactCache", "least_recent"]
