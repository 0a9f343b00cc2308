"""``crp-stream replay IN --out OUT``: the pipeline on fresh embedded backends, every output written."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from crp_stream.cli import progress
from crp_stream.cli.base import add_common, settings_of
from crp_stream.replay_format import read_replay
from crp_stream.testing import replay


def register(sub: Any) -> None:
    rp = sub.add_parser("replay", help="run the pipeline on a replay JSONL file, write every output record")
    add_common(rp)
    rp.add_argument("input")
    rp.add_argument("--out", required=True)
    rp.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    settings = settings_of(ns)
    records = read_replay(Path(ns.input))
    with tempfile.TemporaryDirectory(prefix="crp-replay-") as tmp, progress.bar("replaying", total=len(records)) as bar:
        lines = replay(records, settings, Path(tmp), progress.counter(bar))
    out = Path(ns.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    print(f"replayed {len(records)} input records, wrote {len(lines)} output records to {ns.out}", file=sys.stderr)
    return 0
