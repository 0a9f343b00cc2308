"""The words of facts' texts (the ``fact_words`` table): part of ``Repository``.

A document whose title is new to the fabric links the facts that already name it (SPEC-025 §7,
mention edges whichever came first). Scanning every text for the title cost a pass over the whole
fabric per such document; instead each fact is written under its words (``core.graph_rank.title_words``)
with the fact, and the facts that may name a title are read under the title's rarest word.
"""

from __future__ import annotations

from collections.abc import Sequence

from crp_stream.core.graph_rank import title_words
from crp_stream.core.tenants import tenant_name
from crp_stream.fabric.sql.driver import DriverSQL
from crp_stream.fabric.sql.rows import FactRow


class WordRecords(DriverSQL):
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
