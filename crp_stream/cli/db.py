"""``crp-stream db upgrade|downgrade``: the fabric's migrations (Alembic)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from crp_stream.cli.base import Parser, add_common, settings_of
from crp_stream.fabric.sql import db


def register(sub: Any) -> None:
    p = sub.add_parser("db", help="database migrations")
    add_common(p)
    dbsub = p.add_subparsers(dest="db_cmd", required=True, parser_class=Parser)
    dbsub.add_parser("upgrade", help="apply the migrations (alembic upgrade head)")
    dbsub.add_parser("downgrade", help="revert every migration (alembic downgrade base)")
    p.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    engine = db.make_engine(settings_of(ns).database)
    if ns.db_cmd == "upgrade":
        db.upgrade(engine)
        print("database is at the latest revision", file=sys.stderr)
    else:
        db.downgrade(engine)
        print("database is at base (no tables)", file=sys.stderr)
    return 0
