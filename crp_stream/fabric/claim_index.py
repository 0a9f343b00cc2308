"""In-memory index of the arbiter's claims: each claim's member facts and its ``claims`` row.

Without it the arbiter reads every member of a claim, and the claim's row, from SQL on every record
(issue 12). What is kept, and why it is never ahead of the database:

- Entries are *complete*: an entry holds every fact whose ``claim_key`` is the entry's key, in
  ``(epoch_us, fact_id)`` order, and the claim's row (or that there is none). A key not held is read
  from the store (``facts_for_claim`` + ``get_claim``) in the caller's transaction.
- It is rebuilt at start (``preload``, the arbiter's ``bind``) and kept current by the writes this
  process makes through ``Repository``: ``insert_facts`` adds the new members of held keys,
  ``set_fact_status`` replaces their rows, ``set_claim_key`` drops the keys it touches (reloaded on
  their next read), ``put_claim`` replaces the claim row.
- What this process did not write: every write of claim data (those four) moves the meta counter
  ``claims_generation``, once per transaction (``Repository._claims_written``). ``sync`` at a
  transaction's first read compares the counter as it stood before this transaction's own move with
  the value the index is at; another value (another process wrote, or a commit of ours was lost)
  drops everything. ``committed`` moves the index to the new value after a commit.
- A rolled-back transaction drops everything (``Fabric.unit_of_work``, as the fact cache); a
  rolled-back savepoint (a rejected record) drops the keys loaded or written since it began
  (``Repository.savepoint``). Reloads are lazy, one key at a time.
- Bounded: past ``max_facts`` member facts the least recently used keys are dropped; a claim larger
  than the bound is read from the store every time. Rows are the index's own dicts, replaced (never
  mutated) on a write: read them, never mutate them. ``memo`` (per key) keeps what the arbiter derives
  from a fact's fixed columns (its normalised value), dropped with the key. Not thread-safe.
"""

from __future__ import annotations

from bisect import insort
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Float, Integer

from crp_stream.fabric import tables as t
from crp_stream.fabric.rows import ClaimRow, FactRow

if TYPE_CHECKING:
    from crp_stream.fabric.repository import Repository

CLAIMS_GENERATION = "claims_generation"
# the Python type the driver returns for a column, None: as given (an inserted row is kept as read back)
_TYPES = {
    c.name: float if isinstance(c.type, Float) else int if isinstance(c.type, Integer) else None for c in t.facts.c
}


@dataclass
class _Entry:
    rows: list[FactRow]
    claim: ClaimRow | None
    memo: dict[str, Any] = field(default_factory=dict)


def _order(row: FactRow) -> tuple[int, str]:
    return (int(row["epoch_us"]), str(row["fact_id"]))


class ClaimIndex:
    def __init__(self, max_facts: int = 100_000) -> None:
        if max_facts < 1:
            raise ValueError(f"max_facts must be >= 1, got {max_facts}")
        self.max_facts = max_facts
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._claim_of: dict[str, str] = {}  # fact_id -> key, for the facts held
        self._generation: str | None = None
        self._touched: list[str] = []  # keys loaded or written in the current transaction
        self.hits = 0
        self.loads = 0

    def __len__(self) -> int:
        return len(self._claim_of)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def clear(self) -> None:
        self._entries.clear()
        self._claim_of.clear()
        self._generation = None
        self._touched.clear()

    # transactions ----------------------------------------------------------------------------------
    def sync(self, repo: Repository) -> None:
        """At a transaction's first read: drop everything if another writer moved the counter."""
        if repo.claims_synced:
            return
        base = repo.claims_base if repo.claims_base is not None else (repo.get_meta(CLAIMS_GENERATION) or "0")
        if str(base) != self._generation:
            self.clear()
            self._generation = str(base)
        repo.claims_synced = True

    def committed(self, repo: Repository) -> None:
        """After a commit: at the new counter value if this transaction's writes were all applied to
        an index that was current when it moved the counter; else start over. A transaction that
        neither read nor wrote claims (another thread's read) leaves it as it is."""
        if not repo.claims_synced and repo.claims_base is None:
            return
        self._touched.clear()
        if repo.claims_base is None:
            return
        if self._generation == str(repo.claims_base):
            self._generation = str(int(repo.claims_base) + 1)
        else:
            self.clear()

    def mark(self) -> int:
        return len(self._touched)

    def rollback_to(self, mark: int) -> None:
        """A savepoint was rolled back: forget the keys loaded or written since ``mark``."""
        for key in set(self._touched[mark:]):
            self._drop(key)
        del self._touched[mark:]

    # reads -----------------------------------------------------------------------------------------
    def claim(self, repo: Repository, key: str) -> tuple[ClaimRow | None, list[FactRow], dict[str, Any]]:
        """The claim's row, its member facts in ``(epoch_us, fact_id)`` order (a new list of the
        index's dicts) and its memo, in ``repo``'s transaction."""
        self.sync(repo)
        entry = self._entries.get(key)
        if entry is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            return entry.claim, list(entry.rows), entry.memo
        self.loads += 1
        rows = repo.facts_for_claim(key)
        entry = _Entry(rows, repo.get_claim(key))
        if len(rows) <= self.max_facts:
            self._put(key, entry)
        return entry.claim, list(rows), entry.memo

    def held(self, key: str) -> tuple[ClaimRow | None, list[FactRow]] | None:
        """What the index holds for ``key`` (None: not held), without touching the store."""
        entry = self._entries.get(key)
        return None if entry is None else (entry.claim, list(entry.rows))

    def claim_of(self, fact_id: str) -> str | None:
        return self._claim_of.get(fact_id)

    def preload(self, repo: Repository) -> int:
        """Fill with whole claims, up to ``max_facts`` facts (one read of facts, one of claim rows)."""
        self.clear()
        self.sync(repo)
        rows = repo.claimed_facts(self.max_facts + 1)
        by_key: dict[str, list[FactRow]] = {}
        for r in rows:
            by_key.setdefault(str(r["claim_key"]), []).append(r)
        if len(rows) > self.max_facts and by_key:  # the last key may be cut short: leave it out
            by_key.pop(str(rows[-1]["claim_key"]))
        stored = repo.claim_rows(list(by_key))
        for key, members in by_key.items():
            members.sort(key=_order)
            self._put(key, _Entry(members, stored.get(key)))
        self._touched.clear()
        return len(self._claim_of)

    # writes of this process ------------------------------------------------------------------------
    def inserted(self, rows: Iterable[FactRow]) -> None:
        """New facts (ids not stored before) joined their claims: kept as the store reads them back."""
        for r in rows:
            key = r.get("claim_key")
            entry = self._entries.get(key) if key is not None else None
            if entry is None or r["fact_id"] in self._claim_of:
                continue
            given: dict[str, Any] = dict(r)
            row = {c: given.get(c) if k is None or given.get(c) is None else k(given[c]) for c, k in _TYPES.items()}
            insort(entry.rows, cast(FactRow, row), key=_order)
            self._claim_of[r["fact_id"]] = str(key)
            self._touched.append(str(key))
        self._evict()

    def invalidate_facts(self, rows: Iterable[FactRow]) -> None:
        """Writes whose effect on held keys is not known (an insert that met stored ids)."""
        for r in rows:
            key = r.get("claim_key")
            if key is not None:
                self._drop(str(key))
            old = self._claim_of.get(r["fact_id"])
            if old is not None:
                self._drop(old)

    def status_changed(self, fact_ids: Sequence[str], status: str) -> None:
        for fid in fact_ids:
            key = self._claim_of.get(fid)
            if key is None:
                continue
            entry = self._entries[key]
            for i, r in enumerate(entry.rows):
                if r["fact_id"] == fid:
                    entry.rows[i] = {**r, "status": status}
                    break
            self._touched.append(key)

    def claim_key_set(self, fact_ids: Sequence[str], key: str) -> None:
        for fid in fact_ids:
            old = self._claim_of.get(fid)
            if old is not None:
                self._drop(old)
        self._drop(key)

    def claim_written(self, row: ClaimRow) -> None:
        entry = self._entries.get(row["claim_key"])
        if entry is not None:
            entry.claim = row
            self._touched.append(row["claim_key"])

    # internals -------------------------------------------------------------------------------------
    def _put(self, key: str, entry: _Entry) -> None:
        self._drop(key)
        self._entries[key] = entry
        for r in entry.rows:
            self._claim_of[r["fact_id"]] = key
        self._touched.append(key)
        self._evict()

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            for r in entry.rows:
                self._claim_of.pop(r["fact_id"], None)

    def _evict(self) -> None:
        while len(self._claim_of) > self.max_facts and len(self._entries) > 1:
            self._drop(next(iter(self._entries)))


__all__ = ["CLAIMS_GENERATION", "ClaimIndex"]
