"""The operator workflow's records (refresh requests, quarantine candidates) and the arbiter's claims:
part of ``Repository``, kept apart so each file stays one noun."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Table, func, select, update

from crp_stream.core.tenants import DEFAULT_TENANT
from crp_stream.fabric.caches.claim_index import CLAIMS_GENERATION
from crp_stream.fabric.sql import tables as t
from crp_stream.fabric.sql.driver import DriverSQL
from crp_stream.fabric.sql.rows import CandidateRow, ClaimRow, FactRow, RefreshRow

if TYPE_CHECKING:
    from crp_stream.fabric.caches.claim_index import ClaimTxn


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(obj: Any) -> str:
    """Stable JSON text for a stored document: both databases keep the same bytes."""
    return _CANONICAL.encode(obj)


def decoded(mapping: Any, field: str = "payload") -> Any:
    """A row with its JSON column ``field`` decoded (the caller names the row's type)."""
    row = dict(mapping)
    row[field] = json.loads(row[field])
    return row


_CLAIM_COLUMNS = t.column_names(t.claims)
_REFRESH_COLUMNS = t.column_names(t.refresh_requests)
_TEXT, _AT = _CLAIM_COLUMNS.index("details"), _CLAIM_COLUMNS.index("updated_at_us")  # a buffered row's parts


class OperatorRecords(DriverSQL):
    """Mixed into ``Repository``: the same connection, the same transaction."""

    conn: Connection
    _rows: dict[str, FactRow]  # ``Repository``'s fact rows of this transaction
    _titles: dict[str, str | None]  # and the titles of facts read (``fact_titles``)
    _graph_synced: bool

    def _rows_changed(self, fact_ids: Iterable[str], column: str, value: str) -> None:
        """A column written: the transaction's rows of those facts follow (replaced, never mutated)."""
        for f in fact_ids:
            row = self._rows.get(f)
            if row is not None:
                self._rows[f] = cast(FactRow, {**row, column: value})

    # refresh requests and quarantine candidates ------------------------------------------------
    def _put_once(self, tbl: Table, key: str, key_value: str, **values: Any) -> bool:
        """Insert a row keyed by ``key``; False (and nothing written) if the key is already there."""
        # on the driver: SQLAlchemy's statement building cost ~10x these two statements
        if self._select_where((key,), tbl.name, ((key, key_value),)):
            return False
        cols = [key, *values]
        sql = f"INSERT INTO {tbl.name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        self._execute(sql, [key_value, *values.values()])
        return True

    def put_refresh(self, request_id: str, claim_key: str, source: str, payload: dict[str, Any], at_us: int) -> bool:
        return self._put_once(
            t.refresh_requests,
            "request_id",
            request_id,
            claim_key=claim_key,
            source=source,
            status="open",
            payload=canonical_json(payload),
            created_at_us=at_us,
        )

    def refresh_requests(self, status: str | None = None) -> list[RefreshRow]:
        q = select(t.refresh_requests).order_by(t.refresh_requests.c.created_at_us, t.refresh_requests.c.request_id)
        if status:
            q = q.where(t.refresh_requests.c.status == status)
        return [decoded(r._mapping) for r in self.conn.execute(q)]

    def resolve_refresh(self, request_id: str, at_us: int, by: str, status: str = "resolved") -> bool:
        """Close an open request as ``resolved`` (or ``rejected`` by an operator); False if it was not open."""
        tbl = t.refresh_requests
        res = self.conn.execute(
            update(tbl)
            .where((tbl.c.request_id == request_id) & (tbl.c.status == "open"))
            .values(status=status, resolved_at_us=at_us, resolved_by=by)
        )
        return res.rowcount > 0

    def put_candidate(
        self, candidate_id: str, claim_key: str, source: str, payload: dict[str, Any], at_us: int
    ) -> bool:
        return self._put_once(
            t.quarantine_candidates,
            "candidate_id",
            candidate_id,
            claim_key=claim_key,
            source=source,
            status="pending",
            payload=canonical_json(payload),
            created_at_us=at_us,
        )

    def candidates(self, status: str | None = None) -> list[CandidateRow]:
        tbl = t.quarantine_candidates
        q = select(tbl).order_by(tbl.c.created_at_us, tbl.c.candidate_id)
        if status:
            q = q.where(tbl.c.status == status)
        return [decoded(r._mapping) for r in self.conn.execute(q)]

    def decide_candidate(self, candidate_id: str, status: str, at_us: int, by: str) -> None:
        tbl = t.quarantine_candidates
        self.conn.execute(
            update(tbl)
            .where(tbl.c.candidate_id == candidate_id)
            .values(status=status, decided_at_us=at_us, decided_by=by)
        )

    def refresh_request(self, request_id: str) -> RefreshRow | None:
        tbl = t.refresh_requests
        r = self.conn.execute(select(tbl).where(tbl.c.request_id == request_id)).first()
        return decoded(r._mapping) if r else None

    def refresh_requests_for_claim(self, claim_key: str, status: str | None = None) -> list[RefreshRow]:
        # on the driver: the arbiter reads a claim's open requests on every changed verdict
        equal = [("claim_key", claim_key), *([("status", status)] if status else [])]
        found = self._select_where(_REFRESH_COLUMNS, "refresh_requests", equal, ("created_at_us", "request_id"))
        return [decoded(zip(_REFRESH_COLUMNS, r, strict=True)) for r in found]

    def candidate(self, candidate_id: str) -> CandidateRow | None:
        tbl = t.quarantine_candidates
        r = self.conn.execute(select(tbl).where(tbl.c.candidate_id == candidate_id)).first()
        return decoded(r._mapping) if r else None

    def candidates_for_claim(self, claim_key: str) -> list[CandidateRow]:
        tbl = t.quarantine_candidates
        q = select(tbl).where(tbl.c.claim_key == claim_key).order_by(tbl.c.created_at_us, tbl.c.candidate_id)
        return [decoded(r._mapping) for r in self.conn.execute(q)]

    # claims (arbiter state) -------------------------------------------------------------------
    # Claim rows are buffered and written by ``flush`` in one statement (one statement per
    # table per batch); reads in the transaction see the buffer first.
    _claim_buffer: dict[str, tuple[Any, ...]]
    _claim_undo: list[tuple[str, tuple[Any, ...] | None]]  # (key, buffered before) for savepoints
    claims: ClaimTxn | None
    claims_base: int | None  # claims_generation before this transaction moved it; None: not moved
    _sessions: dict[str, tuple[Any, ...] | None]  # Repository's: session rows of this transaction
    _session_writes: dict[str, tuple[Any, ...]]

    def get_meta(self, key: str) -> str | None:
        raise NotImplementedError  # Repository's

    def increment_meta(self, key: str) -> int:
        raise NotImplementedError  # Repository's

    def _claims_written(self) -> None:
        """Every write of claim data (claim members, their statuses, claim rows) moves the counter
        ``claims_generation`` once per transaction, so another process's claim index sees it."""
        if self.claims_base is None:
            self.claims_base = self.increment_meta(CLAIMS_GENERATION) - 1

    def get_claim(self, claim_key: str) -> ClaimRow | None:
        buffered = self._claim_buffer.get(claim_key)
        if buffered is not None and buffered[_TEXT] is not None:
            return cast(ClaimRow, decoded(zip(_CLAIM_COLUMNS, buffered, strict=True), "details"))
        # on the driver: read for every claim the arbiter's index does not hold
        found = self._select_where(_CLAIM_COLUMNS, "claims", (("claim_key", claim_key),))
        row = decoded(zip(_CLAIM_COLUMNS, found[0], strict=True), "details") if found else None
        if row is not None and buffered is not None:  # a touch of this transaction: its time
            row["updated_at_us"] = buffered[_AT]
        return cast(ClaimRow | None, row)

    def touch_claim(self, stored: ClaimRow, at_us: int) -> None:
        """The claim's verdict is unchanged and only its evaluation time moves (most records): no JSON
        is written or parsed again; the flush updates the one column."""
        key = stored["claim_key"]
        before = self._claim_buffer.get(key)
        self._claims_written()
        self._claim_undo.append((key, before))
        if before is not None and before[_TEXT] is not None:
            self._claim_buffer[key] = (*before[:_AT], at_us)
        else:
            self._claim_buffer[key] = (key, None, None, None, at_us)
        if self.claims is not None:
            self.claims.claim_written(cast(ClaimRow, {**stored, "updated_at_us": at_us}))

    def put_claim(self, claim_key: str, verdict: str, fingerprint: str, details: dict[str, Any], at_us: int) -> None:
        text = canonical_json(details)
        row = (claim_key, verdict, fingerprint, text, at_us)
        self._claims_written()
        self._claim_undo.append((claim_key, self._claim_buffer.get(claim_key)))
        self._claim_buffer[claim_key] = row
        if self.claims is not None:
            # its text parsed back, as a read of the store gives it (canonical_json's floats and lists):
            # the index holding the caller's own dict made the Kafka and embedded runtimes disagree
            self.claims.claim_written(decoded(zip(_CLAIM_COLUMNS, row, strict=True), "details"))

    def _flush_claims(self) -> None:
        if not self._claim_buffer:
            return
        cols = ", ".join(_CLAIM_COLUMNS)
        sets = ", ".join(f"{c} = excluded.{c}" for c in _CLAIM_COLUMNS if c != "claim_key")
        sql = f"INSERT INTO claims ({cols}) VALUES ({', '.join('?' * len(_CLAIM_COLUMNS))}) "
        rows = list(self._claim_buffer.values())
        self._executemany(
            sql + f"ON CONFLICT (claim_key) DO UPDATE SET {sets}", [r for r in rows if r[_TEXT] is not None]
        )
        touched = [(r[_AT], r[0]) for r in rows if r[_TEXT] is None]
        self._executemany("UPDATE claims SET updated_at_us = ? WHERE claim_key = ?", touched)
        self._claim_buffer.clear()
        self._claim_undo.clear()

    def _undo_claims(self, mark: int) -> None:
        """A savepoint was rolled back: the claim rows buffered since ``mark`` are forgotten."""
        while len(self._claim_undo) > mark:
            key, before = self._claim_undo.pop()
            if before is None:
                self._claim_buffer.pop(key, None)
            else:
                self._claim_buffer[key] = before

    def claimed_facts(self, limit: int) -> list[FactRow]:
        """Facts that belong to a claim, in claim order, at most ``limit`` (the claim index's start)."""
        cols = t.column_names(t.facts)
        sql = f"SELECT {', '.join(cols)} FROM facts WHERE claim_key IS NOT NULL ORDER BY claim_key LIMIT {int(limit)}"
        found = self.conn.exec_driver_sql(sql).fetchall()
        return [cast(FactRow, dict(zip(cols, r, strict=True))) for r in found]

    def claim_rows(self, keys: Sequence[str]) -> dict[str, ClaimRow]:
        out: dict[str, ClaimRow] = {}
        for i in range(0, len(keys), 500):
            q = select(t.claims).where(t.claims.c.claim_key.in_(list(keys[i : i + 500])))
            out.update({r.claim_key: decoded(r._mapping, "details") for r in self.conn.execute(q)})
        return out

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction; rolled back, so are this repository's buffers and the claim index."""
        base, undo = self.claims_base, len(self._claim_undo)
        sessions, session_writes = dict(self._sessions), dict(self._session_writes)
        mark = self.claims.mark() if self.claims is not None else 0
        try:
            with self.conn.begin_nested():
                yield
        except BaseException:
            self._rows.clear()  # it may hold rows the savepoint wrote
            self._titles.clear()  # and titles of documents it wrote
            self._graph_synced = False  # and the graph cache edges it wrote
            self._sessions, self._session_writes = sessions, session_writes  # its buffered session rows
            self.claims_base = base
            self._undo_claims(undo)
            if self.claims is not None:
                self.claims.rollback_to(mark)
            raise

    def set_claim_key(self, fact_ids: Sequence[str], claim_key: str) -> None:
        """The arbiter groups facts without subject/attribute into a claim by similarity."""
        if fact_ids:
            self.conn.execute(update(t.facts).where(t.facts.c.fact_id.in_(list(fact_ids))).values(claim_key=claim_key))
            self._rows_changed(fact_ids, "claim_key", claim_key)
            self._claims_written()
            if self.claims is not None:
                self.claims.claim_key_set(fact_ids, claim_key)


class TenantRecords:
    """Which tenant owns what the console shows: claims by their facts (claims never cross tenants),
    sessions by their state. Console reads only; not a hot path."""

    conn: Connection

    def tenant_owners(self) -> dict[str, str]:
        f = t.facts.c
        q = select(f.claim_key, f.tenant).where(f.claim_key.is_not(None)).distinct()
        out = {str(k): str(tenant) for k, tenant in self.conn.execute(q)}
        for sid, state in self.conn.execute(select(t.sessions.c.session_id, t.sessions.c.state)):
            out[str(sid)] = str(json.loads(state).get("tenant", DEFAULT_TENANT))
        return out

    def fact_counts_of(self, tenant: str | None) -> list[tuple[str, str, int]]:
        """(source, status, facts) of one tenant (every tenant: None)."""
        f = t.facts.c
        q = select(f.source, f.status, func.count()).group_by(f.source, f.status).order_by(f.source, f.status)
        if tenant is not None:
            q = q.where(f.tenant == tenant)
        return [(str(s), str(st), int(n)) for s, st, n in self.conn.execute(q)]

    def source_trust_of(self, tenant: str) -> dict[str, float]:
        """The trust a tenant's facts of each source carry (the source row's trust is the last
        tenant's to write it)."""
        f = t.facts.c
        q = select(f.source, func.max(f.trust)).where(f.tenant == tenant).group_by(f.source)
        return {str(s): float(tr) for s, tr in self.conn.execute(q)}

    def claim_tenant(self, claim_key: str) -> str | None:
        """The tenant of a claim (of its facts), None when no fact of it is left."""
        f = t.facts.c
        row = self.conn.execute(select(f.tenant).where(f.claim_key == claim_key).limit(1)).first()
        return None if row is None else str(row[0])

    def tenants(self) -> list[str]:
        return [str(x) for (x,) in self.conn.execute(select(t.facts.c.tenant).distinct().order_by(t.facts.c.tenant))]
