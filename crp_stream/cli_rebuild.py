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

With ``--broker`` (or ``CRP_BROKER``) the topics are Kafka's: ``runtime/rebuild_kafka.py`` replays every
partition from offset 0 in the order the broker appended the records, and refuses while a worker is
in its consumer group.
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
    rb.add_argument("--broker", help="kafka://HOST:PORT: rebuild from the Kafka topics (env CRP_BROKER)")
    rb.add_argument("--yes", action="store_true", help="confirm: the projections are dropped first")
    rb.add_argument("--verify", action="store_true",
                    help="compare the rebuilt projections with the ones dropped; exit 1 if they differ")


def run(ns: argparse.Namespace, settings: Any) -> int:
    from crp_stream.cli import CliError
    from crp_stream.runtime.rebuild import rebuild

    if not ns.yes:
        raise CliError("rebuild drops the database tables and the vector index before replaying the log; "
                       "pass --yes to confirm")
    if settings.broker:
        from crp_stream.runtime.rebuild_kafka import rebuild_kafka

        r = rebuild_kafka(settings, ns.verify)
    elif not settings.log_path.exists():
        raise CliError(f"rebuild: no log at {settings.log_path}")
    else:
        r = rebuild(settings, ns.verify)
    print(f"rebuilt the projections from {r.consumed} consumed records ({r.handled} handled); "
          f"{'records produced' if settings.broker else 'log records added'}: {sum(r.grown.values())}",
          file=sys.stderr)
    if r.grown:
        log.warning("the rebuild derived records the log did not have (the code changed?): %s",
                    json.dumps(r.grown, sort_keys=True))
    if r.restored:
        log.warning("%d audit rows were not derived again and were re-appended from the old audit log", r.restored)
    if r.differences:
        print("rebuilt projections differ from the dropped ones:\n" + "\n".join(r.differences[:40]), file=sys.stderr)
        return 1
    if r.digest is not None:
        print(f"verified: rebuilt projections equal the dropped ones ({r.digest[:16]})", file=sys.stderr)
    return 0


__all__ = ["add_command", "run"]
