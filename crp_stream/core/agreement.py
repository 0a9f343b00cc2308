"""Partition agreement kept incrementally: a claim's views updated in O(one source) per new record.

``core.drift.partition_views`` recomputes every partition over all of a claim's records (~50) on
every record. ``PartitionState`` holds the same answer as running tallies, one per source, and
``partition_views_after`` moves it forward by the records that arrived since. Records must arrive in
``(epoch, fact_id)`` order within each source (a claim's rows in store order satisfy this); a record
out of that order raises ValueError and the caller starts over with ``partition_views``.

>>> st = PartitionState()
>>> recs = [ClaimRecord("a", "s", 0.4, 1.0, "1", "active"), ClaimRecord("b", "s", 0.4, 2.0, "2", "active")]
>>> partition_views_after(st, recs) == partition_views(recs)
True
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable

from crp_stream.core.drift import COUNTED_STATUSES, ClaimRecord, PartitionView, partition_views

__all__ = ["PartitionState", "partition_views", "partition_views_after"]

_new = tuple.__new__


class _SourceTally:
    """One source's speaking records (``counted_records``), grouped by value, and its cached view."""

    __slots__ = ("best", "ids", "last", "newest", "newest_active", "speaking", "stale", "total", "view")

    def __init__(self) -> None:
        self.speaking: dict[str, list[ClaimRecord]] = {}  # value -> its speaking records, in order
        self.ids: dict[str, list[str]] = {}  # value -> their fact ids, sorted
        self.stale: list[ClaimRecord] = []  # speaking stale records, in order: a later active one silences them
        self.newest_active = float("-inf")
        self.newest: ClaimRecord | None = None  # the last speaking record
        self.last: tuple[float, str] | None = None  # the last record added, speaking or not
        self.total = 0
        self.view: PartitionView | None = None
        self.best: str | None = None  # the majority value of the records added (None: to be found)

    def add(self, r: ClaimRecord) -> None:
        key = (r.epoch, r.fact_id)
        if self.last is not None and key <= self.last:
            raise ValueError(f"record {r.fact_id} out of (epoch, fact_id) order for source {r.source}")
        self.last = key
        if r.status not in COUNTED_STATUSES:
            return
        if r.status == "active":
            if r.epoch > self.newest_active:
                self.newest_active = r.epoch
                # the source refreshed: its stale records before this one stop speaking
                while self.stale and self.stale[0].epoch < r.epoch:
                    self._remove(self.stale.pop(0))
        else:  # stale: it speaks while no active record of its source is later (always, in order)
            self.stale.append(r)
        value = r.value
        records = self.speaking.get(value)
        if records is None:
            records = self.speaking[value] = []
            self.ids[value] = []
        records.append(r)
        insort(self.ids[value], r.fact_id)
        self.total += 1
        self.newest = r
        self.view = None
        best = self.best
        if best is not None and best != value:
            # only this value's count and latest epoch moved, both in its favour: the majority is the
            # one it was or this value (``_agreement``'s order: most records, latest, smallest value)
            held = self.speaking[best]
            if (-len(records), -r.epoch, value) < (-len(held), -held[-1].epoch, best):
                self.best = value

    def _remove(self, r: ClaimRecord) -> None:
        records, ids = self.speaking[r.value], self.ids[r.value]
        records.remove(r)
        ids.remove(r.fact_id)
        if not records:
            del self.speaking[r.value], self.ids[r.value]
        self.total -= 1
        self.best = None

    def current(self) -> PartitionView | None:
        """``partition_agreement`` of the records added (None: none speaks)."""
        if self.view is None and self.newest is not None and self.total:
            value = self.best
            if value is None:
                if len(self.speaking) == 1:  # one value (most partitions): the majority without a comparison
                    value = next(iter(self.speaking))
                else:
                    value = min(self.speaking.items(), key=lambda item: (-len(item[1]), -item[1][-1].epoch, item[0]))[0]
                self.best = value
            support = self.speaking[value]
            newest, n, total = self.newest, len(support), self.total
            # the fields in order, by ``tuple.__new__``: a view is built per record, and the NamedTuple's
            # own ``__new__`` (a Python function taking them by name) cost ~1.5k instructions more
            self.view = _new(
                PartitionView,
                (
                    newest.source,
                    newest.trust,
                    value,
                    n / total,
                    n,
                    total,
                    support[-1].epoch,
                    newest.epoch,
                    tuple(self.ids[value]),
                ),
            )
        return self.view


class PartitionState:
    """A claim's records so far (``records``, in the order added) and its partitions' tallies."""

    __slots__ = ("_sorted", "_tallies", "_views", "records")

    def __init__(self) -> None:
        self.records: list[ClaimRecord] = []
        self._tallies: dict[str, _SourceTally] = {}
        self._sorted: list[_SourceTally] = []  # by source
        self._views: tuple[PartitionView, ...] | None = None

    def add(self, r: ClaimRecord) -> None:
        tally = self._tallies.get(r.source)
        if tally is None:
            tally = self._tallies[r.source] = _SourceTally()
            self._sorted = [self._tallies[s] for s in sorted(self._tallies)]
        tally.add(r)
        self.records.append(r)
        if tally.view is None:
            self._views = None

    def restate(self, records: list[ClaimRecord]) -> None:
        """``records`` are the records added so far, in the same order, some replaced by a record of the
        same fact and source (its status changed): the tallies of those sources are built again from
        their records, the others kept. The same state as ``records`` added to a new one (a source's
        tally reads only its own records); ValueError, leaving the state unusable, on any other change."""
        if len(records) != len(self.records):
            raise ValueError("restate: not the records added")
        changed = set()
        for old, new in zip(self.records, records, strict=True):
            if old is not new:
                if old.fact_id != new.fact_id or old.source != new.source:
                    raise ValueError(f"restate: {new.fact_id} is not the record added there")
                changed.add(new.source)
        for source in changed:
            tally = self._tallies[source] = _SourceTally()
            for r in records:
                if r.source == source:
                    tally.add(r)
        if changed:
            self._sorted = [self._tallies[s] for s in sorted(self._tallies)]
            self._views = None
        self.records = list(records)  # its own: records are added to it

    def views(self) -> tuple[PartitionView, ...]:
        if self._views is None:
            # in C: a view is a non-empty tuple, so ``filter(None, ...)`` drops exactly the Nones
            self._views = tuple(filter(None, map(_SourceTally.current, self._sorted)))
        return self._views


def partition_views_after(state: PartitionState, records: Iterable[ClaimRecord]) -> tuple[PartitionView, ...]:
    """Drift seed, Scope (stores partitioned by provenance) and What Was Observed (a partition's value by
    internal agreement), with Decision Boundary rule 4's counted records: ``partition_views`` of every
    record added to ``state`` so far, ``records`` added first. Each record updates its own source's
    tally only (a later active record silences the source's earlier stale ones, as in
    ``counted_records``); raises ValueError on a record out of ``(epoch, fact_id)`` order in its source,
    leaving ``state`` unusable."""
    for r in records:
        state.add(r)
    return state.views()
