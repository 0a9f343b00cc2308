"""``crp-stream --version`` prints the installed version, which is pyproject's and the changelog's newest."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from crp_stream.cli import main
from crp_stream.cli.main import package_version

ROOT = Path(__file__).resolve().parents[3]


def test_the_version_is_pyprojects_and_the_newest_changelog_entry() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    # the newest released entry: changes not released yet sit under "## Unreleased" above it
    newest = re.search(r"^## (?!Unreleased\b)(\S+)", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert newest is not None
    assert declared == newest.group(1)
    assert package_version() == declared  # the installed metadata is current (ops/setup reinstalls)


def test_version_flag_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"crp-stream {package_version()}\n"


def test_the_command_prints_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "crp_stream", "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"crp-stream {package_version()}\n", "")
