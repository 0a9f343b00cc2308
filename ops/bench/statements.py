"""Statements per fact: what ingest (with the arbiter and every other handler) sends to the databases.

Counts, not timings: the same on a loaded machine and a quiet one, so a change of the batching can be
checked anywhere. The pipeline of ``ops.bench.ingest`` (documents of 100 facts with precomputed
vectors, varied texts) runs under cProfile, and the calls that reach a database are counted: SQLite's
``execute``/``executemany`` (the fabric and the embedded log) and psycopg's waits for the server (one
per round trip) on PostgreSQL. The baseline is the bare insert of ``ops.bench.ingest``: one bulk
insert of the rows (its statements are counted the same way).

    .venv/bin/python -m ops.bench.statements --facts 3000 [--postgres URL]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
from pathlib import Path

from crp_stream.config import Settings
from ops.bench._common import code_version
from ops.bench.ingest import MODEL, _reset_postgres, clustered, documents, fact_texts, run_baseline, run_pipeline

_CALLS = {
    "execute' of 'sqlite3": "SQLite execute",
    "executemany' of 'sqlite3": "SQLite executemany",
    "connection.py:479(wait)": "PostgreSQL round trips",
}


def counted(fn: object, *args: object) -> dict[str, int]:
    prof = cProfile.Profile()
    prof.enable()
    fn(*args)  # type: ignore[operator]
    prof.disable()
    out: dict[str, int] = {}
    for (path, line, name), stat in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
        label = f"{path}:{line}({name})"
        for needle, kind in _CALLS.items():
            if needle in label:
                out[kind] = out.get(kind, 0) + int(stat[1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=3000)
    ap.add_argument("--postgres", help="a PostgreSQL URL to a database the bench may fill")
    a = ap.parse_args()
    n = a.facts
    vecs, _ = clustered(n)
    docs = documents(vecs, 100, fact_texts(n, "varied"))
    print(f"crp-stream {code_version()}; {n} facts in documents of 100")
    with tempfile.TemporaryDirectory() as p, tempfile.TemporaryDirectory() as b:
        s = Settings(data_dir=Path(p), embedder=f"precomputed:{MODEL}", database_url=a.postgres)
        if a.postgres:
            _reset_postgres(a.postgres)
        pipe = counted(run_pipeline, s, docs, n)
        if a.postgres:
            _reset_postgres(a.postgres)
        base = counted(run_baseline, Settings(data_dir=Path(b), embedder=s.embedder, database_url=a.postgres), vecs)
    print(f"{'calls':<24} {'pipeline':>9} {'per fact':>9} {'bare insert':>12}")
    for kind in sorted(set(pipe) | set(base)):
        print(f"{kind:<24} {pipe.get(kind, 0):>9} {pipe.get(kind, 0) / n:>9.3f} {base.get(kind, 0):>12}")


if __name__ == "__main__":
    main()
