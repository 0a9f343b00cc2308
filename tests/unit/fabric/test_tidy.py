"""Fabric.tidy: what serving leaves idle goes back to the system, at most every TIDY_EVERY_S, after a commit."""

from __future__ import annotations

import platform
import time
from pathlib import Path

import pytest

from crp_stream.config import Settings
from crp_stream.fabric import fabric as fabric_module
from crp_stream.fabric.fabric import TIDY_EVERY_S, Fabric


def _anon_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/self/status")


def test_a_commit_tidies_once_the_interval_has_passed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fabric = Fabric(Settings(data_dir=tmp_path, embedder="hashing"))
    trims: list[int] = []
    monkeypatch.setattr(fabric_module, "give_back", lambda: trims.append(1))
    with fabric.unit_of_work():
        pass
    assert trims == []  # opened just now
    fabric._tidied_at = time.monotonic() - TIDY_EVERY_S - 1
    with fabric.unit_of_work():
        pass
    assert trims == [1]
    with fabric.unit_of_work():
        pass
    assert trims == [1]  # not again before the interval
    with pytest.raises(RuntimeError), fabric.unit_of_work():
        fabric._tidied_at = time.monotonic() - TIDY_EVERY_S - 1
        raise RuntimeError("rolled back")
    assert trims == [1]  # only after a commit


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_tidy_gives_back_sqlites_page_cache(tmp_path: Path) -> None:
    """A scan of 32 MB leaves its pages in the connection's page cache (up to 256 MiB): tidy frees them."""
    fabric = Fabric(Settings(data_dir=tmp_path, embedder="hashing"))
    rows = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 8000) SELECT randomblob(4000) FROM n"
    )
    with fabric.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE pad (x BLOB)")
        conn.exec_driver_sql(f"INSERT INTO pad {rows}")
    fabric.tidy()
    with fabric.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*), sum(length(x)) FROM pad").one() == (8000, 32_000_000)
    before = _anon_kib()
    fabric.tidy()
    after = _anon_kib()
    assert before - after > 24_000, (before, after)  # KiB
