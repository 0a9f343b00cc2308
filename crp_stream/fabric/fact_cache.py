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
  the index has one (the same floats, no round trip), else from the index.
- Bounded: past ``max_facts`` entries the least recently used are dropped (~2.5 KB a fact at 384-d:
  ~250 MB at the default bound). Vectors live in one float32 matrix, so a candidate set is one
  fancy-indexing copy. Not thread-safe (one record at a time).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any

import numpy as np
import numpy.typing as npt

from crp_stream.fabric.repository import FACTS_GENERATION

# The columns assembly reads; ``status`` is filled in per call from the store.
FIELDS = (
    "fact_id",
    "source",
    "source_type",
    "trust",
    "importance",
    "epoch_us",
    "modified_at_us",
    "ttl_s",
    "expires_at_us",
    "text",
    "subject",
    "attribute",
    "value",
    "unit",
)


class FactCache:
    def __init__(self, max_facts: int = 100_000) -> None:
        if max_facts < 1:
            raise ValueError(f"max_facts must be >= 1, got {max_facts}")
        self.max_facts = max_facts
        self._slot: dict[str, int] = {}  # least recently used first
        self._rows: list[dict[str, Any] | None] = []
        self._free: list[int] = []
        self._mat = np.zeros((0, 0), dtype=np.float32)
        self._status: dict[str, str] = {}  # of facts known to exist, as of ``_generation``
        self._generation: object = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, fact_id: object) -> bool:
        return fact_id in self._slot

    def clear(self) -> None:
        self._clear_rows()
        self._status.clear()
        self._generation = None

    def _clear_rows(self) -> None:
        self._slot.clear()
        self._rows.clear()
        self._free.clear()
        self._mat = np.zeros((0, 0), dtype=np.float32)

    def written(self, old: object, new: object, fact_ids: Sequence[str]) -> None:
        """This process moved ``facts_generation`` from ``old`` to ``new`` by changing these statuses."""
        if self._generation == str(old):
            for f in fact_ids:
                self._status.pop(f, None)
        else:  # another writer came between: no status kept can be trusted
            self._status.clear()
        self._generation = str(new)

    def _statuses(self, repo: Any, fact_ids: Sequence[str]) -> dict[str, str]:
        generation = repo.get_meta(FACTS_GENERATION) or "0"
        known = self._status
        if generation != self._generation or len(known) > 2 * self.max_facts:
            known.clear()
            self._generation = generation
        ask = [f for f in fact_ids if f not in known]
        if ask:
            known.update(repo.fact_statuses(ask))  # facts that do not exist stay unknown
        return known

    def candidates(
        self, repo: Any, vectors: Any, fact_ids: Sequence[str]
    ) -> tuple[list[str], list[dict[str, Any]], npt.NDArray[np.float32]]:
        """The facts of ``fact_ids`` that exist in the store and have a vector, in the given order:
        their ids, rows (``FIELDS`` + the current ``status``) and unit vectors (n x dim, float32).

        The rows are the cache's own dicts, their ``status`` set by this call: read them, never
        mutate them, and not after the caller's transaction."""
        status = self._statuses(repo, fact_ids)
        slot = self._slot
        missing = [f for f in fact_ids if f in status and f not in slot]
        self.hits += sum(1 for f in fact_ids if f in status) - len(missing)
        loaded: dict[str, tuple[dict[str, Any], npt.NDArray[np.float32]]] = {}
        if missing:
            self.misses += len(missing)
            rows = repo.fact_rows(missing, FIELDS)
            vecs = vectors.stored_vectors(missing)
            loaded = {
                f: ({k: rows[f][k] for k in FIELDS}, np.asarray(vecs[f], dtype=np.float32))
                for f in missing
                if f in rows and f in vecs
            }
        ids = [f for f in fact_ids if f in status and (f in slot or f in loaded)]
        out_rows: list[dict[str, Any]] = []
        hit_at: list[int] = []
        hit_slots: list[int] = []
        cached = self._rows
        for n, f in enumerate(ids):
            s = slot.get(f)
            if s is None:
                row = loaded[f][0]
            else:
                slot[f] = slot.pop(f)  # most recently used last: evicted last
                row = cached[s] or {}
                hit_at.append(n)
                hit_slots.append(s)
            row["status"] = status[f]  # the cache's own dict: only its status changes, here
            out_rows.append(row)
        dim = self._mat.shape[1] if hit_slots else (next(iter(loaded.values()))[1].shape[0] if loaded else 0)
        out = np.zeros((len(ids), dim), dtype=np.float32)
        if hit_slots:
            out[hit_at] = self._mat[hit_slots]
        for n, f in enumerate(ids):
            if f in loaded:
                out[n] = loaded[f][1]
        if loaded:
            self._store(loaded)
        return ids, out_rows, out

    def _store(self, loaded: dict[str, tuple[dict[str, Any], npt.NDArray[np.float32]]]) -> None:
        dim = next(iter(loaded.values()))[1].shape[0]
        if self._mat.shape[1] != dim:  # first load (or another model after a rebuild): start over
            self._clear_rows()
        keep = list(loaded)[-self.max_facts :]
        over = len(self._slot) + len(keep) - self.max_facts
        for f in list(islice(self._slot, max(over, 0))):
            self._release(f)
        self._grow(len(keep), dim)
        for f in keep:
            s = self._free.pop()
            self._slot[f] = s
            self._rows[s], self._mat[s] = loaded[f]

    def _release(self, fact_id: str) -> None:
        s = self._slot.pop(fact_id)
        self._rows[s] = None
        self._free.append(s)

    def _grow(self, need: int, dim: int) -> None:
        short = need - len(self._free)
        if short <= 0:
            return
        old = self._mat.shape[0]
        size = min(max(old * 2, old + short, 1024), self.max_facts)
        mat = np.zeros((size, dim), dtype=np.float32)
        mat[:old] = self._mat[:old] if old else mat[:0]
        self._mat = mat
        self._rows.extend([None] * (size - old))
        self._free.extend(range(size - 1, old - 1, -1))  # popped from the end: lowest slot first


__all__ = ["FIELDS", "FactCache"]
