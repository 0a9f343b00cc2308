"""``forget --vacuum`` on PostgreSQL: a forgotten sentence stays in the dead row version of its table's
files until ``VACUUM``; with ``--vacuum`` it is in no file of the database. The files are read from the
server's own data directory (``SHOW data_directory``, the local ``ops/postgres`` cluster), after a
``CHECKPOINT`` so that they hold what the server holds. A kept sentence is the control: the search
finds it, so it could find the others."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from crp_stream.cli import main
from crp_stream.config import Settings
from crp_stream.fabric.sql.db import FORGET_TABLES
from crp_stream.testing import Pipeline
from tests.integration.test_forget import MIN, T0, document
from tests.support.services import fresh_postgres_url

pytestmark = [pytest.mark.postgres]

FIRST = "Erika Mustermann's locker code is 5521 and her badge number is 4711."
SECOND = "Max Mustermann's parking space is 17 on level minus two."
KEPT = "The badge office opens at eight and closes at five."


def database_files(url: str) -> tuple[list[Path], dict[str, Path]]:
    """After a checkpoint: every file of the database's directory, and each forget table's main file."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("CHECKPOINT"))  # dirty pages reach the files: the search reads what the server holds
            data = Path(str(conn.execute(text("SHOW data_directory")).scalar_one()))
            oid = conn.execute(text("SELECT oid FROM pg_database WHERE datname = current_database()")).scalar_one()
            tables = {
                name: data / str(conn.execute(text("SELECT pg_relation_filepath(:t)"), {"t": name}).scalar_one())
                for name in FORGET_TABLES
            }
    finally:
        engine.dispose()
    base = data / "base" / str(oid)
    if not os.access(base, os.R_OK | os.X_OK):
        pytest.fail(
            f"cannot read {base}: run the tests as the user of the local ops/postgres cluster (or root)", pytrace=False
        )
    return sorted(f for f in base.iterdir() if f.is_file()), tables


def holding(files: list[Path], needle: str) -> list[str]:
    return [f.name for f in files if needle.encode() in f.read_bytes()]


def forget(data: Path, url: str, document_id: str, *extra: str) -> int:
    common = ["--data", str(data), "--embedder", "hashing", "--database", url]
    return main(["forget", *common, "--tenant", "acme", "--document", document_id, "--actor", "dpo", *extra])


def test_forget_vacuum_leaves_no_byte_of_the_sentence_in_the_database_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = fresh_postgres_url()
    data = tmp_path / "data"
    with Pipeline(Settings(data_dir=data, embedder="hashing", database_url=url)) as p:
        for n, (doc_id, sentence) in enumerate((("person-17", FIRST), ("person-18", SECOND), ("office", KEPT))):
            p.publish("crp.documents", "hr", document("acme", f"e{n}", "hr", doc_id, [sentence]), ts_us=T0 + n * MIN)
    files, tables = database_files(url)
    facts_file = tables["facts"].name
    for sentence in (FIRST, SECOND, KEPT):
        assert facts_file in holding(files, sentence), sentence  # the search reads the facts table's file

    # without --vacuum: the row is deleted, its dead version keeps the sentence in the table's file
    assert forget(data, url, "person-17") == 0
    files, _ = database_files(url)
    assert facts_file in holding(files, FIRST)

    assert forget(data, url, "person-18", "--vacuum", "--json") == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["facts"] == 1 and out["vacuumed"] == list(FORGET_TABLES)
    files, tables = database_files(url)
    assert tables["facts"].name != facts_file  # rewritten into a new file
    assert holding(files, FIRST) == [] and holding(files, SECOND) == []  # no file of the database
    assert tables["facts"].name in holding(files, KEPT)  # the control: still found where it lives
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            kept: list[Any] = list(conn.execute(text("SELECT text FROM facts")))
    finally:
        engine.dispose()
    assert [r[0] for r in kept] == [KEPT]


def test_forget_vacuum_on_sqlite_says_there_is_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    with Pipeline(Settings(data_dir=data, embedder="hashing")) as p:
        p.publish("crp.documents", "hr", document("acme", "e1", "hr", "person-17", [FIRST]), ts_us=T0)
    args = ["forget", "--data", str(data), "--embedder", "hashing", "--tenant", "acme", "--document", "person-17"]
    assert main([*args, "--actor", "dpo", "--vacuum"]) == 0
    assert "--vacuum: nothing to do on SQLite" in capsys.readouterr().out
