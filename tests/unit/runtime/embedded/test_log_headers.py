"""The embedded log keeps record headers, migrates older logs, and reports already-appended outputs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crp_stream.replay_format import format_line, read_replay
from crp_stream.runtime.embedded.log import Append, EmbeddedLog


def test_headers_round_trip_including_binary_values(tmp_path: Path) -> None:
    log = EmbeddedLog(tmp_path / "log.sqlite", lambda: 1)
    headers = (("crp-signature", b"ab" * 32), ("bin", b"\xff\x00"), ("tricky", b"base64:not-really"))
    log.append([Append("t", "k", b"v", headers=headers), Append("t", "k", b"w")])
    log.close()
    again = EmbeddedLog(tmp_path / "log.sqlite", lambda: 1)
    first, second = again.iter_topic("t")
    assert first.headers == headers and second.headers == ()
    assert again.read_after(0)[0].headers == headers


def test_a_log_without_the_headers_column_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE records (seq INTEGER PRIMARY KEY, topic TEXT NOT NULL, partition INTEGER NOT NULL,
            "offset" INTEGER NOT NULL, key TEXT, value BLOB NOT NULL, ts_us INTEGER NOT NULL,
            record_id TEXT UNIQUE, UNIQUE (topic, partition, "offset"));
        CREATE TABLE topic_ends (topic TEXT PRIMARY KEY, next_offset INTEGER NOT NULL);
        INSERT INTO records VALUES (1, 't', 0, 0, 'k', X'6f6c64', 5, NULL);
        INSERT INTO topic_ends VALUES ('t', 1);
    """)
    old.close()
    log = EmbeddedLog(path, lambda: 10)
    log.append([Append("t", "k", b"new", headers=(("h", b"1"),))])
    assert [(r.value, r.headers) for r in log.iter_topic("t")] == [(b"old", ()), (b"new", (("h", b"1"),))]
    EmbeddedLog(path, lambda: 10).close()  # opening a migrated log again is fine


def test_append_outputs_returns_the_stored_record_for_a_known_id(tmp_path: Path) -> None:
    log = EmbeddedLog(tmp_path / "log.sqlite", lambda: 1)
    [(first, new)] = log.append_outputs([Append("out", "k", b"v", record_id="id-1")])
    assert new
    again = log.append_outputs([Append("out", "k", b"v", record_id="id-1"), Append("out", "k", b"w", record_id="id-2")])
    assert [(r.record_id, r.offset, n) for r, n in again] == [("id-1", 0, False), ("id-2", 1, True)]
    assert again[0][0] == first


def test_replay_lines_carry_headers(tmp_path: Path) -> None:
    line = format_line("crp.documents", "k", 1_000_000, b'{"a":1}', (("crp-signature", b"00ff"),))
    assert '"headers":{"crp-signature":"00ff"}' in line
    src = tmp_path / "in.jsonl"
    src.write_text(line + "\n" + format_line("crp.documents", "k", 2_000_000, b'{"a":2}') + "\n")
    with_headers, without = read_replay(src)
    assert with_headers[4:] == ((("crp-signature", b"00ff"),),)
    assert len(without) == 4
