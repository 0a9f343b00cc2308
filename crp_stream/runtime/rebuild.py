"""What both runtimes' rebuilds share: keep what the log cannot re-derive, drop, compare (docs/reliability.md)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import inspect, select

from crp_stream.config import Settings
from crp_stream.fabric.fabric import DIM_KEY, MODEL_KEY, THRESHOLDS_PREFIX, open_vector_index
from crp_stream.fabric.models import BASE_MODEL_KEY, SPEC_PREFIX, collection_spec
from crp_stream.fabric.sql import db
from crp_stream.fabric.sql import tables as t
from crp_stream.runtime import projections

log = logging.getLogger("crp_stream.rebuild")


@dataclass
class RebuildResult:
    consumed: int
    handled: int
    grown: dict[str, int]  # topics whose log grew: records the old run never derived
    restored: int  # audit rows re-appended from the old audit log
    differences: list[str] = field(default_factory=list)
    digest: str | None = None  # of the rebuilt projections, when verified


def verified(
    result: RebuildResult,
    before: dict[str, Any],
    settings: Settings,
    take: Callable[[Any, Settings], dict[str, Any]] | None = None,
) -> RebuildResult:
    """With a snapshot taken before the drop, compare the rebuilt projections with it (``--verify``);
    ``take`` is the runtime's snapshot (default: the embedded one)."""
    if before:
        engine = db.make_engine(settings.database)
        try:
            after = (take or snapshot)(engine, settings)
        finally:
            engine.dispose()
        result.differences = projections.differences(before, after)
        result.digest = projections.digest(after)
    return result


def saved_rows(engine: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What the topics cannot re-derive: the model (and the specs of the models a reembed switched
    between) and thresholds in ``meta``; and the audit log, so
    that no row is lost (``restore_audit``)."""
    if "facts" not in inspect(engine).get_table_names():
        return [], []
    with engine.connect() as conn:
        meta_rows = [
            dict(r._mapping)
            for r in conn.execute(select(t.meta))
            if r.key in (MODEL_KEY, DIM_KEY, BASE_MODEL_KEY) or r.key.startswith((THRESHOLDS_PREFIX, SPEC_PREFIX))
        ]
        audit_rows = [dict(r._mapping) for r in conn.execute(select(t.audit_log).order_by(t.audit_log.c.seq))]
    return meta_rows, audit_rows


def drop_projections(engine: Any, meta_rows: list[dict[str, Any]], settings: Settings) -> None:
    """Every table dropped and created again (consumer offsets included), the kept ``meta`` rows and
    the sealing keys back."""
    log.info(
        "rebuild: dropping the projections (database %s, vectors %s)", engine.url.render_as_string(), settings.vectors
    )
    # the keys of sealed records are no projection: the log cannot derive them, and without them
    # every sealed record would read as forgotten
    with engine.connect() as conn:
        names = inspect(engine).get_table_names()
        keys = [dict(r._mapping) for r in conn.execute(select(t.sealing_keys))] if "sealing_keys" in names else []
    db.downgrade(engine)
    db.upgrade(engine)
    with engine.begin() as conn:
        for row in meta_rows:
            conn.execute(t.meta.insert().values(**row))
        if keys:
            conn.execute(t.sealing_keys.insert(), keys)


def snapshot(engine: Any, settings: Settings) -> dict[str, Any]:
    snap: dict[str, Any] = projections.tables_snapshot(engine)
    vectors = open_vector_index(active_vectors(engine, settings))
    try:
        snap["vectors"] = projections.vectors_snapshot(vectors, [r["fact_id"] for r in snap["facts"]])
    finally:
        vectors.close()
    return snap


def active_vectors(engine: Any, settings: Settings) -> str:
    """The store of the active model's vectors (another than the configured one after a reembed)."""
    with engine.connect() as conn:
        meta = {
            r.key: r.value for r in conn.execute(select(t.meta).where(t.meta.c.key.in_([MODEL_KEY, BASE_MODEL_KEY])))
        }
    model = meta.get(MODEL_KEY)
    return settings.vectors if model is None else collection_spec(settings.vectors, model, meta.get(BASE_MODEL_KEY))


def restore_audit(fabric: Any, old_rows: list[dict[str, Any]]) -> int:
    """Append, in their old order, the audit rows the rebuild did not derive again."""
    restored = 0
    with fabric.unit_of_work() as uow:
        for row in old_rows:
            if not uow.repo.audit_exists(row["event_id"]):
                uow.repo.append_audit(
                    row["event_id"], row["audit_type"], row["at_us"], row["key"], json.loads(row["details"])
                )
                restored += 1
    return restored


__all__ = ["RebuildResult", "drop_projections", "restore_audit", "saved_rows", "snapshot", "verified"]
