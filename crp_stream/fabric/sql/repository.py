"""Reads and writes of the relational fabric, bound to one transaction (a SQLAlchemy Connection)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Connection, Integer, func, select, update
from sqlalchemy.dialects import postgresql, sqlite

from crp_stream.core.tenants import DEFAULT_TENANT
from crp_stream.fabric.caches.claim_index import ClaimIndex, as_stored
from crp_stream.fabric.caches.graph import GRAPH_GENERATION, GraphCache
from crp_stream.fabric.sealing import SealingRecords
from crp_stream.fabric.sql import tables as t
from crp_stream.fabric.sql.driver import copy_rows
from crp_stream.fabric.sql.records.edges import EdgeRecords
from crp_stream.fabric.sql.records.forget import ForgetRecords
from crp_stream.fabric.sql.records.operator import OperatorRecords, TenantRecords, canonical_json
from crp_stream.fabric.sql.records.progress import ProgressRecords
from crp_stream.fabric.sql.records.vectors import VectorRecords
from crp_stream.fabric.sql.records.words import WordRecords
from crp_stream.fabric.sql.rows import AuditRow, FactRow, SessionRow, SourceRow

_FACT_COLUMNS = t.column_names(t.facts)
# from this many rows, PostgreSQL inserts by COPY into a staging table (below it, a VALUES list is as quick)
_COPY_FROM = 32

FACTS_GENERATION = "facts_generation"
_SESSION_COLUMNS = ("session_id", "embedding_model", "window_count", "max_windows", "state", "updated_at_us")
_SESSION_INSERT = f"INSERT INTO sessions ({', '.join(_SESSION_COLUMNS)}) VALUES "
_SESSION_CONFLICT = " ON CONFLICT (session_id) DO UPDATE SET " + ", ".join(
    f"{c} = excluded.{c}" for c in _SESSION_COLUMNS[1:]
)
_SESSION_UPSERT = _SESSION_INSERT + "(" + ", ".join(["%s"] * len(_SESSION_COLUMNS)) + ")" + _SESSION_CONFLICT
_MARK_COLUMNS = ("consumer", "event_id", "content_hash", "topic", "offset")
_MARK_INSERT = 'INSERT INTO processed_events (consumer, event_id, content_hash, topic, "offset") VALUES '


class Repository(
    ProgressRecords,
    OperatorRecords,
    EdgeRecords,
    WordRecords,  # before ForgetRecords, which names its ``delete_fact_words``
    ForgetRecords,
    VectorRecords,
    SealingRecords,
    TenantRecords,
):
    def __init__(self, conn: Connection, claims: ClaimIndex | None = None, fixed: dict[str, str] | None = None):
        self.conn = conn
        # meta values fixed at the fabric's first write (the model, its dimension, the embedding
        # convention): the process remembers them once read (``Fabric``'s dict), a window request
        # read them several times, each a round trip on PostgreSQL
        self._fixed: dict[str, str] = {} if fixed is None else fixed
        self._meta_written: set[str] = set()
        self._meta: dict[str, str | None] = {}  # ProgressRecords: meta read or written in this transaction
        self._dialect = conn.dialect.name
        # processed ids of this transaction, written by ``flush`` in one statement before it commits
        # (consumer, event_id) -> (consumer, event_id, content_hash, topic, offset): the statement's parameters
        self._marks: dict[tuple[str, str], tuple[str, str, str, str, int]] = {}
        # fact rows read or written in this transaction, as the store holds them: the arbiter reads each
        # new fact and its neighbours right after ingest wrote them (dropped with a rolled-back savepoint)
        self._rows: dict[str, FactRow] = {}
        self._known: dict[tuple[str, str], str | None] = {}  # processed ids read ahead (``prefetch_processed``)
        self._titles: dict[str, str | None] = {}  # ``fact_titles`` read in this transaction (None: untitled)
        # session rows read or written in this transaction (state as stored text), and the writes,
        # buffered until ``flush`` or the Kafka worker's last statement (``commit_offset_and_meta``)
        self._sessions: dict[str, tuple[Any, ...] | None] = {}
        self._session_writes: dict[str, tuple[Any, ...]] = {}
        self._buffered = 0  # writes buffered so far (``write_mark``)
        self._graph_synced = False  # ``sync_graph`` ran in this transaction (reset by a rolled-back savepoint)
        self._claim_buffer = {}
        self._claim_undo = []
        self.claims_base = None
        # this transaction's view of the process's claim index: its loads and writes, staged until commit
        self.claims = claims.begin(self) if claims is not None else None

    def flush(self) -> None:
        """Write what this repository buffered (processed ids, claim rows); the unit of work calls it
        before commit."""
        if self._marks:  # on the driver: one statement for the batch, no per-row parameter handling
            if self._dialect == "postgresql" and len(self._marks) >= _COPY_FROM:
                self._copy_in("processed_events", _MARK_COLUMNS, self._marks.values())
            else:
                self._executemany(_MARK_INSERT + "(?, ?, ?, ?, ?)", list(self._marks.values()))
            self._marks.clear()
        if self._session_writes:
            self._executemany(_SESSION_UPSERT.replace("%s", "?"), list(self._session_writes.values()))
            self._session_writes.clear()
        self._flush_claims()

    def _joined_writes(self) -> tuple[list[str], list[Any]]:
        """The buffered processed ids and session rows as upserts of one PostgreSQL statement."""
        parts: list[str] = []
        args: list[Any] = []
        for head, rows, tail in (
            (_MARK_INSERT, list(self._marks.values()), ""),
            (_SESSION_INSERT, list(self._session_writes.values()), _SESSION_CONFLICT),
        ):
            if rows:
                one = "(" + ", ".join(["%s"] * len(rows[0])) + ")"
                parts.append(head + ", ".join([one] * len(rows)) + tail)
                args.extend(v for r in rows for v in r)
        self._marks.clear()
        self._session_writes.clear()
        return parts, args

    def _insert_ignore(self, table: Any, rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> int:
        """Insert, ignoring rows whose key is there; returns the rows inserted as the driver counts
        them (-1 if it does not)."""
        if not rows:
            return 0
        names = rows[0].keys()
        if self._dialect == "sqlite" and all(r.keys() == names for r in rows):
            # on the driver: SQLAlchemy's per-row parameter handling cost more than SQLite's insert;
            # the same statement, and sqlite3 sums the rows each execution inserted as SQLAlchemy did
            cols = [c.name for c in table.columns if c.name in names]
            quoted = ", ".join('"' + c + '"' for c in cols)
            sql = (
                f"INSERT INTO {table.name} ({quoted}) "
                f"VALUES ({', '.join('?' * len(cols))}) ON CONFLICT ({', '.join(keys)}) DO NOTHING"
            )
            raw = self.conn.connection.driver_connection
            pick = itemgetter(*cols)
            params = [(pick(r),) for r in rows] if len(cols) == 1 else list(map(pick, rows))
            cur = raw.executemany(sql, params)  # type: ignore[union-attr]
            return int(cur.rowcount)
        if self._dialect == "postgresql" and len(rows) >= _COPY_FROM and all(r.keys() == names for r in rows):
            cols = [c.name for c in table.columns if c.name in names]
            whole = [i for i, c in enumerate(cols) if isinstance(table.c[c].type, Integer)]
            return self._copy_insert_ignore(table.name, cols, keys, copy_rows(rows, cols, whole))
        mod = postgresql if self._dialect == "postgresql" else sqlite
        stmt = mod.insert(table).on_conflict_do_nothing(index_elements=list(keys))
        return int(self.conn.execute(stmt, list(rows)).rowcount)

    def write_mark(self) -> tuple[int, ...]:
        """What ``written_since`` compares: the buffered writes, and on SQLite the rows changed."""
        changes = self.conn.connection.driver_connection.total_changes if self._dialect == "sqlite" else 0  # type: ignore[union-attr]
        return (self._buffered, len(self._claim_undo), changes)

    def written_since(self, mark: tuple[int, ...]) -> bool:
        """Whether this transaction wrote since ``mark``. On PostgreSQL, whether it wrote at all (a
        transaction id is assigned at its first write): exact when it had not written before ``mark``."""
        if self.write_mark() != mark:
            return True
        if self._dialect == "postgresql":
            return bool(self._execute_one("SELECT pg_current_xact_id_if_assigned() IS NOT NULL", ())[0])
        return False

    def sync_graph(self, graph: GraphCache) -> GraphCache:
        """``graph``, checked once per transaction against the stored graph generation (a cache behind
        another writer is dropped); this transaction's own edge writes keep it current (``written``)."""
        if not self._graph_synced:
            graph.sync(self.get_meta(GRAPH_GENERATION) or "0")
            self._graph_synced = True
        return graph

    # idempotency ------------------------------------------------------------------------------
    def processed_hash(self, consumer: str, event_id: str) -> str | None:
        pending = self._marks.get((consumer, event_id))
        if pending is not None:
            return pending[2]
        if (consumer, event_id) in self._known:
            return self._known[(consumer, event_id)]
        rows = self._select_where(
            ("content_hash",), "processed_events", (("consumer", consumer), ("event_id", event_id))
        )
        return rows[0][0] if rows else None

    def prefetch_processed(self, consumer: str, event_ids: Sequence[str], sessions: Sequence[str] = ()) -> None:
        """Read the processed marks of a run of records in one query; ``processed_hash`` then answers
        from them (a mark written later in this transaction still wins: it is looked up first).
        ``sessions``: the rows of those sessions too, in the same statement (``get_session``'s)."""
        sessions = sorted({s for s in sessions if s not in self._sessions})
        if len(event_ids) + len(sessions) > 500:  # a long run: marks in chunks (SQLite's parameter
            sessions = []  # limit), sessions read as handled
        if not sessions:
            found = dict(
                self._select_in(
                    ("event_id", "content_hash"),
                    "processed_events",
                    "event_id",
                    event_ids,
                    where=("consumer", consumer),
                )
            )
        else:
            pg = self._dialect == "postgresql"
            ids = sorted(set(event_ids))

            def among(n: int) -> str:
                return " = ANY(%s)" if pg else f" IN ({', '.join('?' * n)})"

            sql = (
                f"SELECT 0, event_id, content_hash, NULL, NULL, NULL, NULL FROM processed_events"
                f" WHERE consumer = {'%s' if pg else '?'} AND event_id{among(len(ids))}"
                f" UNION ALL SELECT 1, {', '.join(_SESSION_COLUMNS)} FROM sessions"
                f" WHERE session_id{among(len(sessions))}"
            )
            args: list[Any] = [consumer, ids, sessions] if pg else [consumer, *ids, *sessions]
            raw = self.conn.connection.driver_connection
            if pg:
                with raw.cursor() as cur:  # type: ignore[union-attr]
                    cur.execute(sql, args, prepare=False)  # as ``_select_in``: never a generic plan
                    rows = list(cur.fetchall())
            else:
                rows = list(raw.execute(sql, args).fetchall())  # type: ignore[union-attr]
            found = {r[1]: r[2] for r in rows if r[0] == 0}
            got = {r[1]: tuple(r[1:]) for r in rows if r[0] == 1}
            for sid in sessions:
                self._sessions[sid] = got.get(sid)
        for event_id in event_ids:
            self._known[(consumer, event_id)] = found.get(event_id)

    def mark_processed(self, consumer: str, event_id: str, content_hash: str, topic: str, offset: int) -> None:
        """Buffered until ``flush``: a batch writes its processed ids in one statement."""
        self._marks[(consumer, event_id)] = (consumer, event_id, content_hash, topic, offset)
        self._buffered += 1

    # sources ----------------------------------------------------------------------------------
    def touch_source(self, source: str, source_type: str, trust: float, at_us: int) -> None:
        # on the driver: once per document, where SQLAlchemy's statement handling cost more than SQLite's
        changed = self._execute(
            "UPDATE sources SET trust = ?, source_type = ?, last_seen_us = ? WHERE source = ?",
            (trust, source_type, at_us, source),
        )
        if changed == 0:
            self._execute(
                "INSERT INTO sources (source, source_type, trust, first_seen_us, last_seen_us) VALUES (?, ?, ?, ?, ?)",
                (source, source_type, trust, at_us, at_us),
            )

    def sources(self) -> list[SourceRow]:
        q = select(t.sources).order_by(t.sources.c.source)
        return [cast(SourceRow, dict(r._mapping)) for r in self.conn.execute(q)]

    # facts ------------------------------------------------------------------------------------
    def existing_fact_ids(self, fact_ids: Sequence[str]) -> set[str]:
        if not fact_ids:
            return set()
        return {r[0] for r in self._select_in(("fact_id",), "facts", "fact_id", fact_ids)}  # once per document

    def insert_facts(self, rows: Sequence[FactRow]) -> None:
        if not all("tenant" in r for r in rows):  # the column's server default, also in the rows kept
            rows = [r if "tenant" in r else cast(FactRow, {**r, "tenant": DEFAULT_TENANT}) for r in rows]
        inserted = self._insert_ignore(t.facts, rows, ["fact_id"])
        if inserted:  # none new (a replay): their words are there (-1, not counted: written again)
            self.insert_fact_words(rows)
        if inserted == len(rows):  # every id was new: the rows are what the store now holds
            stored = [as_stored(r) for r in rows]  # shared with the claim index: both replace, never mutate
            for r in stored:
                self._rows[r["fact_id"]] = r
        else:
            for r in rows:
                self._rows.pop(r["fact_id"], None)
        keyed = [r for r in rows if r.get("claim_key") is not None]
        if not keyed:
            return
        self._claims_written()
        if self.claims is None:
            return
        if inserted == len(rows):  # every id was new: the rows are what the store now holds
            self.claims.inserted([r for r in stored if r["claim_key"] is not None])
        else:
            self.claims.invalidate_facts(keyed)

    def facts_by_ids(self, fact_ids: Iterable[str], copies: bool = True) -> dict[str, FactRow]:
        """The rows of the given facts that exist, by fact id in id order (copies: callers may keep them;
        ``copies=False``: the transaction's own rows, for a caller that only reads them there and then)."""
        ids = sorted(set(fact_ids))
        known = self._rows
        missing = [f for f in ids if f not in known]
        if missing:
            # on the driver (``_select_in``): every column is a plain type, so the rows equal SQLAlchemy's
            for r in self._select_in(_FACT_COLUMNS, "facts", "fact_id", missing):
                known[r[0]] = cast(FactRow, dict(zip(_FACT_COLUMNS, r, strict=True)))
        if not copies:
            return {f: known[f] for f in ids if f in known}
        return {f: cast(FactRow, dict(known[f])) for f in ids if f in known}

    def fact_statuses(self, fact_ids: Sequence[str]) -> dict[str, str]:
        """``{fact_id: status}`` of the given facts that exist."""
        return dict(self._select_in(("fact_id", "status"), "facts", "fact_id", fact_ids))

    def fact_rows(self, fact_ids: Sequence[str], fields: Sequence[str]) -> dict[str, FactRow]:
        """Like ``facts_by_ids``, only the named columns (``fact_id`` among them)."""
        if not set(fields) <= set(t.facts.c.keys()):
            raise ValueError(f"not columns of facts: {sorted(set(fields) - set(t.facts.c.keys()))}")
        at = list(fields).index("fact_id")
        found = self._select_in(fields, "facts", "fact_id", fact_ids)
        return {r[at]: cast(FactRow, dict(zip(fields, r, strict=True))) for r in found}

    def facts_for_claim(self, claim_key: str) -> list[FactRow]:
        # the arbiter's read per evaluation, on the driver like ``facts_by_ids``
        pg = self._dialect == "postgresql"
        sql = f"SELECT {', '.join(_FACT_COLUMNS)} FROM facts WHERE claim_key = {'%s' if pg else '?'}"
        sql += " ORDER BY epoch_us, fact_id"
        raw = self.conn.connection.driver_connection
        if pg:
            with raw.cursor() as cur:  # type: ignore[union-attr]
                cur.execute(sql, (claim_key,))
                found = list(cur.fetchall())
        else:
            found = raw.execute(sql, (claim_key,)).fetchall()  # type: ignore[union-attr]
        return [cast(FactRow, dict(zip(_FACT_COLUMNS, r, strict=True))) for r in found]

    def document_facts(self, source: str, document_id: str) -> list[FactRow]:
        cols = ("fact_id", "position", "status")  # on the driver: read once per document
        found = self._select_where(cols, "facts", (("source", source), ("document_id", document_id)))
        return [cast(FactRow, dict(zip(cols, r, strict=True))) for r in found]

    def documents_facts(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[FactRow]]:
        """``document_facts`` of many (source, document) pairs: one read per source."""
        by_source: dict[str, set[str]] = {}
        for source, doc in keys:
            by_source.setdefault(source, set()).add(doc)
        cols = ("document_id", "fact_id", "position", "status")
        out: dict[tuple[str, str], list[FactRow]] = {}
        for source in sorted(by_source):
            for doc, *rest in self._select_in(
                cols, "facts", "document_id", sorted(by_source[source]), ("fact_id",), ("source", source)
            ):
                out.setdefault((source, doc), []).append(cast(FactRow, dict(zip(cols[1:], rest, strict=True))))
        return out

    def set_fact_status(self, fact_ids: Sequence[str], status: str) -> int:
        """The only write of ``facts.status``; it moves the meta counter ``facts_generation``, by which
        a cache of statuses in any process sees that statuses changed, and returns its new value."""
        if not fact_ids:
            raise ValueError("set_fact_status: no fact ids")
        ids = list(fact_ids)
        for i in range(0, len(ids), 500):  # on the driver: the arbiter's effects, per changed verdict
            chunk = ids[i : i + 500]
            self._execute(
                f"UPDATE facts SET status = ? WHERE fact_id IN ({', '.join('?' * len(chunk))})", [status, *chunk]
            )
        self._rows_changed(fact_ids, "status", status)
        self._claims_written()
        if self.claims is not None:
            self.claims.status_changed(fact_ids, status)
        return self.increment_meta(FACTS_GENERATION)

    def fact_counts(self) -> list[tuple[str, str, int]]:
        q = (
            select(t.facts.c.source, t.facts.c.status, func.count())
            .group_by(t.facts.c.source, t.facts.c.status)
            .order_by(t.facts.c.source, t.facts.c.status)
        )
        return [(r[0], r[1], int(r[2])) for r in self.conn.execute(q)]

    def fact_ids(self, exclude_statuses: Sequence[str] = (), limit: int | None = None) -> list[str]:
        """Fact ids in id order (ids are hashes, so any prefix is a deterministic, unbiased sample)."""
        q = select(t.facts.c.fact_id).order_by(t.facts.c.fact_id)
        if exclude_statuses:
            q = q.where(t.facts.c.status.not_in(list(exclude_statuses)))
        if limit is not None:
            q = q.limit(limit)
        return list(self.conn.execute(q).scalars())

    def all_facts(self) -> list[dict[str, Any]]:
        return [dict(r._mapping) for r in self.conn.execute(select(t.facts).order_by(t.facts.c.fact_id))]

    # documents ---------------------------------------------------------------------
    def put_document(
        self,
        source: str,
        document_id: str,
        title: str | None,
        title_key: str | None,
        section: str | None,
        lead_fact_id: str,
    ) -> str | None:
        """Record a document's title and lead fact; returns the title key it had before (None: new)."""
        key = {"source": source, "document_id": document_id}
        self._titles.clear()  # a fact's title is its document's
        old = self._select_where(("title_key",), "documents", tuple(key.items()))
        values = {"title": title, "title_key": title_key, "section": section, "lead_fact_id": lead_fact_id}
        if old:
            self.conn.execute(
                update(t.documents)
                .where((t.documents.c.source == source) & (t.documents.c.document_id == document_id))
                .values(**values)
            )
            return str(old[0][0]) if old[0][0] is not None else ""
        self.conn.execute(t.documents.insert().values(**key, **values))
        return None

    # sessions ---------------------------------------------------------------------------------
    def get_session(self, session_id: str) -> SessionRow | None:
        if session_id not in self._sessions:
            rows = self._select_where(_SESSION_COLUMNS, "sessions", (("session_id", session_id),))
            self._sessions[session_id] = tuple(rows[0]) if rows else None
        found = self._sessions[session_id]
        if found is None:
            return None
        row = dict(zip(_SESSION_COLUMNS, found, strict=True))
        row["state"] = json.loads(row["state"])
        return cast(SessionRow, row)

    def put_session(
        self,
        session_id: str,
        embedding_model: str,
        window_count: int,
        max_windows: int,
        state: dict[str, Any],
        at_us: int,
    ) -> None:
        # buffered (one statement per transaction, or joined into the Kafka worker's last one); this
        # transaction's reads see it as the stored row, the state as stored text
        row = (session_id, embedding_model, window_count, max_windows, canonical_json(state), at_us)
        self._sessions[session_id] = row
        self._session_writes[session_id] = row
        self._buffered += 1

    # audit log: append-only by construction (no update or delete method exists) -----------------
    def append_audit(self, event_id: str, audit_type: str, at_us: int, key: str, details: dict[str, Any]) -> bool:
        """Append an audit row; False if ``event_id`` is there already (the row is left as it is)."""
        # on the driver: the arbiter appends one or more per changed verdict
        inserted = self._execute(
            "INSERT INTO audit_log (event_id, audit_type, at_us, key, details) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (event_id) DO NOTHING",
            (event_id, audit_type, at_us, key, canonical_json(details)),
        )
        return inserted > 0

    def audit(self, audit_type: str | None = None, limit: int = 100) -> list[AuditRow]:
        q = select(t.audit_log).order_by(t.audit_log.c.seq.desc()).limit(limit)
        if audit_type:
            q = q.where(t.audit_log.c.audit_type == audit_type)
        rows = [dict(r._mapping) for r in self.conn.execute(q)]
        for r in rows:
            r["details"] = json.loads(r["details"])
        return [cast(AuditRow, r) for r in reversed(rows)]

    def audit_query(
        self,
        audit_type: str | None = None,
        key: str | None = None,
        since_us: int | None = None,
        until_us: int | None = None,
        after_seq: int = 0,
        limit: int = 100,
    ) -> list[AuditRow]:
        """The console's filtered view: newest ``limit`` rows matching, oldest first; ``after_seq`` tails."""
        tbl = t.audit_log
        q = select(tbl).where(tbl.c.seq > after_seq).order_by(tbl.c.seq.desc()).limit(limit)
        if audit_type:
            q = q.where(tbl.c.audit_type == audit_type)
        if key:
            q = q.where(tbl.c.key == key)
        if since_us is not None:
            q = q.where(tbl.c.at_us >= since_us)
        if until_us is not None:
            q = q.where(tbl.c.at_us < until_us)
        rows = [dict(r._mapping) for r in self.conn.execute(q)]
        for r in rows:
            r["details"] = json.loads(r["details"])
        return [cast(AuditRow, r) for r in reversed(rows)]

    def audit_exists(self, event_id: str) -> bool:
        return bool(self._select_where(("seq",), "audit_log", (("event_id", event_id),)))
