"""A claim's records and partition views as the arbiter reads them from its rows.

``claim_records`` turns fabric rows into ``core.drift`` records; ``known_views`` keeps a structured
claim's partition views in the claim index's memo and moves them forward by the rows added since the
last evaluation (``core.agreement``), instead of recomputing them over every record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crp_stream.core import memo as text_memos
from crp_stream.core.agreement import PartitionState
from crp_stream.core.claim_values import normalise_value
from crp_stream.core.drift import COUNTED_STATUSES, ClaimRecord, PartitionView
from crp_stream.fabric.sql.rows import FactRow
from crp_stream.processors import text_claims

_new = tuple.__new__


@text_memos.text_memo(0.2)
def _normalised(value: str, unit: str | None) -> str:
    """``normalise_value``, memoised: a claim's records repeat a few values ("250", "1000 rps")."""
    return normalise_value(value, unit)


def _record(r: FactRow, old: ClaimRecord | None, memo: dict[str, Any]) -> ClaimRecord:
    """A structured fact's record, kept in ``memo``: a status change keeps the normalised value."""
    value = old.value if old is not None else _normalised(str(r["value"]), r["unit"])
    # the fields in order, by ``tuple.__new__`` (the NamedTuple's ``__new__`` is a Python function)
    rec: ClaimRecord = _new(
        ClaimRecord, (r["fact_id"], r["source"], float(r["trust"]), r["epoch_us"] / 1e6, value, r["status"])
    )
    memo[r["fact_id"]] = rec
    return rec


def claim_records(rows: Sequence[FactRow], text_claim: bool, memo: dict[str, Any] | None = None) -> list[ClaimRecord]:
    """Fabric rows -> drift records: the epoch is the log-append time, the value normalised.

    ``memo`` (the claim index's, per claim) keeps each structured fact's record: all of it but the
    status derives from the fact's fixed columns."""
    if text_claim:
        values = text_claims.text_values(rows)
        return [
            ClaimRecord(
                r["fact_id"], r["source"], float(r["trust"]), r["epoch_us"] / 1e6, values[r["fact_id"]], r["status"]
            )
            for r in rows
        ]
    memo = {} if memo is None else memo
    out = []
    for r in rows:
        if r["value"] is None:
            continue  # a subject/attribute without a value asserts nothing to arbitrate
        rec = memo.get(r["fact_id"])
        if rec is None or rec.status != r["status"]:
            rec = _record(r, rec, memo)
        out.append(rec)
    return out


# the memo's entry for a claim's PartitionState: not a fact id (those never hold a NUL)
_STATE = "\x00partitions"


def known_views(
    rows: Sequence[FactRow], memo: dict[str, Any], as_of: int
) -> tuple[list[FactRow], list[ClaimRecord], tuple[PartitionView, ...]] | None:
    """A structured claim's rows known at ``as_of`` (``known_at``), their records and their
    partition views, with the views kept in the claim's memo (``core.agreement``) and moved forward
    by the rows added since: O(new rows) instead of all ~50. Rows are in ``(epoch_us, fact_id)`` order,
    so the known ones are a prefix. The state is reused only when the rows it consumed are still the
    prefix (equal rows: a status change or a rolled-back insert fails it); None: rows out of order.
    The rows and records returned are the memo's lists: read them, never change them."""
    n = len(rows)
    while n and rows[n - 1]["epoch_us"] > as_of:
        n -= 1
    state: _Known | None = memo.get(_STATE)
    if (
        state is None
        or len(state.rows) > n
        or (state.rows != rows[: len(state.rows)] and not _restated(state, rows, memo))
    ):
        state = memo[_STATE] = _Known()
    done = len(state.rows)
    prev = (state.rows[-1]["epoch_us"], state.rows[-1]["fact_id"]) if done else None
    fresh = rows[done:n]
    try:
        for r in fresh:
            order = (r["epoch_us"], r["fact_id"])
            if prev is not None and order <= prev:
                raise ValueError("rows out of order")
            prev = order
            state.rows.append(r)
            if r["value"] is not None:  # a subject/attribute without a value asserts nothing
                rec = memo.get(r["fact_id"])
                if rec is None or rec.status != r["status"]:
                    rec = _record(r, rec, memo)
                state.partitions.add(rec)
    except ValueError:
        del memo[_STATE]
        return None
    return state.rows, state.partitions.records, state.partitions.views()


def _restated(state: _Known, rows: Sequence[FactRow], memo: dict[str, Any]) -> bool:
    """The rows ``state`` consumed came back with some replaced (the arbiter changed statuses): their
    records are replaced and only their sources tallied again (``PartitionState.restate``), instead of
    every record from the start. False: another change (a row inserted before them, another epoch or
    source, a value given or taken): the caller starts over."""
    records = state.partitions.records
    out: list[ClaimRecord] = []
    i = 0
    for old, new in zip(state.rows, rows[: len(state.rows)], strict=True):
        if old is not new and (
            old["fact_id"] != new["fact_id"]
            or old["source"] != new["source"]
            or old["epoch_us"] != new["epoch_us"]
            or (old["value"] is None) != (new["value"] is None)
        ):
            return False
        if new["value"] is None:
            continue
        rec = records[i]
        i += 1
        if old is not new:  # as ``known_views`` reads a row: the memo's record, its status refreshed
            rec = memo.get(new["fact_id"])  # type: ignore[assignment]
            if rec is None or rec.status != new["status"]:
                rec = _record(new, rec, memo)
        out.append(rec)
    try:
        state.partitions.restate(out)
    except ValueError:
        return False
    state.rows = list(rows[: len(state.rows)])
    return True


class _Known:
    """The rows a claim's ``PartitionState`` has consumed, in order."""

    __slots__ = ("partitions", "rows")

    def __init__(self) -> None:
        self.rows: list[FactRow] = []
        self.partitions = PartitionState()


def current_records(records: Sequence[ClaimRecord], window_s: float | None) -> list[ClaimRecord]:
    """Optional agreement window: a partition agrees over its records no older than ``window_s``
    before its own newest counted record, so a continuous source's pre-change history does not
    outvote what it observes now. ``None`` keeps every record (the default)."""
    if window_s is None:
        return list(records)
    newest: dict[str, float] = {}
    for r in records:
        if r.status in COUNTED_STATUSES and r.epoch > newest.get(r.source, float("-inf")):
            newest[r.source] = r.epoch
    return [r for r in records if r.source not in newest or r.epoch >= newest[r.source] - window_s]


__all__ = ["claim_records", "current_records", "known_views"]
