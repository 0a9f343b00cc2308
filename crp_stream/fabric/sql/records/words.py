"""Titles and the facts that name them: the documents' titles and the words of facts' texts (the
``fact_words`` table). Part of ``Repository``.

A document whose title is new to the fabric links the facts that already name it (SPEC-025 §7,
mention edges whichever came first). Scanning every text for the title cost a pass over the whole
fabric per such document; instead each fact is written under its words (``core.graph_rank.title_words``)
with the fact, and the facts that may name a title are read under the title's rarest word.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from crp_stream.core.graph_rank import title_words
from crp_stream.core.tenants import tenant_name
from crp_stream.fabric.sql import tables as t
from crp_stream.fabric.sql.driver import DriverSQL
from crp_stream.fabric.sql.rows import FactRow

# ``fact_titles``' join, as ``_select_in``'s table: the facts whose document has a title
_TITLED_FACTS = (
    "facts f JOIN documents d ON d.source = f.source AND d.document_id = f.document_id AND d.title IS NOT NULL"
)


class WordRecords(DriverSQL):
    _titles: dict[str, str | None]  # ``Repository``'s: titles read in this transaction (None: untitled)

    def insert_fact_words(self, rows: Sequence[FactRow]) -> None:
        """Each fact's words, in one statement; a fact already there keeps its rows (its text, as its
        id, never changes)."""
        pairs = sorted({(w, r["fact_id"]) for r in rows for w in title_words(r["text"])})
        if not pairs:
            return
        if self._dialect == "postgresql":
            self._execute_pg(
                "INSERT INTO fact_words (word, fact_id) SELECT w, f FROM unnest(%s::text[], %s::text[]) "
                "AS r(w, f) ON CONFLICT (word, fact_id) DO NOTHING",
                ([w for w, _f in pairs], [f for _w, f in pairs]),
            )
            return
        self._executemany("INSERT INTO fact_words (word, fact_id) VALUES (?, ?) ON CONFLICT DO NOTHING", pairs)

    def delete_fact_words(self, facts: Sequence[tuple[str, str]]) -> None:
        """The rows of ``(fact_id, text)`` (``forget``), by their key."""
        pairs = sorted({(w, f) for f, text in facts for w in title_words(text)})
        mark = "%s" if self._dialect == "postgresql" else "?"
        for i in range(0, len(pairs), 500):
            part = pairs[i : i + 500]
            where = " OR ".join([f"(word = {mark} AND fact_id = {mark})"] * len(part))
            self._execute(f"DELETE FROM fact_words WHERE {where}", [v for p in part for v in p])

    def word_counts(self, words: Sequence[str], cap: int) -> dict[str, int]:
        """How many facts each word has, counted up to ``cap`` (an index range each, not a scan)."""
        out: dict[str, int] = {}
        for w in words:
            row = self._execute_one(
                "SELECT count(*) FROM (SELECT 1 FROM fact_words WHERE word = ? LIMIT ?) AS found", [w, cap]
            )
            out[w] = int(row[0])
        return out

    def facts_with_word(self, word: str, tenant: str | None) -> list[tuple[str, str, str, str | None]]:
        """``(fact_id, text, source, document_id)`` of ``tenant``'s active facts with ``word``, by id."""
        mark = "%s" if self._dialect == "postgresql" else "?"
        sql = (
            "SELECT f.fact_id, f.text, f.source, f.document_id FROM fact_words w JOIN facts f ON f.fact_id = w.fact_id "
            f"WHERE w.word = {mark} AND f.status = 'active' AND f.tenant = {mark}"
        )
        raw = self.conn.connection.driver_connection
        params = [word, tenant_name(tenant)]
        if self._dialect == "postgresql":
            with raw.cursor() as cur:  # type: ignore[union-attr]
                cur.execute(sql, params)
                rows = list(cur.fetchall())
        else:
            rows = list(raw.execute(sql, params).fetchall())  # type: ignore[union-attr]
        return sorted((str(r[0]), str(r[1]), str(r[2]), None if r[3] is None else str(r[3])) for r in rows)

    def has_titles(self) -> bool:
        """Whether any document has a title (by the title index: one probe)."""
        return bool(self._execute_one("SELECT 1 FROM documents WHERE title_key IS NOT NULL LIMIT 1", ()))

    def titled_leads(self, keys: Sequence[str]) -> list[tuple[str, str, str, str]]:
        """``(title_key, source, document_id, lead_fact_id)`` of the documents titled by one of ``keys``."""
        rows = self._select_in(("title_key", "source", "document_id", "lead_fact_id"), "documents", "title_key", keys)
        return sorted((r[0], r[1], r[2], r[3]) for r in rows)

    def fact_titles(self, fact_ids: Sequence[str]) -> dict[str, str]:
        """``{fact_id: title}`` of the given facts whose document has a title (numbered series). Kept
        for the transaction (``_titles``; a document written drops them): the arbiter asks for a new
        fact and its peers, and reads ahead every fact of a micro-batch with its neighbours at once."""
        ids = sorted(set(fact_ids))
        memo = self._titles
        missing = [f for f in ids if f not in memo]
        if missing:
            found = self._select_in(("f.fact_id", "d.title"), _TITLED_FACTS, "f.fact_id", missing)
            memo.update(dict.fromkeys(missing))
            memo.update((str(r[0]), str(r[1])) for r in found)
        return {f: title for f in ids if (title := memo[f]) is not None}

    def facts_containing(
        self, needle: str, limit: int, tenant: str | None = None
    ) -> list[tuple[str, str, str, str | None]]:
        """``(fact_id, text, source, document_id)`` of ``tenant``'s active facts whose text contains
        ``needle`` (case-insensitively: the caller checks the words), in id order."""
        pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        q = (
            select(t.facts.c.fact_id, t.facts.c.text, t.facts.c.source, t.facts.c.document_id)
            .where(t.facts.c.text.ilike(pattern, escape="\\") & (t.facts.c.status == "active"))
            .where(t.facts.c.tenant == tenant_name(tenant))
            .order_by(t.facts.c.fact_id)
            .limit(limit)
        )
        return [(r[0], r[1], r[2], r[3]) for r in self.conn.execute(q)]
