"""Meta values and consumer offsets: part of ``Repository`` (the reads and writes every record makes
to know where its consumer stands), kept apart so each file stays one noun.

Meta values read or written in a transaction are kept for its rest (``_meta``): a window request reads
the model, the generations and its outbox several times, a round trip each on PostgreSQL otherwise.
A rollback to a savepoint (a rejected handler, or any ``begin_nested`` rolled back) may undo meta
writes: what was kept is dropped (counted per connection by an engine event).
Values fixed at the fabric's first write (``FIXED_META``) are kept by the process (``_fixed``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, event, select, update

from crp_stream.fabric.sql import tables as t
from crp_stream.fabric.sql.driver import DriverSQL

_ROLLBACKS = "crp_savepoint_rollbacks"


@event.listens_for(Engine, "rollback_savepoint")
def _count_rollback(conn: Connection, name: Any, context: Any) -> None:
    conn.info[_ROLLBACKS] = conn.info.get(_ROLLBACKS, 0) + 1


# SPEC-024 §2.5: the text convention is fixed at the fabric's first write; the model and its dimension
# too, except that ``crp-stream reembed`` switches them: they are read per transaction
FIXED_META = frozenset({"embedding_text"})


# (SQLite, PostgreSQL): the offset of a consumer's partition, never lowered
_UPSERT_OFFSET = tuple(
    "INSERT INTO consumer_offsets (consumer, topic, partition, next_offset) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (consumer, topic, partition)"
    f" DO UPDATE SET next_offset = {larger}(consumer_offsets.next_offset, excluded.next_offset)"
    for larger in ("max", "GREATEST")
)
_UPSERT_OFFSET_PG = _UPSERT_OFFSET[1].replace("?", "%s")  # the PostgreSQL one in psycopg's placeholders


class ProgressRecords(DriverSQL):
    _meta: dict[str, str | None]
    _fixed: dict[str, str]
    _meta_written: set[str]
    _meta_rollbacks: int = -1  # savepoint rollbacks on the connection when ``_meta`` was last checked

    def _insert_ignore(self, table: Any, rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> int:
        raise NotImplementedError  # Repository's

    # meta -------------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        fixed = self._fixed
        if key in fixed:
            return fixed[key]
        if key not in self._kept_meta():
            self.prefetch_meta([key])
        return self._meta[key]

    def prefetch_meta(self, keys: Iterable[str]) -> None:
        """Read the meta values of ``keys`` not known yet in this transaction, in one query."""
        ask = [k for k in keys if k not in self._kept_meta() and k not in self._fixed]
        if ask:
            self._keep_meta(ask, self._select_in(("key", "value"), "meta", "key", ask))

    def _keep_meta(self, asked: Sequence[str], rows: Iterable[Any]) -> None:
        found = {k: v for k, v in rows}
        for k in asked:
            value = found.get(k)
            self._meta[k] = value
            if value is not None and k in FIXED_META and k not in self._meta_written:
                self._fixed[k] = value  # committed (not this transaction's write) and never changed once set

    def _kept_meta(self) -> dict[str, str | None]:
        rollbacks = self.conn.info.get(_ROLLBACKS, 0)
        if rollbacks != self._meta_rollbacks:
            self._meta.clear()
            self._meta_rollbacks = rollbacks
        return self._meta

    def set_meta(self, key: str, value: str) -> None:
        self._meta_written.add(key)
        if self.get_meta(key) is None:
            self.conn.execute(t.meta.insert().values(key=key, value=value))
        else:
            self.conn.execute(update(t.meta).where(t.meta.c.key == key).values(value=value))
        self._meta[key] = value

    def increment_meta(self, key: str, by: int = 1) -> int:
        """Add ``by`` to an integer meta value (0 if absent) and return the new value, atomically: a
        concurrent writer waits for this transaction and then increments the committed value, so two
        workers never both move a counter from n to n + 1 (a read-then-write would)."""
        # on the driver: every transaction that writes claims or statuses moves a counter
        self._execute("INSERT INTO meta (key, value) VALUES (?, '0') ON CONFLICT (key) DO NOTHING", (key,))
        sql = "UPDATE meta SET value = CAST(CAST(value AS BIGINT) + ? AS TEXT) WHERE key = ? RETURNING value"
        value_now = int(self._execute_one(sql, (int(by), key))[0])
        self._meta[key] = str(value_now)
        return value_now

    # offsets ----------------------------------------------------------------------------------
    def offsets(self, consumer: str) -> dict[tuple[str, int], int]:
        return self.offsets_of([consumer])[consumer]

    def offsets_of(self, consumers: Sequence[str]) -> dict[str, dict[tuple[str, int], int]]:
        """``offsets`` of several consumers in one statement (every one in the result, maybe empty)."""
        c = t.consumer_offsets.c
        found: dict[str, dict[tuple[str, int], int]] = {g: {} for g in consumers}
        for r in self.conn.execute(
            select(c.consumer, c.topic, c.partition, c.next_offset).where(c.consumer.in_(consumers))
        ):
            found[r.consumer][(r.topic, r.partition)] = r.next_offset
        return found

    def batch_start(self, consumer: str, meta_keys: Sequence[str]) -> dict[tuple[str, int], int]:
        """``offsets(consumer)``, with the meta values of ``meta_keys`` read into this transaction, in
        one round trip: the first read of every micro-batch (``record_start``'s for a batch)."""
        ask = [k for k in meta_keys if k not in self._kept_meta() and k not in self._fixed]
        mark = "%s" if self._dialect == "postgresql" else "?"
        sql = f"SELECT topic, partition, next_offset, NULL, NULL FROM consumer_offsets WHERE consumer = {mark}"
        if ask:
            marks = ", ".join([mark] * len(ask))
            sql += f" UNION ALL SELECT NULL, NULL, NULL, key, value FROM meta WHERE key IN ({marks})"
        rows = self._fetch(sql, [consumer, *ask])
        self._keep_meta(ask, [(k, v) for topic, _p, _o, k, v in rows if topic is None])
        return {(topic, int(p)): int(o) for topic, p, o, _k, _v in rows if topic is not None}

    def _fetch(self, sql: str, args: Sequence[Any]) -> list[Any]:
        raw = self.conn.connection.driver_connection
        if self._dialect == "postgresql":
            with raw.cursor() as cur:  # type: ignore[union-attr]
                cur.execute(sql, list(args))
                return list(cur.fetchall())
        return list(raw.execute(sql, list(args)).fetchall())  # type: ignore[union-attr]

    def record_start(self, consumer: str, topic: str, partition: int, meta_keys: Sequence[str]) -> int:
        """The fabric's next offset of ``consumer`` on the partition (0 if none), and the meta values of
        ``meta_keys`` read into this transaction, in one round trip: the first read of every record."""
        ask = [k for k in meta_keys if k not in self._kept_meta() and k not in self._fixed]
        mark = "%s" if self._dialect == "postgresql" else "?"
        sql = (
            "SELECT NULL, CAST(next_offset AS TEXT) FROM consumer_offsets"
            f" WHERE consumer = {mark} AND topic = {mark} AND partition = {mark}"
        )
        if ask:
            sql += f" UNION ALL SELECT key, value FROM meta WHERE key IN ({', '.join([mark] * len(ask))})"
        rows = self._fetch(sql, [consumer, topic, partition, *ask])
        self._keep_meta(ask, [(k, v) for k, v in rows if k is not None])
        return next((int(v) for k, v in rows if k is None), 0)

    def commit_offset(self, consumer: str, topic: str, partition: int, next_offset: int) -> None:
        """Advance a consumer's offset; never lower it. A worker restarted behind the fabric (its
        broker offset trails the fabric's) may compute a lower low-watermark: applied, the records in
        between would be applied twice after the next restart."""
        # one upsert on the driver: the embedded runtime commits a group's offset with every batch, and
        # building SQLAlchemy's UPDATE-then-INSERT for it cost more than SQLite running it
        self._execute(_UPSERT_OFFSET[self._dialect == "postgresql"], (consumer, topic, partition, next_offset))

    def commit_offset_and_meta(
        self, consumer: str, topic: str, partition: int, next_offset: int, key: str, value: str | None
    ) -> None:
        """``commit_offset`` and, unless ``value`` is None, ``set_meta(key, value)``: a record's last
        writes on the Kafka worker (its offset and its outbox row). On PostgreSQL one statement, upserts
        in a CTE, which also writes what the repository buffered (``_joined_writes``: sessions,
        processed ids); the offset keeps ``commit_offset``'s never-lower rule (GREATEST)."""
        if self._dialect != "postgresql":
            self.commit_offset(consumer, topic, partition, next_offset)
            if value is not None:
                self.set_meta(key, value)
            return
        parts, args = self._joined_writes()
        parts.append(_UPSERT_OFFSET_PG)  # ``commit_offset``'s statement
        args.extend((consumer, topic, partition, next_offset))
        if value is not None:
            parts.append(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            )
            args.extend((key, value))
        *first, last = parts
        sql = ("WITH " + ", ".join(f"w{i} AS ({p})" for i, p in enumerate(first)) + " " if first else "") + last
        self._execute_pg(sql, args)
        if value is not None:
            self._meta_written.add(key)
            self._kept_meta()[key] = value

    def _joined_writes(self) -> tuple[list[str], list[Any]]:
        """Buffered writes taken into ``commit_offset_and_meta``'s statement: (upserts, parameters)."""
        return [], []


__all__ = ["FIXED_META", "ProgressRecords"]
