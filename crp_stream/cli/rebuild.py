"""``crp-stream rebuild --yes [--verify] [--broker]``: drop the projections and re-derive them from the log.

The topics are the source of truth; this only checks and prints. What is kept, dropped and replayed,
and why: docs/reliability.md ("Rebuild").
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from crp_stream.cli.base import CliError, add_broker, add_common, settings_of

log = logging.getLogger("crp_stream.rebuild")


def register(sub: Any) -> None:
    rb = sub.add_parser("rebuild", help="drop the projections (database, vector index) and rebuild them from the log")
    add_common(rb)
    add_broker(rb, "rebuild from the Kafka topics")
    rb.add_argument("--yes", action="store_true", help="confirm: the projections are dropped first")
    rb.add_argument(
        "--verify",
        action="store_true",
        help="compare the rebuilt projections with the ones dropped; exit 1 if they differ",
    )
    rb.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    settings = settings_of(ns)
    from crp_stream.runtime.embedded.rebuild import rebuild

    if not ns.yes:
        raise CliError(
            "rebuild drops the database tables and the vector index before replaying the log; pass --yes to confirm"
        )
    if settings.broker:
        from crp_stream.runtime.kafka.rebuild import rebuild_kafka

        r = rebuild_kafka(settings, ns.verify)
    elif not settings.log_path.exists():
        raise CliError(f"rebuild: no log at {settings.log_path}")
    else:
        from crp_stream.cli import progress

        with progress.bar("rebuilding from the log") as bar:
            r = rebuild(settings, ns.verify, progress.position(bar))
    print(
        f"rebuilt the projections from {r.consumed} consumed records ({r.handled} handled); "
        f"{'records produced' if settings.broker else 'log records added'}: {sum(r.grown.values())}",
        file=sys.stderr,
    )
    if r.grown:
        log.warning(
            "the rebuild derived records the log did not have (the code changed?): %s",
            json.dumps(r.grown, sort_keys=True),
        )
    if r.restored:
        log.warning("%d audit rows were not derived again and were re-appended from the old audit log", r.restored)
    if r.differences:
        print("rebuilt projections differ from the dropped ones:\n" + "\n".join(r.differences[:40]), file=sys.stderr)
        return 1
    if r.digest is not None:
        print(f"verified: rebuilt projections equal the dropped ones ({r.digest[:16]})", file=sys.stderr)
    return 0


__all__ = ["register", "run"]
