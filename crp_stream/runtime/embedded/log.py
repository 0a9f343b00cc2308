"""The embedded event log: one SQLite file with Kafka's topic / key / offset / log-append-time semantics.

Each topic has one partition. Offsets are dense per topic. The append time comes from the injected
clock and never goes backwards, like Kafka's LogAppendTime. An output carries a derived ``record_id``;
appending the same id twice is a no-op, which makes redelivery after a crash harmless.
A record may carry headers (Kafka's ``(name, bytes)`` pairs, e.g. ``crp-signature``), kept as JSON.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    headers    TEXT,
    UNIQUE (topic, partition, "offset")
);
CREATE TABLE IF NOT EXISTS topic_ends (
    topic      TEXT PRIMARY KEY,
    next_offset INTEGER NOT NULL
);
"""
COLUMNS = 'seq, topic, partition, "offset", key, value, ts_us, record_id, headers'

Headers = tuple[tuple[str, bytes], ...]


def encode_headers(headers: Headers) -> str | None:
    """Headers as JSON text: ``[[name, value], ...]``; a value that is not UTF-8 as ``base64:...``."""
    if not headers:
        return None
    pairs = []
    for name, value in headers:
        try:
            text = value.decode("utf-8")
            if text.startswith("base64:"):
                raise UnicodeDecodeError("utf-8", value, 0, 1, "ambiguous prefix")
        except UnicodeDecodeError:
            text = "base64:" + base64.b64encode(value).decode("ascii")
        pairs.append([name, text])
    return json.dumps(pairs, ensure_ascii=False, separators=(",", ":"))


def decode_headers(text: str | None) -> Headers:
    if not text:
        return ()
    out = []
    for name, value in json.loads(text):
        raw = base64.b64decode(value[7:]) if value.startswith("base64:") else value.encode("utf-8")
        out.append((str(name), raw))
    return tuple(out)


def _record(row: Sequence[Any]) -> LogRecord:
    seq, topic, partition, offset, key, value, ts_us, record_id, headers = row
    return LogRecord(
        int(seq), topic, int(partition), int(offset), key, bytes(value), int(ts_us), record_id, decode_headers(headers)
    )


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
    headers: Headers = ()


@dataclass(frozen=True)
class Append:
    topic: str
    key: str | None
    value: bytes
    record_id: str | None = None
    ts_us: int | None = None  # only replay sets it: the file's ts is the append time
    headers: Headers = ()


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
        self._db.execute("PRAGMA secure_delete=ON")  # ``erase``: a forgotten record leaves no bytes behind
        self._db.executescript(SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Logs written before headers existed get the column (NULL: no headers)."""
        cols = {row[1] for row in self._db.execute("PRAGMA table_info(records)")}
        if "headers" not in cols:
            try:
                self._db.execute("ALTER TABLE records ADD COLUMN headers TEXT")
            except sqlite3.OperationalError as exc:  # another process added it first
                if "duplicate column" not in str(exc):
                    raise

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
        # Append times never go backwards, so the newest record holds the maximum: a primary-key
        # lookup, not MAX() over every row (which walked each large value's overflow pages).
        row = self._db.execute("SELECT ts_us FROM records ORDER BY seq DESC LIMIT 1").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def append(self, items: Sequence[Append]) -> list[LogRecord]:
        """Append atomically; returns the records written (duplicates by record_id are skipped)."""
        return [rec for rec, new in self.append_outputs(items) if new]

    def append_outputs(self, items: Sequence[Append]) -> list[tuple[LogRecord, bool]]:
        """Append atomically; for each item, the record in the log and whether this call wrote it.

        An item whose ``record_id`` is already in the log is not written again: the stored record is
        returned with ``False``, so a runtime redoing a batch still hands it to the consumers that
        have not seen it, in the order it was caused.
        """
        written: list[tuple[LogRecord, bool]] = []
        if not items:
            return written
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                # one read of the ids already there, of each topic's end and of the last seq; one
                # executemany of the rows (a document's facts are appended as one call)
                last = self.last_ts()
                known = self._by_record_id(cur, [it.record_id for it in items if it.record_id is not None])
                ends: dict[str, int] = {}
                row = cur.execute("SELECT MAX(seq) FROM records").fetchone()
                seq = int(row[0]) if row and row[0] is not None else 0
                rows = []
                for it in items:
                    old = known.get(it.record_id) if it.record_id is not None else None
                    if old is not None:
                        written.append((old, False))
                        continue
                    ts = it.ts_us if it.ts_us is not None else self._clock()
                    ts = max(ts, last)
                    last = ts
                    if it.topic not in ends:
                        end = cur.execute("SELECT next_offset FROM topic_ends WHERE topic = ?", (it.topic,)).fetchone()
                        ends[it.topic] = int(end[0]) if end else 0
                    offset = ends[it.topic]
                    ends[it.topic] = offset + 1
                    seq += 1  # what SQLite assigns an INTEGER PRIMARY KEY: the largest plus one
                    headers = encode_headers(it.headers)
                    rows.append((seq, it.topic, offset, it.key, it.value, ts, it.record_id, headers))
                    rec = LogRecord(seq, it.topic, 0, offset, it.key, it.value, ts, it.record_id, tuple(it.headers))
                    written.append((rec, True))
                    if it.record_id is not None:  # a second item with this id is a duplicate of this one
                        known[it.record_id] = rec
                cur.executemany(
                    'INSERT INTO records (seq, topic, partition, "offset", key, value, ts_us, record_id, headers) '
                    "VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                cur.executemany(
                    "INSERT INTO topic_ends (topic, next_offset) VALUES (?, ?) "
                    "ON CONFLICT(topic) DO UPDATE SET next_offset = excluded.next_offset",
                    sorted(ends.items()),
                )
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        return written

    @staticmethod
    def _by_record_id(cur: sqlite3.Cursor, ids: Sequence[str]) -> dict[str, LogRecord]:
        found: dict[str, LogRecord] = {}
        unique = sorted(set(ids))
        for i in range(0, len(unique), 500):
            chunk = unique[i : i + 500]
            sql = f"SELECT {COLUMNS} FROM records WHERE record_id IN ({', '.join('?' * len(chunk))})"
            for row in cur.execute(sql, chunk).fetchall():
                rec = _record(row)
                found[str(rec.record_id)] = rec
        return found

    def read_after(self, seq: int, topics: Sequence[str] | None = None, limit: int = 1000) -> list[LogRecord]:
        if topics:
            marks = ",".join("?" for _ in topics)
            rows = self._db.execute(
                f"SELECT {COLUMNS} FROM records WHERE seq > ? AND topic IN ({marks}) ORDER BY seq LIMIT ?",
                (seq, *topics, limit),
            ).fetchall()
        else:
            rows = self._db.execute(
                f"SELECT {COLUMNS} FROM records WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
            ).fetchall()
        return [_record(r) for r in rows]

    def erase(self, before_seq: int, doomed: Callable[[LogRecord], bool]) -> int:
        """Delete the records before ``before_seq`` that ``doomed`` picks (``forget``), then empty the
        write-ahead log: deleted rows are zeroed (``secure_delete``), so no copy of them stays in a
        file. Offsets keep their gaps, as a compacted Kafka topic's do. Returns how many went."""
        gone: list[int] = []
        with self._lock:
            cur = self._db.execute(f"SELECT {COLUMNS} FROM records WHERE seq < ? ORDER BY seq", (before_seq,))
            for row in cur:
                if doomed(_record(row)):
                    gone.append(int(row[0]))
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for start in range(0, len(gone), 500):
                    part = gone[start : start + 500]
                    self._db.execute(f"DELETE FROM records WHERE seq IN ({','.join('?' * len(part))})", part)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return len(gone)

    def seq_of(self, topic: str, offset: int) -> int | None:
        """The seq of the record at ``offset``, or of the next one after a gap a ``forget`` left."""
        row = self._db.execute(
            'SELECT seq FROM records WHERE topic = ? AND partition = 0 AND "offset" >= ? ORDER BY "offset" LIMIT 1',
            (topic, offset),
        ).fetchone()
        return int(row[0]) if row else None

    def iter_topic(self, topic: str, from_offset: int = 0) -> Iterator[LogRecord]:
        cur = from_offset
        while True:
            rows = self._db.execute(
                f'SELECT {COLUMNS} FROM records WHERE topic = ? AND "offset" >= ? ORDER BY "offset" LIMIT 500',
                (topic, cur),
            ).fetchall()
            if not rows:
                return
            for r in rows:
                yield _record(r)
            cur = rows[-1][3] + 1

    def end_offsets(self) -> dict[str, int]:
        return {t: int(n) for t, n in self._db.execute("SELECT topic, next_offset FROM topic_ends ORDER BY topic")}

    def last_seq(self, topics: Sequence[str] | None = None) -> int:
        """The newest record's seq among ``topics`` (all topics if None); 0 when there is none."""
        if not topics:
            return self.max_seq()
        marks = ",".join("?" for _ in topics)
        row = self._db.execute(f"SELECT MAX(seq) FROM records WHERE topic IN ({marks})", tuple(topics)).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def max_seq(self) -> int:
        row = self._db.execute("SELECT MAX(seq) FROM records").fetchone()
        return int(row[0]) if row and row[0] is not None else 0
