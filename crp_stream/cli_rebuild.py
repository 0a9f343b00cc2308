"""``crp-stream rebuild``: drop the projections and rebuild them from the log (docs/reliability.md).

The topics are the source of truth; the database and the vector index are projections. A rebuild:

1. keeps what the log cannot re-derive: from ``meta``, the fabric's model id and dimension and the
   thresholds ``calibrate --store`` saved (derived counters such as ``graph_generation`` are rebuilt),
   and a copy of the audit log, to check it afterwards;
2. drops the projections: ``alembic downgrade base`` + ``upgrade head`` (the consumer offsets live in
   the database, so they are reset too), ``delete_all`` on the vector index, the vector journal;
3. replays the log's INPUT topics from offset 0 through every handler (``EmbeddedRuntime(rederive=True)``).
   What an input causes is derived again, with the same derived ids; an output already in the log is
   not appended twice (the log ignores a known id) but is consumed by the handlers of internal topics
   (``crp.facts`` -> arbiter) at the moment it is re-caused, exactly as in the live run. Internal topics
   are never re-read from the old log: with the same code every old record is re-caused anyway; with
   changed code an old derivation must not be applied next to the new one;
4. marks internal topics consumed to their end and re-appends any old audit row that was not derived
   again (the audit log never loses a row; a warning names how many, which means the code changed).

The log only grows: with changed code, the new derivations are appended after the old ones.
Run it with every worker stopped. An interrupted rebuild is simply run again.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

log = logging.getLogger("crp_stream.rebuild")


def add_command(sub: Any, common: Any) -> None:
    rb = sub.add_parser("rebuild", help="drop the projections (database, vector index) and rebuild them from the log")
    common(rb)
    rb.add_argument("--yes", action="store_true", help="confirm: the projections are dropped first")
    rb.add_argument("--verify", action="store_true",
                    help="compare the rebuilt projections with the ones dropped; exit 1 if they differ")


def run(ns: argparse.Namespace, settings: Any) -> int:
    from sqlalchemy import inspect, select

    from crp_stream.cli import CliError
    from crp_stream.fabric import db
    from crp_stream.fabric import tables as t
    from crp_stream.fabric.fabric import DIM_KEY, MODEL_KEY, THRESHOLDS_PREFIX, Fabric, open_vector_index
    from crp_stream.processors import all_handlers
    from crp_stream.runtime import projections
    from crp_stream.runtime.embedded import EmbeddedRuntime, system_clock
    from crp_stream.runtime.log import EmbeddedLog

    if not ns.yes:
        raise CliError("rebuild drops the database tables and the vector index before replaying the log; "
                       "pass --yes to confirm")
    if settings.broker:
        raise CliError("rebuild: only the embedded log is supported here (the Kafka runtime rebuilds by "
                       "resetting its consumer group)")
    if not settings.log_path.exists():
        raise CliError(f"rebuild: no log at {settings.log_path}")
    log_ = EmbeddedLog(settings.log_path, system_clock)
    engine = db.make_engine(settings.database)
    before: dict[str, Any] = {}
    meta_rows: list[dict[str, Any]] = []
    audit_rows: list[dict[str, Any]] = []
    if "facts" in inspect(engine).get_table_names():
        if ns.verify:
            before = _snapshot(engine, settings, open_vector_index, projections)
        with engine.connect() as conn:
            meta_rows = [dict(r._mapping) for r in conn.execute(select(t.meta))
                         if r.key in (MODEL_KEY, DIM_KEY) or r.key.startswith(THRESHOLDS_PREFIX)]
            audit_rows = [dict(r._mapping) for r in conn.execute(select(t.audit_log).order_by(t.audit_log.c.seq))]
    ends_before = log_.end_offsets()
    log.info("rebuild: dropping the projections (database %s, vectors %s)", engine.url.render_as_string(),
             settings.vectors)
    db.downgrade(engine)
    db.upgrade(engine)
    with engine.begin() as conn:
        for row in meta_rows:
            conn.execute(t.meta.insert().values(**row))
    fabric = Fabric(settings, engine=engine, migrate=False)
    try:
        fabric.vectors.delete_all()
        rt = EmbeddedRuntime(fabric, log_, all_handlers(), rederive=True)
        rt.journal.clear()
        n = rt.run_until_idle()
        rt.finish_rederive()
        restored = _restore_audit(fabric, audit_rows)
        fabric.vectors.flush()
        rt.journal.close()
    finally:
        fabric.close()
    grown = {tp: end - ends_before.get(tp, 0) for tp, end in log_.end_offsets().items()
             if end != ends_before.get(tp, 0)}
    log_.close()
    print(f"rebuilt the projections from {sum(rt.stats.processed.values())} consumed records ({n} handled); "
          f"log records added: {sum(grown.values())}", file=sys.stderr)
    if grown:
        log.warning("the rebuild derived records the log did not have (the code changed?): %s",
                    json.dumps(grown, sort_keys=True))
    if restored:
        log.warning("%d audit rows were not derived again and were re-appended from the old audit log", restored)
    if ns.verify and before:
        engine = db.make_engine(settings.database)
        try:
            after = _snapshot(engine, settings, open_vector_index, projections)
        finally:
            engine.dispose()
        diffs = projections.differences(before, after)
        if diffs:
            print("rebuilt projections differ from the dropped ones:\n" + "\n".join(diffs[:40]), file=sys.stderr)
            return 1
        print(f"verified: rebuilt projections equal the dropped ones ({projections.digest(after)[:16]})",
              file=sys.stderr)
    return 0


def _snapshot(engine: Any, settings: Any, open_vector_index: Any, projections: Any) -> dict[str, Any]:
    snap: dict[str, Any] = projections.tables_snapshot(engine)
    vectors = open_vector_index(settings.vectors)
    try:
        snap["vectors"] = projections.vectors_snapshot(vectors, [r["fact_id"] for r in snap["facts"]])
    finally:
        vectors.close()
    return snap


def _restore_audit(fabric: Any, old_rows: list[dict[str, Any]]) -> int:
    """Append, in their old order, the audit rows the rebuild did not derive again."""
    restored = 0
    with fabric.unit_of_work() as uow:
        for row in old_rows:
            if not uow.repo.audit_exists(row["event_id"]):
                uow.repo.append_audit(row["event_id"], row["audit_type"], row["at_us"], row["key"],
                                      json.loads(row["details"]))
                restored += 1
    return restored


__all__ = ["add_command", "run"]
