"""``crp-stream rebuild`` on the embedded log: drop the projections and replay the log's input topics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import inspect

from crp_stream.config import Settings
from crp_stream.fabric.sql import db
from crp_stream.processors import all_handlers
from crp_stream.runtime.embedded import open_fabric
from crp_stream.runtime.embedded.log import EmbeddedLog
from crp_stream.runtime.embedded.runtime import EmbeddedRuntime, system_clock
from crp_stream.runtime.rebuild import RebuildResult, drop_projections, restore_audit, saved_rows, snapshot, verified


def rebuild(settings: Settings, verify: bool, progress: Callable[[int, int], None] | None = None) -> RebuildResult:
    """Drop and re-derive the projections; with ``verify``, compare them with the dropped ones.
    ``progress(done, total)`` follows the replay (``EmbeddedRuntime.drain``)."""
    log_ = EmbeddedLog(settings.log_path, system_clock)
    engine = db.make_engine(settings.database)
    before: dict[str, Any] = {}
    if verify and "facts" in inspect(engine).get_table_names():
        before = snapshot(engine, settings)
    meta_rows, audit_rows = saved_rows(engine)
    ends_before = log_.end_offsets()
    drop_projections(engine, meta_rows, settings)
    fabric = open_fabric(settings, engine=engine, migrate=False)
    try:
        fabric.vectors.delete_all()
        rt = EmbeddedRuntime(fabric, log_, all_handlers(), rederive=True)
        rt.journal.clear()
        n = rt.drain(progress)
        rt.finish_rederive()
        restored = restore_audit(fabric, audit_rows)
        fabric.vectors.flush()
        rt.journal.close()
    finally:
        fabric.close()
    grown = {
        tp: end - ends_before.get(tp, 0) for tp, end in log_.end_offsets().items() if end != ends_before.get(tp, 0)
    }
    log_.close()
    return verified(RebuildResult(sum(rt.stats.processed.values()), n, grown, restored), before, settings)
