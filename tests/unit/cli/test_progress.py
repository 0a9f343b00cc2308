"""Progress bars: on a terminal (a pty as stderr) long commands draw one; piped, they print nothing extra."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "ops" / "sample" / "sample.jsonl"


def _run(args: list[str], tty: bool) -> tuple[int, str]:
    """Run ``crp-stream ARGS``; stderr is a pty when ``tty``, else a pipe. Returns (exit code, stderr)."""
    cmd = [sys.executable, "-m", "crp_stream", *args, "--embedder", "hashing", "--log-format", "text"]
    env = {**os.environ, "COLUMNS": "120"}
    if not tty:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env, check=False)
        return done.returncode, done.stderr
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a terminal has a size
    chunks: list[bytes] = []

    def pump() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    rc = proc.wait(timeout=300)
    reader.join(timeout=10)
    os.close(master)
    return rc, b"".join(chunks).decode("utf-8", "replace")


def _commands(tmp: Path) -> dict[str, tuple[list[str], str]]:
    data = str(tmp / "data")
    return {
        "replay": (["replay", str(SAMPLE), "--out", str(tmp / "out.jsonl")], "replaying"),
        "publish": (["publish", str(SAMPLE), "--data", data], "publishing"),
        "run --until-idle": (["run", "--until-idle", "--sample", "--data", data], "processing the backlog"),
        "rebuild": (["rebuild", "--yes", "--data", data], "rebuilding from the log"),
        "calibrate": (["calibrate", "--data", data], "reading the sample's vectors"),
    }


def _prepared(tmp: Path, command: str) -> tuple[list[str], str]:
    """The command's arguments; rebuild and calibrate first get a fabric (the sample, piped)."""
    if command in ("rebuild", "calibrate"):
        rc, err = _run(["run", "--until-idle", "--sample", "--data", str(tmp / "data")], tty=False)
        assert rc == 0, err
    return _commands(tmp)[command]


COMMANDS = ["replay", "publish", "run --until-idle", "rebuild", "calibrate"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_terminal_shows_records_rate_and_time_left(tmp_path: Path, command: str) -> None:
    args, label = _prepared(tmp_path, command)
    rc, err = _run(args, tty=True)
    assert rc == 0, err
    final = [line for line in err.replace("\r", "\n").splitlines() if line.startswith(label + ":")][-1]
    assert "100%|" in final, final
    assert "records/s" in final or "s/records" in final, final  # the rate
    assert "<00:00" in final, final  # elapsed<time left
    done, total = final.split("| ", 1)[1].split(" ", 1)[0].split("/")
    assert done == total and int(total) > 0


@pytest.mark.parametrize("command", COMMANDS)
def test_a_pipe_gets_nothing_extra(tmp_path: Path, command: str) -> None:
    args, label = _prepared(tmp_path, command)
    rc, err = _run(args, tty=False)
    assert rc == 0, err
    assert label + ":" not in err and "\r" not in err and "%|" not in err


def test_the_replay_output_is_the_same_with_and_without_a_terminal(tmp_path: Path) -> None:
    outs = []
    for tty in (True, False):
        out = tmp_path / f"out-{tty}.jsonl"
        rc, err = _run(["replay", str(SAMPLE), "--out", str(out)], tty=tty)
        assert rc == 0, err
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0]
