"""``crp-stream reembed``: build another model's vectors and similarity edges beside the served ones,
then switch the active model in one transaction (docs/reliability.md, "Changing the embedding model").

Until the switch everything serves from the old model. A reembed stopped half-way leaves the old model
serving; run again with the same model it resumes (the facts whose vectors are stored already are
skipped: a model gives the same vector for the same text). The edges are computed at the end, from
the new vectors, and written by the switch itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

import numpy as np
from sqlalchemy import delete, select

from crp_stream.config import ConfigError, Settings
from crp_stream.core import reembed as rules
from crp_stream.fabric.caches.graph import GRAPH_GENERATION
from crp_stream.fabric.embedders.port import Embedder, make_embedder
from crp_stream.fabric.fabric import DIM_KEY, MODEL_KEY, Fabric, http_options, open_vector_index
from crp_stream.fabric.models import BASE_MODEL_KEY, REEMBED_TARGET_KEY, SPEC_PREFIX, collection_spec, spec_key
from crp_stream.fabric.sql import db
from crp_stream.fabric.sql import tables as t
from crp_stream.fabric.sql.repository import FACTS_GENERATION, Repository
from crp_stream.fabric.vectors.port import VectorIndex, VectorItem
from crp_stream.processors.doc_graph import embedding_text

log = logging.getLogger("crp_stream.reembed")

CHUNK = 256  # facts embedded, searched and written per step
Progress = Callable[[int, int], None]


@dataclass
class ReembedResult:
    old_model: str
    new_model: str
    facts: int  # facts in the fabric
    embedded: int  # vectors computed by this run (the others were stored by an earlier, stopped run)
    edges: int  # directed similarity rows of the new model
    switched: bool  # False: the new model was active already; this run only caught up
    edge_threshold: float
    threshold_source: str  # where the new model's edge threshold comes from (setting, stored, ...)


def _fact_ids(fabric: Fabric) -> list[str]:
    with fabric.engine.connect() as conn:
        return [r[0] for r in conn.execute(select(t.facts.c.fact_id).order_by(t.facts.c.fact_id))]


def _rows(fabric: Fabric, ids: Sequence[str]) -> list[dict[str, object]]:
    """The facts' text, status and expiry, with their document's title (the embedder reads both)."""
    f, d = t.facts, t.documents
    q = (
        select(f.c.fact_id, f.c.text, f.c.status, f.c.expires_at_us, f.c.source, d.c.title)
        .select_from(f.outerjoin(d, (f.c.source == d.c.source) & (f.c.document_id == d.c.document_id)))
        .where(f.c.fact_id.in_(list(ids)))
        .order_by(f.c.fact_id)
    )
    with fabric.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(q)]


def _text(row: dict[str, object]) -> str:
    title = row["title"]
    return embedding_text(title if isinstance(title, str) else None, str(row["text"]))


def _items(rows: Sequence[dict[str, object]], vectors: np.ndarray) -> list[VectorItem]:
    out = []
    for row, v in zip(rows, vectors, strict=True):
        exp = row["expires_at_us"]
        out.append(
            VectorItem(
                fact_id=str(row["fact_id"]),
                vector=v,
                status=str(row["status"]),
                expires_at=None if not isinstance(exp, int) else exp / 1e6,
                source=str(row["source"]),
            )
        )
    return out


def catch_up(fabric: Fabric, new: Embedder, vectors: VectorIndex, progress: Progress | None = None) -> int:
    """Compute and store the new model's vector of every fact that has none yet; returns how many."""
    ids = _fact_ids(fabric)
    done = 0
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i : i + CHUNK]
        have = vectors.get_vectors(chunk)
        rows = _rows(fabric, [f for f in chunk if f not in have])
        if rows:
            vectors.upsert(_items(rows, new.embed([_text(r) for r in rows])))
            done += len(rows)
        if progress is not None:
            progress(min(i + CHUNK, len(ids)), len(ids))
    vectors.flush()
    return done


def sync_statuses(fabric: Fabric, vectors: VectorIndex) -> None:
    """The new vectors' statuses set to the database's (the arbiter kept changing them meanwhile)."""
    with fabric.engine.connect() as conn:
        by_status: dict[str, list[str]] = {}
        for fid, status in conn.execute(select(t.facts.c.fact_id, t.facts.c.status)):
            by_status.setdefault(status, []).append(fid)
    for status, ids in sorted(by_status.items()):
        for i in range(0, len(ids), 4096):
            vectors.set_status(ids[i : i + 4096], status)
    vectors.flush()


def new_edges(fabric: Fabric, vectors: VectorIndex, k: int, threshold: float) -> list[tuple[str, str, float]]:
    """The new model's similarity edges (``core.reembed.rebuilt_similarity_edges``)."""
    all_ids = _fact_ids(fabric)
    ids: list[str] = []
    hits: list[list[tuple[str, float]]] = []
    for i in range(0, len(all_ids), CHUNK):
        vecs = vectors.get_vectors(all_ids[i : i + CHUNK])
        chunk = [f for f in all_ids[i : i + CHUNK] if f in vecs]  # a fact ingested after the catch-up has none
        ids.extend(chunk)
        hits.extend(vectors.neighbours_many([vecs[f] for f in chunk], k, threshold, chunk))
    return rules.rebuilt_similarity_edges(ids, hits, k)


def _switch(fabric: Fabric, old: str, new_model: str, dim: int, spec: str, edges: list[tuple[str, str, float]]) -> None:
    """One transaction: the similarity edges replaced, the active model and its dimension set (the
    same model again on a rerun: its edges are replaced, its spec updated)."""
    with fabric.unit_of_work() as uow:
        repo = uow.repo
        if repo.get_meta(MODEL_KEY) != old:
            raise ConfigError(f"reembed: the active model changed from {old!r} meanwhile; run reembed again")
        repo.conn.execute(delete(t.edges).where(t.edges.c.kind == "similarity"))
        for i in range(0, len(edges), 50_000):
            repo.add_directed_edges(edges[i : i + 50_000])
        repo.set_meta(spec_key(new_model), spec)
        repo.set_meta(DIM_KEY, str(dim))
        repo.set_meta(MODEL_KEY, new_model)
        repo.conn.execute(delete(t.meta).where(t.meta.c.key == REEMBED_TARGET_KEY))
        repo.increment_meta(GRAPH_GENERATION)  # every process drops its graph and fact caches
        repo.increment_meta(FACTS_GENERATION)


def storable(spec: str) -> str:
    """``spec``, refused when it holds a credential: it is stored in the fabric for every process."""
    base = spec.removeprefix("openai:").rpartition("#")[0] if spec.startswith("openai:") else ""
    if base and (urlsplit(base).username or urlsplit(base).password):
        raise ConfigError(
            f"reembed: the embedder's URL ({urlsplit(base).hostname}) has credentials in it, and the spec is "
            "stored in the fabric; give the key in CRP_EMBEDDER_API_KEY instead"
        )
    return spec


def _opened(spec: str) -> VectorIndex:
    try:
        return open_vector_index(spec)
    except RuntimeError as exc:  # qdrant-edge: one process at a time
        raise ConfigError(f"reembed: {exc} (stop `crp-stream run` on this data directory first)") from None


def _open(settings: Settings) -> Fabric:
    """The fabric without the served model's vectors: a reembed reads the facts' text, not their old
    vectors, and the embedded store may be open in a running process. No ANN snapshot is written."""
    return Fabric(replace(settings, ann_snapshot=False), vectors=open_vector_index("memory:"), follow=False)


def reembed(settings: Settings, spec: str, old_spec: str | None, progress: Progress | None = None) -> ReembedResult:
    """Build ``spec``'s vectors and edges beside the active model's, then switch to it. ``old_spec``
    (or the settings' embedder) builds the active model: stored so its sessions can finish on it."""
    new = make_embedder(storable(spec), http_options(settings))
    if new.requires_vectors:
        raise ConfigError(f"reembed: {spec!r} computes no vectors from text; name a model that does")
    fabric = _open(settings)
    try:
        with fabric.unit_of_work() as uow:
            old = uow.repo.get_meta(MODEL_KEY)
            if old is None:
                raise ConfigError("reembed: the fabric holds no facts yet; start it with --embedder instead")
            if uow.repo.get_meta(spec_key(old)) is None:
                given = make_embedder(storable(old_spec or settings.embedder), http_options(settings))
                if given.model_id != old:
                    raise ConfigError(
                        f"reembed: the fabric's model is {old!r}, not {given.model_id!r}; "
                        "pass --from with the --embedder it was built with"
                    )
                uow.repo.set_meta(spec_key(old), old_spec or settings.embedder)
            if uow.repo.get_meta(BASE_MODEL_KEY) is None:
                uow.repo.set_meta(BASE_MODEL_KEY, old)
            if old != new.model_id:
                uow.repo.set_meta(REEMBED_TARGET_KEY, spec)
        target = fabric.model_vectors_spec(new.model_id)
        source = fabric.threshold_sources(model_id=new.model_id)["edge_threshold"][1]
        th = fabric.thresholds(model_id=new.model_id)
        switched = old != new.model_id
        vectors = _opened(target)  # the active model's already on a rerun after the switch: caught up
        try:
            dim = int(new.dim or 0)
            vectors.ensure(dim)
            log.info("reembed: %s -> %s, vectors in %s", old, new.model_id, target)
            embedded = catch_up(fabric, new, vectors, progress)
            if switched:
                sync_statuses(fabric, vectors)
                edges = new_edges(fabric, vectors, th.edge_k, th.edge_threshold)
                embedded += catch_up(fabric, new, vectors)  # what was ingested meanwhile
                _switch(fabric, old, new.model_id, dim, spec, edges)
                embedded += catch_up(fabric, new, vectors)  # an ingest that read the old model before the switch
            else:  # the active model's edges computed again: with thresholds stored since (calibrate --store)
                edges = new_edges(fabric, vectors, th.edge_k, th.edge_threshold)
                _switch(fabric, old, new.model_id, dim, spec, edges)
        finally:
            vectors.close()
        return ReembedResult(
            old, new.model_id, len(_fact_ids(fabric)), embedded, len(edges), switched, th.edge_threshold, source
        )
    finally:
        fabric.close()


def finish(settings: Settings) -> list[str]:
    """Retire every model but the active one: their vectors dropped, their sessions rejected from then
    on (``Fabric.view``). Returns the models retired. The fabric's own stores are not opened."""
    engine = db.make_engine(settings.database)
    try:
        with engine.begin() as conn:
            repo = Repository(conn)
            active = repo.get_meta(MODEL_KEY)
            base = repo.get_meta(BASE_MODEL_KEY)
            keys = [str(r[0]) for r in conn.execute(select(t.meta.c.key).where(t.meta.c.key.startswith(SPEC_PREFIX)))]
            retired = sorted(k.removeprefix(SPEC_PREFIX) for k in keys if k != spec_key(active or ""))
            conn.execute(delete(t.meta).where(t.meta.c.key.in_([spec_key(m) for m in retired])))
    finally:
        engine.dispose()
    keep = collection_spec(settings.vectors, active or "", base)
    for model in retired:
        store = collection_spec(settings.vectors, model, base)
        if store == keep:
            continue  # never the active model's store
        index = _opened(store)
        try:
            index.delete_all()
        finally:
            index.close()
        log.info("reembed --finish: dropped the vectors of %s (%s)", model, store)
    return retired


__all__ = ["ReembedResult", "catch_up", "finish", "new_edges", "reembed", "sync_statuses"]
