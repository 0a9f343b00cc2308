"""A comparable picture of the projections: every fabric table, the vector index, the log's outputs.

Used by ``crp-stream rebuild --verify`` and by the crash and replay equivalence tests: two runs of
the same input log must give equal snapshots. Values that legitimately differ between two correct
runs are left out: the audit log's ``seq`` (a PostgreSQL sequence skips the numbers of rolled-back
inserts; rows are still compared in ``seq`` order), and the claim index's coherence counter
``claims_generation`` (it moves once per transaction, and a crash or a rebuild cuts transactions
differently; it projects nothing of the log).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import inspect, select

from crp_stream.fabric.caches.claim_index import CLAIMS_GENERATION
from crp_stream.fabric.sql import tables as t
from crp_stream.fabric.vectors.port import STATUSES

TABLE_ORDER: dict[str, tuple[str, ...]] = {
    "facts": ("fact_id",),
    "sources": ("source",),
    "edges": ("src", "dst", "kind"),
    "sessions": ("session_id",),
    "audit_log": ("seq",),
    "refresh_requests": ("request_id",),
    "quarantine_candidates": ("candidate_id",),
    "claims": ("claim_key",),
    "processed_events": ("consumer", "event_id"),
    "consumer_offsets": ("consumer", "topic", "partition"),
    "meta": ("key",),
}
DROPPED_COLUMNS = {"audit_log": ("seq",)}
DROPPED_META = (CLAIMS_GENERATION,)


def tables_snapshot(engine: Any, names: Iterable[str] = TABLE_ORDER) -> dict[str, list[dict[str, Any]]]:
    present = set(inspect(engine).get_table_names())
    out: dict[str, list[dict[str, Any]]] = {}
    with engine.connect() as conn:
        for name in names:
            if name not in present:
                out[name] = []
                continue
            table = t.metadata.tables[name]
            q = select(table).order_by(*(table.c[c] for c in TABLE_ORDER[name]))
            drop = DROPPED_COLUMNS.get(name, ())
            rows = [{k: v for k, v in r._mapping.items() if k not in drop} for r in conn.execute(q)]
            out[name] = [r for r in rows if name != "meta" or r["key"] not in DROPPED_META]
    return out


def vectors_snapshot(vectors: Any, fact_ids: Iterable[str]) -> dict[str, Any]:
    """Point count, and each point's status (by filtered searches: the port has no payload read)."""
    ids = sorted(set(fact_ids))
    count = int(vectors.count())
    dim = vectors.dim
    present = sorted(vectors.get_vectors(ids)) if ids else []
    status: dict[str, str] = {}
    if dim and count:
        probe = [1.0] + [0.0] * (dim - 1)
        for s in sorted(STATUSES):
            others = tuple(sorted(STATUSES - {s}))
            for fid, _score in vectors.search(probe, count, 0.0, others):
                status[fid] = s
    return {"count": count, "present": present, "status": dict(sorted(status.items()))}


def outputs_snapshot(log_: Any, topics: Iterable[str]) -> dict[str, list[tuple[str | None, str | None, str]]]:
    """Each topic's records in offset order: (record id, key, value text)."""
    out: dict[str, list[tuple[str | None, str | None, str]]] = {}
    for topic in topics:
        out[topic] = [(r.record_id, r.key, r.value.decode("utf-8", "replace")) for r in log_.iter_topic(topic)]
    return out


def digest(snapshot: Any) -> str:
    return hashlib.sha256(json.dumps(snapshot, sort_keys=True, default=str).encode()).hexdigest()


def differences(a: dict[str, Any], b: dict[str, Any], limit: int = 5) -> list[str]:
    """Human-readable differences between two snapshots (by part, then by row)."""
    out: list[str] = []
    for part in sorted(set(a) | set(b)):
        x, y = a.get(part), b.get(part)
        if x == y:
            continue
        if isinstance(x, list) and isinstance(y, list):
            out.append(f"{part}: {len(x)} vs {len(y)} rows")
            shown = 0
            for i, (rx, ry) in enumerate(zip(x, y, strict=False)):
                if rx != ry and shown < limit:
                    out.append(f"  row {i}: {str(rx)[:300]}\n       vs {str(ry)[:300]}")
                    shown += 1
        elif isinstance(x, dict) and isinstance(y, dict):
            out.extend(f"{part}.{d}" for d in differences(x, y, limit))
        else:
            out.append(f"{part}: {str(x)[:300]} vs {str(y)[:300]}")
    return out


__all__ = ["TABLE_ORDER", "differences", "digest", "outputs_snapshot", "tables_snapshot", "vectors_snapshot"]
