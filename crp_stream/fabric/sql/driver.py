"""Statements on the driver's own connection, inside the SQLAlchemy transaction: the per-record and
per-batch reads and writes where SQLAlchemy's statement and row handling cost more than the query."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection


class DriverSQL:
    """A base of ``Repository`` and its parts: ``conn`` and its dialect, and driver-level statements."""

    conn: Connection
    _dialect: str

    def _select_in(
        self,
        columns: Sequence[str],
        table: str,
        key: str,
        ids: Sequence[str],
        order: Sequence[str] = (),
        where: tuple[str, Any] | None = None,
    ) -> list[Any]:
        """``SELECT columns FROM table WHERE key IN ids [ORDER BY order]`` on the driver's connection,
        in this transaction: envelope assembly's per-request reads, where SQLAlchemy's statement and
        row handling cost twice the query itself. ``order`` sorts in byte order on both databases.
        Names are this module's constants, never input; ``where`` adds ``AND column = value``."""
        ids = sorted(set(ids))
        if not ids:
            return []
        raw = self.conn.connection.driver_connection
        head = f"SELECT {', '.join(columns)} FROM {table} WHERE "
        extra: list[Any] = []
        if where is not None:
            head += f"{where[0]} = {'%s' if self._dialect == 'postgresql' else '?'} AND "
            extra.append(where[1])
        head += key
        if self._dialect == "postgresql":
            tail = (" ORDER BY " + ", ".join(f'{c} COLLATE "C"' for c in order)) if order else ""
            with raw.cursor() as cur:  # type: ignore[union-attr]
                # binary: no per-element quoting. Never prepared: a prepared statement's generic plan
                # (a fresh table without statistics) matched each row against the whole array, e.g.
                # a start-up graph preload stuck for minutes on 5,000 ids; a one-off plan hashes it
                cur.execute(head + " = ANY(%b)" + tail, (*extra, ids), prepare=False)
                return list(cur.fetchall())
        tail = (" ORDER BY " + ", ".join(order)) if order else ""
        out: list[Any] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            sql = f"{head} IN ({', '.join('?' * len(chunk))}){tail}"
            out.extend(raw.execute(sql, [*extra, *chunk]).fetchall())  # type: ignore[union-attr]
        return out

    def _select_where(
        self, columns: Sequence[str], table: str, equal: Sequence[tuple[str, Any]], order: Sequence[str] = ()
    ) -> list[Any]:
        """``SELECT columns FROM table WHERE a = ? AND ... [ORDER BY order]`` on the driver's connection,
        like ``_select_in``: for the reads every record makes (idempotency, session state). ``order``
        sorts as SQLAlchemy's ``order_by`` of the same columns would (the database's own collation)."""
        mark = "%s" if self._dialect == "postgresql" else "?"
        sql = f"SELECT {', '.join(columns)} FROM {table} WHERE " + " AND ".join(f"{k} = {mark}" for k, _ in equal)
        if order:
            sql += " ORDER BY " + ", ".join(order)
        raw = self.conn.connection.driver_connection
        if self._dialect == "postgresql":
            with raw.cursor() as cur:  # type: ignore[union-attr]
                cur.execute(sql, [v for _, v in equal])
                return list(cur.fetchall())
        return list(raw.execute(sql, [v for _, v in equal]).fetchall())  # type: ignore[union-attr]

    def _execute_pg(self, sql: str, params: Sequence[Any]) -> None:
        with self.conn.connection.driver_connection.cursor() as cur:  # type: ignore[union-attr]
            cur.execute(sql, params)

    def _execute(self, sql: str, params: Sequence[Any]) -> int:
        """One statement on the driver (``?`` marks); returns the rows it changed."""
        raw = self.conn.connection.driver_connection
        if self._dialect == "postgresql":
            with raw.cursor() as cur:  # type: ignore[union-attr]
                cur.execute(sql.replace("?", "%s"), list(params))
                return int(cur.rowcount)
        return int(raw.execute(sql, list(params)).rowcount)  # type: ignore[union-attr]

    def _execute_one(self, sql: str, params: Sequence[Any]) -> Any:
        """One statement on the driver (``?`` marks) that returns a row (``RETURNING``); its first row."""
        raw = self.conn.connection.driver_connection
        if self._dialect == "postgresql":
            with raw.cursor() as cur:  # type: ignore[union-attr]
                cur.execute(sql.replace("?", "%s"), list(params))
                return cur.fetchone()
        return raw.execute(sql, list(params)).fetchone()  # type: ignore[union-attr]

    def _copy_insert_ignore(self, table: str, columns: Sequence[str], keys: Sequence[str], rows: Iterable[Any]) -> int:
        """PostgreSQL: ``rows`` (tuples in ``columns`` order) COPYed into a session-local staging table,
        then one ``INSERT ... SELECT ... ON CONFLICT (keys) DO NOTHING`` into ``table``; the rows the
        insert added. COPY streams a batch without a parameter per value, and the insert keeps the
        idempotency of a replayed record. The staging table empties at commit (``ON COMMIT DELETE ROWS``)
        and is truncated after each use, so a rolled-back or repeated batch starts from nothing."""
        stage = f"crp_stage_{table}"
        cols = ", ".join('"' + c + '"' for c in columns)
        raw = self.conn.connection.driver_connection
        with raw.cursor() as cur:  # type: ignore[union-attr]
            # every time: a rolled-back transaction takes the table it made with it. No constraints:
            # the target's checks run once, in the INSERT
            cur.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {stage} (LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
            )
            with cur.copy(f"COPY {stage} ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            # a heap filled by one COPY scans in the order written: the rows keep their batch order
            cur.execute(
                f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {stage} ON CONFLICT ({', '.join(keys)}) DO NOTHING"
            )
            inserted = int(cur.rowcount)
            cur.execute(f"TRUNCATE {stage}")
        return inserted

    def _copy_in(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """PostgreSQL: ``rows`` appended to ``table`` by one COPY (a plain insert: a repeated key fails
        the transaction, as the INSERT it replaces would)."""
        cols = ", ".join('"' + c + '"' for c in columns)
        raw = self.conn.connection.driver_connection
        with raw.cursor() as cur, cur.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:  # type: ignore[union-attr]
            for row in rows:
                copy.write_row(row)

    def _executemany(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """One statement for many rows on the driver (``?`` marks): SQLAlchemy's per-row parameter
        handling cost more than SQLite's insert of a batch's edges."""
        if not rows:
            return
        raw = self.conn.connection.driver_connection
        if self._dialect == "postgresql":
            with raw.cursor() as cur:  # type: ignore[union-attr]
                cur.executemany(sql.replace("?", "%s"), rows)
        else:
            raw.executemany(sql, rows)  # type: ignore[union-attr]


def copy_rows(
    rows: Sequence[Mapping[str, Any]], cols: Sequence[str], whole: Sequence[int]
) -> Iterator[tuple[Any, ...]]:
    """``rows`` as COPY tuples in ``cols`` order. COPY parses its text as the column's type, where an
    INSERT's parameter is cast: a float given for an integer column is rounded here as the server's
    assignment cast would round it (half to even)."""
    for r in rows:
        values = [r[c] for c in cols]
        for i in whole:
            v = values[i]
            if type(v) is float:
                values[i] = round(v)
        yield tuple(values)
