"""The embedded event log: one SQLite file with Kafka's topic / key / offset / log-append-time semantics.

Each topic has one partition. Offsets are dense per topic. The append time comes from the injected
clock and never goes backwards, like Kafka's LogAppendTime. An output carries a derived ``record_id``;
appending the same id twice is a no-op, which makes redelivery after a crash harmless.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq        INTEGER PRIMARY KEY,
    topic      TEXT    NOT NULL,
    partition  INTEGER NOT NULL,
    "offset"   INTEGER NOT NULL,
    key        TEXT,
    value      BLOB    NOT NULL,
    ts_us      INTEGER NOT NULL,
    record_id  TEXT UNIQUE,
    UNIQUE (topic, partition, "offset")
);
CREATE TABLE IF NOT EXISTS topic_ends (
    topic      TEXT PRIMARY KEY,
    next_offset INTEGER NOT NULL
);
"""


@dataclass(frozen=True)
class LogRecord:
    seq: int
    topic: str
    partition: int
    offset: int
    key: str | None
    value: bytes
    ts_us: int
    record_id: str | None


@dataclass(frozen=True)
class Append:
    topic: str
    key: str | None
    value: bytes
    record_id: str | None = None
    ts_us: int | None = None  # only replay sets it: the file's ts is the append time


class EmbeddedLog:
    def __init__(self, path: str | Path, clock: Callable[[], int]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL: appends are not fsynced one by one; ``sync`` makes them durable before the fabric
        # commits the offsets that depend on them.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def sync(self) -> None:
        """fsync the write-ahead log: every append so far survives a crash or power loss."""
        import os

        for suffix in ("-wal", ""):
            path = str(self.path) + suffix
            if os.path.exists(path):
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def last_ts(self) -> int:
        row = self._db.execute("SELECT MAX(ts_us) FROM records").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def append(self, items: Sequence[Append]) -> list[LogRecord]:
        """Append atomically; returns the records written (duplicates by record_id are skipped)."""
        written: list[LogRecord] = []
        if not items:
            return written
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                last = self.last_ts()
                for it in items:
                    if it.record_id is not None and cur.execute(
                        "SELECT 1 FROM records WHERE record_id = ?", (it.record_id,)
                    ).fetchone():
                        continue
                    ts = it.ts_us if it.ts_us is not None else self._clock()
                    ts = max(ts, last)
                    last = ts
                    row = cur.execute("SELECT next_offset FROM topic_ends WHERE topic = ?", (it.topic,)).fetchone()
                    offset = int(row[0]) if row else 0
                    cur.execute(
                        'INSERT INTO records (topic, partition, "offset", key, value, ts_us, record_id) '
                        "VALUES (?, 0, ?, ?, ?, ?, ?)",
                        (it.topic, offset, it.key, it.value, ts, it.record_id),
                    )
                    seq = int(cur.lastrowid or 0)
                    cur.execute(
                        "INSERT INTO topic_ends (topic, next_offset) VALUES (?, ?) "
                        "ON CONFLICT(topic) DO UPDATE SET next_offset = excluded.next_offset",
                        (it.topic, offset + 1),
                    )
                    written.append(LogRecord(seq, it.topic, 0, offset, it.key, it.value, ts, it.record_id))
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        return written

    def read_after(self, seq: int, topics: Sequence[str] | None = None, limit: int = 1000) -> list[LogRecord]:
        if topics:
            marks = ",".join("?" for _ in topics)
            rows = self._db.execute(
                f'SELECT seq, topic, partition, "offset", key, value, ts_us, record_id FROM records '
                f"WHERE seq > ? AND topic IN ({marks}) ORDER BY seq LIMIT ?",
                (seq, *topics, limit),
            ).fetchall()
        else:
            rows = self._db.execute(
                'SELECT seq, topic, partition, "offset", key, value, ts_us, record_id FROM records '
                "WHERE seq > ? ORDER BY seq LIMIT ?",
                (seq, limit),
            ).fetchall()
        return [LogRecord(*r) for r in rows]

    def seq_of(self, topic: str, offset: int) -> int | None:
        row = self._db.execute(
            'SELECT seq FROM records WHERE topic = ? AND partition = 0 AND "offset" = ?', (topic, offset)
        ).fetchone()
        return int(row[0]) if row else None

    def iter_topic(self, topic: str, from_offset: int = 0) -> Iterator[LogRecord]:
        cur = from_offset
        while True:
            rows = self._db.execute(
                'SELECT seq, topic, partition, "offset", key, value, ts_us, record_id FROM records '
                'WHERE topic = ? AND "offset" >= ? ORDER BY "offset" LIMIT 500',
                (topic, cur),
            ).fetchall()
            if not rows:
                return
            for r in rows:
                yield LogRecord(*r)
            cur = rows[-1][3] + 1

    def end_offsets(self) -> dict[str, int]:
        return {t: int(n) for t, n in self._db.execute("SELECT topic, next_offset FROM topic_ends ORDER BY topic")}

    def max_seq(self) -> int:
        row = self._db.execute("SELECT MAX(seq) FROM records").fetchone()
        return int(row[0]) if row and row[0] is not None else 0
