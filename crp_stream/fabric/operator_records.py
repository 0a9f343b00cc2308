"""The operator workflow's records (refresh requests, quarantine candidates) and the arbiter's claims:
part of ``Repository``, kept apart so each file stays one noun."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table, select, update

from crp_stream.fabric import tables as t
from crp_stream.fabric.rows import CandidateRow, ClaimRow, RefreshRow


def canonical_json(obj: Any) -> str:
    """Stable JSON text for a stored document: both databases keep the same bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def decoded(mapping: Any, field: str = "payload") -> Any:
    """A row with its JSON column ``field`` decoded (the caller names the row's type)."""
    row = dict(mapping)
    row[field] = json.loads(row[field])
    return row


_CLAIM_COLUMNS = tuple(t.claims.c.keys())


class OperatorRecords:
    """Mixed into ``Repository``: the same connection, the same transaction."""

    conn: Connection

    def _select_where(self, columns: Sequence[str], table: str, equal: Sequence[tuple[str, Any]]) -> list[Any]:
        raise NotImplementedError  # Repository's

    def _execute(self, sql: str, params: Sequence[Any]) -> int:
        raise NotImplementedError  # Repository's

    # refresh requests and quarantine candidates ------------------------------------------------
    def _put_once(self, tbl: Table, key: str, key_value: str, **values: Any) -> bool:
        """Insert a row keyed by ``key``; False (and nothing written) if the key is already there."""
        if self.conn.execute(select(tbl.c[key]).where(tbl.c[key] == key_value)).first():
            return False
        self.conn.execute(tbl.insert().values({key: key_value, **values}))
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
        tbl = t.refresh_requests
        q = select(tbl).where(tbl.c.claim_key == claim_key).order_by(tbl.c.created_at_us, tbl.c.request_id)
        if status:
            q = q.where(tbl.c.status == status)
        return [decoded(r._mapping) for r in self.conn.execute(q)]

    def candidate(self, candidate_id: str) -> CandidateRow | None:
        tbl = t.quarantine_candidates
        r = self.conn.execute(select(tbl).where(tbl.c.candidate_id == candidate_id)).first()
        return decoded(r._mapping) if r else None

    def candidates_for_claim(self, claim_key: str) -> list[CandidateRow]:
        tbl = t.quarantine_candidates
        q = select(tbl).where(tbl.c.claim_key == claim_key).order_by(tbl.c.created_at_us, tbl.c.candidate_id)
        return [decoded(r._mapping) for r in self.conn.execute(q)]

    # claims (arbiter state) -------------------------------------------------------------------
    def get_claim(self, claim_key: str) -> ClaimRow | None:
        # on the driver: the arbiter reads and writes its claim on every evaluation
        found = self._select_where(_CLAIM_COLUMNS, "claims", (("claim_key", claim_key),))
        return decoded(zip(_CLAIM_COLUMNS, found[0], strict=True), "details") if found else None

    def put_claim(self, claim_key: str, verdict: str, fingerprint: str, details: dict[str, Any], at_us: int) -> None:
        values = {
            "verdict": verdict,
            "fingerprint": fingerprint,
            "details": canonical_json(details),
            "updated_at_us": at_us,
        }
        sets = ", ".join(f"{k} = ?" for k in values)
        if self._execute(f"UPDATE claims SET {sets} WHERE claim_key = ?", [*values.values(), claim_key]) == 0:
            self._execute(
                f"INSERT INTO claims (claim_key, {', '.join(values)}) VALUES (?{', ?' * len(values)})",
                [claim_key, *values.values()],
            )
