"""In-memory index of the arbiter's claims: each claim's member facts and its ``claims`` row.

Without it the arbiter reads every member of a claim, and the claim's row, from SQL on every record.
The index holds **committed state only**, by construction:

- ``ClaimIndex`` is what was committed. A unit of work never changes it: it sees it through a
  ``ClaimTxn`` (``Repository.claims``), which stages what the transaction loads and writes
  (copy-on-write per key) and is applied to the index by ``ClaimIndex.committed`` after the commit
  returned. A rollback discards the stage; the index is untouched, so it needs no undo.
- Entries are *complete*: an entry holds every fact whose ``claim_key`` is the entry's key, in
  ``(epoch_us, fact_id)`` order, and the claim's row (or that there is none). A key held neither in
  the stage nor in the index is read from the store in the transaction, and staged.
- The transaction's writes through ``Repository`` are staged: ``insert_facts`` adds new members,
  ``set_fact_status`` replaces their rows, ``put_claim`` replaces the claim row; ``set_claim_key``
  (and an insert that met stored ids) makes the keys it touches *unknown*: read from the store for the
  rest of the transaction and dropped from the index at commit. A rolled-back savepoint makes the keys
  staged since it began unknown likewise (their stage may hold the rolled-back writes).
- Other writers: every write of claim data moves the meta counter ``claims_generation`` once per
  transaction (``Repository._claims_written``). At its first read a transaction compares the counter
  (as it stood before its own move) with the index's; another value drops the index. At commit the
  stage is applied only if the index was at the value this transaction moved from (or, for a
  transaction that wrote nothing, at the value it read); else the index is dropped.
- Bounded: past ``max_facts`` member facts the least recently used keys are dropped; a claim larger
  than the bound is read from the store every time. Rows are shared dicts, replaced (never mutated) on
  a write: read them, never mutate them. ``memo`` (per key) keeps what the arbiter derives from a
  fact's fixed columns (its normalised value): a pure function of the row, so sharing it is safe.
  Not thread-safe: one thread runs the units of work that use it (the runtimes' fabric thread).
"""

from __future__ import annotations

from bisect import insort
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import product, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Float, Integer

from crp_stream.fabric.sql import tables as t
from crp_stream.fabric.sql.rows import ClaimRow, FactRow

if TYPE_CHECKING:
    from crp_stream.fabric.sql.repository import Repository

CLAIMS_GENERATION = "claims_generation"
# the Python type the driver returns for a column, None: as given (an inserted row is kept as read back)
_TYPES = {
    name: float if isinstance(c.type, Float) else int if isinstance(c.type, Integer) else None
    for name, c in zip(t.column_names(t.facts), t.facts.c, strict=True)
}

_COLUMNS = tuple(_TYPES)
_CASTS = tuple((c, k) for c, k in _TYPES.items() if k is not None)
Claim = tuple[ClaimRow | None, list[FactRow], dict[str, Any]]
_FACT_ID = itemgetter("fact_id")


_PICK_CASTS = itemgetter(*(c for c, _ in _CASTS))
# every combination of the cast columns' types that needs no cast: each column its type or None
_STORED_TYPES = frozenset(product(*((k, type(None)) for _, k in _CASTS)))


def as_stored(row: FactRow) -> FactRow:
    """A fact row as the store reads it back: every column, in table order, numbers as the driver types them."""
    if type(row) is dict and tuple(row) == _COLUMNS:  # every column in order (ingest's rows): no lookups
        out: dict[str, Any] = dict(zip(_COLUMNS, row.values(), strict=True))  # keys ours: interned str
    else:
        out = dict(zip(_COLUMNS, map(row.get, _COLUMNS), strict=True))  # a column not given is None
    if tuple(map(type, _PICK_CASTS(out))) in _STORED_TYPES:  # the types checked in C: nothing to cast
        return cast(FactRow, out)
    for c, k in _CASTS:
        v = out[c]
        if v is not None and type(v) is not k:
            out[c] = k(v)
    return cast(FactRow, out)


@dataclass
class _Entry:
    rows: list[FactRow]
    claim: ClaimRow | None
    memo: dict[str, Any] = field(default_factory=dict)
    added: list[str] = field(default_factory=list)  # facts inserted since the copy (``copy``)

    def copy(self) -> _Entry:
        """A transaction's copy to write: the same memo (it marks the copy) and rows, none added."""
        return _Entry(list(self.rows), self.claim, self.memo)


def _order(row: FactRow) -> tuple[int, str]:
    return (int(row["epoch_us"]), str(row["fact_id"]))


class ClaimIndex:
    """The committed claims; changed only by ``committed``, ``clear`` and ``sync``'s drop."""

    def __init__(self, max_facts: int = 100_000) -> None:
        if max_facts < 1:
            raise ValueError(f"max_facts must be >= 1, got {max_facts}")
        self.max_facts = max_facts
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._claim_of: dict[str, str] = {}  # fact_id -> key, for the facts held
        self._generation: str | None = None  # the counter value the entries are current at
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

    def begin(self, repo: Repository) -> ClaimTxn:
        return ClaimTxn(self, repo)

    # the store's API for the arbiter: each call goes through the transaction's stage ---------------
    def claim(self, repo: Repository, key: str) -> Claim:
        """The claim's row, its member facts in ``(epoch_us, fact_id)`` order (a new list) and its
        memo, as ``repo``'s transaction sees them."""
        if repo.claims is None:  # a repository without the index: straight from the store
            return repo.get_claim(key), repo.facts_for_claim(key), {}
        return repo.claims.claim(key)

    def claim_of(self, repo: Repository, fact_id: str) -> str | None:
        """The claim of a held fact as ``repo``'s transaction sees it; None: not known here."""
        return None if repo.claims is None else repo.claims.claim_of(fact_id)

    def preload(self, repo: Repository) -> int:
        return 0 if repo.claims is None else repo.claims.preload()

    def held(self, key: str) -> tuple[ClaimRow | None, list[FactRow]] | None:
        """What the index holds for ``key`` (None: not held), without touching the store."""
        entry = self._entries.get(key)
        return None if entry is None else (entry.claim, list(entry.rows))

    # commit ----------------------------------------------------------------------------------------
    def committed(self, txn: ClaimTxn, claims_base: int | None) -> None:
        """After the commit returned: apply ``txn``'s stage if the index was current where the
        transaction started from; else start over. A transaction that neither read nor wrote claims
        leaves the index as it is."""
        if claims_base is not None:  # it moved the counter from claims_base
            if self._generation != str(claims_base) or (txn.synced is not None and txn.synced != str(claims_base)):
                self.clear()
                return
            new = str(claims_base + 1)
        elif txn.synced is not None:  # it only read, at the value it synced to
            if self._generation != txn.synced:
                self.clear()
                return
            new = txn.synced
        else:
            return
        for key in txn.unknown:
            self._drop(key)
        for key, entry in txn.staged.items():
            self._put(key, entry)
        self._generation = new
        self._evict()

    # internals -------------------------------------------------------------------------------------
    def _sync(self, generation: str) -> None:
        if generation != self._generation:  # another writer, or a commit of ours whose outcome was lost
            self.clear()
            self._generation = generation

    def _put(self, key: str, entry: _Entry) -> None:
        """``_drop(key)`` then hold ``entry``, with the maps written in C (a commit puts every claim its
        batch touched, ~50 facts each): only the old entry's facts not in the new one are dropped."""
        old = self._entries.pop(key, None)
        self._entries[key] = entry
        if old is not None and old.memo is entry.memo:  # a copy of ``old``: its facts, plus those added
            self._claim_of.update(zip(entry.added, repeat(key)))
            entry.added = []
            return
        entry.added = []
        ids = set(map(_FACT_ID, entry.rows))
        if old is not None:
            for fid in set(map(_FACT_ID, old.rows)) - ids:
                if self._claim_of.get(fid) == key:
                    del self._claim_of[fid]
        self._claim_of.update(zip(ids, repeat(key)))

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            for r in entry.rows:
                if self._claim_of.get(r["fact_id"]) == key:
                    del self._claim_of[r["fact_id"]]

    def _evict(self) -> None:
        while len(self._claim_of) > self.max_facts and len(self._entries) > 1:
            self._drop(next(iter(self._entries)))


class ClaimTxn:
    """One unit of work's view of the claims: the committed index plus its own stage."""

    def __init__(self, index: ClaimIndex, repo: Repository) -> None:
        self.index = index
        self.repo = repo
        self.synced: str | None = None  # the counter value read at the first read (None: no read yet)
        self.staged: dict[str, _Entry] = {}  # entries as this transaction sees them
        self.unknown: set[str] = set()  # keys to read from the store here and to drop at commit
        self._claim_of: dict[str, str] = {}  # fact_id -> key, for staged entries
        self._moved: set[str] = set()  # facts whose claim key this transaction changed
        self._touched: list[str] = []  # keys staged, in order (savepoints)

    # reads -----------------------------------------------------------------------------------------
    def sync(self) -> None:
        """At the first read: drop the index if another writer moved the counter since it was current."""
        if self.synced is not None:
            return
        base = self.repo.claims_base
        generation = str(base) if base is not None else (self.repo.get_meta(CLAIMS_GENERATION) or "0")
        if generation != self.index._generation:
            # writes staged so far were copied from an index that is not current: read them again
            for key in list(self.staged):
                self._forget(key)
        self.index._sync(generation)
        self.synced = generation

    def claim(self, key: str) -> Claim:
        self.sync()
        entry = self.staged.get(key)
        if entry is None and key not in self.unknown:
            entry = self.index._entries.get(key)
            if entry is not None:
                self.index._entries.move_to_end(key)
        if entry is not None:
            self.index.hits += 1
            return entry.claim, list(entry.rows), entry.memo
        self.index.loads += 1
        rows = self.repo.facts_for_claim(key)
        entry = _Entry(rows, self.repo.get_claim(key))
        if len(rows) <= self.index.max_facts:  # what this transaction sees: applied if it commits
            self._stage(key, entry)
            self.unknown.discard(key)
        return entry.claim, list(rows), entry.memo

    def claim_of(self, fact_id: str) -> str | None:
        key = self._claim_of.get(fact_id)
        if key is not None and key in self.staged:
            return key
        if fact_id in self._moved:
            return None
        key = self.index._claim_of.get(fact_id)
        return None if key is None or key in self.unknown else key

    def preload(self) -> int:
        """Stage whole claims, up to ``max_facts`` facts (one read of facts, one of claim rows); the
        index starts over from them when this transaction commits."""
        self.sync()
        limit = self.index.max_facts
        rows = self.repo.claimed_facts(limit + 1)
        by_key: dict[str, list[FactRow]] = {}
        for r in rows:
            by_key.setdefault(str(r["claim_key"]), []).append(r)
        if len(rows) > limit and by_key:  # the last key may be cut short: leave it out
            by_key.pop(str(rows[-1]["claim_key"]))
        stored = self.repo.claim_rows(list(by_key))
        # read in this transaction, so they include its own writes: they replace the whole stage, and
        # every key of the index not among them is dropped at commit
        self.unknown.update(self.index._entries)
        for key in list(self.staged):
            self._forget(key)
        for key, members in by_key.items():
            members.sort(key=_order)
            self._stage(key, _Entry(members, stored.get(key)))
            self.unknown.discard(key)
        return sum(len(e.rows) for e in self.staged.values())

    # writes ----------------------------------------------------------------------------------------
    def inserted(self, rows: Iterable[FactRow]) -> None:
        """New facts (ids not stored before) joined their claims; ``rows`` are as the store reads them
        back (``as_stored``), and are staged as they are (never mutated)."""
        for r in rows:
            key = r.get("claim_key")
            entry = self._writable(str(key)) if key is not None else None
            if entry is None or self.claim_of(r["fact_id"]) is not None:
                continue
            if not entry.rows or _order(entry.rows[-1]) < _order(r):
                entry.rows.append(r)  # the claim's latest (most inserts): where ``insort`` puts it
            else:
                insort(entry.rows, r, key=_order)
            entry.added.append(r["fact_id"])
            self._claim_of[r["fact_id"]] = str(key)

    def invalidate_facts(self, rows: Iterable[FactRow]) -> None:
        """Writes whose effect on the keys is not known (an insert that met stored ids)."""
        for r in rows:
            old = self.claim_of(r["fact_id"])
            for key in (r.get("claim_key"), old):
                if key is not None:
                    self._forget(str(key))

    def status_changed(self, fact_ids: Sequence[str], status: str) -> None:
        for fid in fact_ids:
            key = self.claim_of(fid)
            entry = self._writable(key) if key is not None else None
            if entry is None:
                continue
            for i, r in enumerate(entry.rows):
                if r["fact_id"] == fid:
                    entry.rows[i] = cast(FactRow, {**r, "status": status})
                    break

    def claim_key_set(self, fact_ids: Sequence[str], key: str) -> None:
        for fid in fact_ids:
            old = self.claim_of(fid)
            if old is not None:
                self._forget(old)
            self._moved.add(fid)
        self._forget(key)

    def claim_written(self, row: ClaimRow) -> None:
        entry = self._writable(row["claim_key"])
        if entry is not None:
            entry.claim = row

    # savepoints ------------------------------------------------------------------------------------
    def mark(self) -> int:
        return len(self._touched)

    def rollback_to(self, mark: int) -> None:
        """A savepoint was rolled back: the keys staged since ``mark`` are read from the store again."""
        for key in set(self._touched[mark:]):
            self._forget(key)
        del self._touched[mark:]

    # internals -------------------------------------------------------------------------------------
    def _writable(self, key: str) -> _Entry | None:
        """The staged entry of ``key``, copied from the index on the first write; None if the key is
        not held (nothing to keep current: it is read from the store when needed)."""
        entry = self.staged.get(key)
        if entry is None:
            if key in self.unknown:
                return None
            held = self.index._entries.get(key)
            if held is None:
                return None
            entry = held.copy()
            # its facts are the index's under this key (``claim_of`` finds them there): not mapped again
            self.staged[key] = entry
            self._touched.append(key)
        else:
            self._touched.append(key)
        return entry

    def _stage(self, key: str, entry: _Entry) -> None:
        self.staged[key] = entry
        self._claim_of.update(zip(map(_FACT_ID, entry.rows), repeat(key)))
        self._touched.append(key)

    def _forget(self, key: str) -> None:
        entry = self.staged.pop(key, None)
        if entry is not None:
            for r in entry.rows:
                if self._claim_of.get(r["fact_id"]) == key:
                    del self._claim_of[r["fact_id"]]
        self.unknown.add(key)


__all__ = ["CLAIMS_GENERATION", "ClaimIndex", "ClaimTxn"]
