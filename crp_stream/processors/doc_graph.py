"""The fabric's typed graph at ingestion (SPEC-025 §7: building the graph is ingestion's job).

Beside the similarity edges (SPEC-025 §1.3, the K nearest), a document keeps its structure:

- **adjacency**: each fact is linked to the next fact of its document (positions ``i``, ``i + 1``);
- **mention**: a fact whose text names another document's title (``core.graph_rank.title_key``)
  is linked to that document's lead fact (position 0), whichever of the two came first: new facts are
  matched against the titles known, and a newly titled document against the facts already there.

Structural edges weigh 1.0 (a stated link, as strong as an identical sentence) and record their
kind. A titled document's facts are embedded as ``"title: sentence"`` (``embedding_text``): a
sentence that begins "He..." says nothing of whom on its own. The fabric records the convention in
its meta (``embedding_text``) at its first write.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import NamedTuple

from crp_stream import events
from crp_stream.core import graph_rank
from crp_stream.core.tenants import tenant_name, unscoped_key
from crp_stream.fabric.fabric import UnitOfWork

STRUCTURE_WEIGHT = 1.0
EMBEDDING_TEXT_KEY = "embedding_text"
EMBEDDING_TEXT = "title: sentence (documents with a title); the sentence otherwise"
MAX_NAMING_FACTS = 2_000  # facts linked to one newly titled document: a bound on one record's work


def embedding_text(title: str | None, text: str) -> str:
    """What the embedder reads for a fact of a document with ``title`` (contextual embedding)."""
    return f"{title}: {text}" if title else text


def record_convention(uow: UnitOfWork) -> None:
    """The fabric records, once, how fact texts were embedded (beside its model id)."""
    if uow.repo.get_meta(EMBEDDING_TEXT_KEY) is None:
        uow.repo.set_meta(EMBEDDING_TEXT_KEY, EMBEDDING_TEXT)


class DocumentFacts(NamedTuple):
    """One document of a batch: its facts by position (new and already known), the new ones' texts."""

    event: events.DocumentPublished
    document_id: str | None
    fact_ids: list[str]
    texts: dict[str, str]


def structure_edges(uow: UnitOfWork, docs: Sequence[DocumentFacts]) -> list[set[str]]:
    """Write the adjacency and mention edges of a batch's documents (their facts already inserted);
    returns the endpoints of each document's edges.

    A mention edge joins a fact to the lead fact of a document whose title it names, whichever came
    first, so the edges do not depend on the order within the batch: the titles known before the batch
    are looked up for all new texts at once, and a title new to the fabric finds the facts (of the
    batch too) that named it.
    """
    adjacency = [(a, b, STRUCTURE_WEIGHT) for d in docs for a, b in pairwise(d.fact_ids)]
    if adjacency:
        _write(uow, adjacency, "adjacency")
    leads = _known_titles(uow, docs)
    return [set(d.fact_ids if len(d.fact_ids) > 1 else ()) | _mentions(uow, d, leads) for d in docs]


def _known_titles(uow: UnitOfWork, docs: Sequence[DocumentFacts]) -> dict[str, list[tuple[str, str, str, str]]]:
    """Per new fact, the documents titled by one of its spans (``titled_leads``), in one read."""
    if not any(d.texts for d in docs) or not uow.repo.has_titles():
        return {}  # no titled document yet: a title put in this batch finds its facts itself
    spans_of = {fid: set(graph_rank.mention_spans(text)) for d in docs for fid, text in d.texts.items()}
    spans = sorted(set().union(*spans_of.values()))
    found = uow.repo.titled_leads(spans) if spans else []
    # no mention crosses tenants: a document's id is stored scoped by its tenant
    tenant_of = {fid: tenant_name(d.event.tenant) for d in docs for fid in d.texts}
    return {
        fid: [lead for lead in found if lead[0] in mine and unscoped_key(lead[2])[0] == tenant_of[fid]]
        for fid, mine in spans_of.items()
    }


def _mentions(uow: UnitOfWork, d: DocumentFacts, leads: dict[str, list[tuple[str, str, str, str]]]) -> set[str]:
    event, fact_ids = d.event, d.fact_ids
    doc = d.document_id or event.event_id
    title = getattr(event, "title", None)
    section = getattr(event, "section", None)
    key = graph_rank.title_key(title)
    touched: set[str] = set()
    mentions: list[tuple[str, str, float]] = []
    lead = fact_ids[0] if fact_ids else None
    if lead is not None and (title or section):
        before = uow.repo.put_document(event.source, doc, title, key, section, lead)
        touched.add(lead)  # a document written moves the graph generation: caches of titles see it
        if key is not None and before != key:  # a title new to the fabric: facts that named it already
            for fid, _text, src, other_doc in naming_facts(uow, key, event.tenant):
                if (src, other_doc) != (event.source, doc):
                    mentions.append((fid, lead, STRUCTURE_WEIGHT))
    own = set(fact_ids)
    for fid in sorted(d.texts):
        for _k, src, other_doc, other_lead in leads.get(fid, ()):
            if (src, other_doc) != (event.source, doc) and other_lead not in own:
                mentions.append((fid, other_lead, STRUCTURE_WEIGHT))
    if mentions:
        _write(uow, sorted(set(mentions)), "mention")
        touched |= {x for a, b, _w in mentions for x in (a, b)}
    return touched


def naming_facts(uow: UnitOfWork, key: str, tenant: str | None) -> list[tuple[str, str, str, str | None]]:
    """``(fact_id, text, source, document_id)`` of the tenant's active facts that name the title
    ``key`` (``graph_rank.names_title``), by id, at most ``MAX_NAMING_FACTS``: read under the key's
    rarest word (``fact_words``), or, when it has no word that is indexed or only very common ones, by
    scanning the texts that contain it."""
    words = graph_rank.key_words(key)
    if words:
        counts = uow.repo.word_counts(words, _WORD_CAP)
        rarest = min(words, key=lambda w: (counts[w], w))
        if counts[rarest] < _WORD_CAP:
            found = uow.repo.facts_with_word(rarest, tenant)
            return [r for r in found if graph_rank.names_title(r[1], key)][:MAX_NAMING_FACTS]
    found = uow.repo.facts_containing(key, MAX_NAMING_FACTS, tenant)
    return [r for r in found if graph_rank.names_title(r[1], key)]


_WORD_CAP = 50_000  # facts read under one word at most; past it, the texts are scanned


def _write(uow: UnitOfWork, edges: list[tuple[str, str, float]], kind: str) -> None:
    """Both directions of each edge (``Repository.add_edges``), also added to the graph cache's entries:
    the arbiter reads the new facts' entries next, and would otherwise load them back."""
    rows = [r for a, b, w in edges if a != b for r in ((a, b, float(w)), (b, a, float(w)))]
    uow.repo.add_directed_edges(rows, kind)
    uow.fabric.graph.extend([(a, b, w, kind) for a, b, w in rows])


__all__ = ["EMBEDDING_TEXT_KEY", "DocumentFacts", "embedding_text", "record_convention", "structure_edges"]
