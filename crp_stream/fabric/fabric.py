"""The knowledge fabric: relational store + vector index + embedder behind one object.

Handlers receive a ``UnitOfWork``: a repository bound to one database transaction, plus the vector
index and embedder. The runtime commits the transaction together with the consumer offset.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import Engine

from crp_stream.config import ConfigError, Settings
from crp_stream.core import graph_kernels, memo
from crp_stream.core.calibration import Thresholds
from crp_stream.fabric.caches.claim_index import ClaimIndex
from crp_stream.fabric.caches.fact_cache import FactCache
from crp_stream.fabric.caches.graph import GRAPH_GENERATION, GraphCache
from crp_stream.fabric.embedders.http import HttpOptions
from crp_stream.fabric.embedders.port import CALIBRATED_THRESHOLDS, Embedder, make_embedder
from crp_stream.fabric.heap_trim import give_back
from crp_stream.fabric.models import BASE_MODEL_KEY, ModelView, collection_spec, spec_key
from crp_stream.fabric.sql import db
from crp_stream.fabric.sql.records.forget import Forgotten
from crp_stream.fabric.sql.repository import Repository
from crp_stream.fabric.vectors.port import VectorIndex

log = logging.getLogger(__name__)

MODEL_KEY = "embedding_model"
DIM_KEY = "embedding_dim"
THRESHOLDS_PREFIX = "thresholds:"
SERVER_SCHEMES = ("http://", "https://", "grpc://", "grpcs://")  # a Qdrant server (vectors.qdrant.ServerSpec)
STORED_FIELDS = ("min_relevance", "edge_threshold", "contradiction_threshold", "min_connector_relevance")
# Serving leaves free heap pages and SQLite page-cache pages behind: at 1M facts, ~180 and ~90 MiB after
# 800 window requests. At most this often, after a commit, ``tidy`` gives them back (~1-7 ms)
TIDY_EVERY_S = 10.0


def thresholds_key(model_id: str) -> str:
    """The meta key of a model's stored thresholds (``crp-stream calibrate --store``)."""
    return THRESHOLDS_PREFIX + model_id


def parse_stored_thresholds(model_id: str, raw: str | None) -> dict[str, float]:
    """The meta value ``calibrate --store`` wrote for ``model_id`` ({} if none or unreadable)."""
    try:
        data = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        log.warning("meta %s is not JSON; ignoring the stored thresholds", thresholds_key(model_id))
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if k in STORED_FIELDS and isinstance(v, int | float)}


def threshold_sources(settings: Settings, model_id: str, stored: dict[str, float]) -> dict[str, tuple[float, str]]:
    """Precedence: explicit setting > stored calibration > shipped calibration > seed default."""
    base = Thresholds()
    shipped = CALIBRATED_THRESHOLDS.get(model_id, {})
    out: dict[str, tuple[float, str]] = {}
    for name in STORED_FIELDS:
        explicit = getattr(settings, name, None)  # min_connector_relevance has no setting
        if explicit is not None:
            out[name] = (float(explicit), "setting")
        elif name in stored:
            out[name] = (float(stored[name]), "stored")
        elif name in shipped:
            out[name] = (float(shipped[name]), "calibrated")
        else:
            out[name] = (float(getattr(base, name)), "seed")
    return out


def http_options(settings: Settings) -> HttpOptions:
    """The ``openai:`` embedder's request settings."""
    return HttpOptions(
        batch=settings.embedder_batch,
        concurrency=settings.embedder_concurrency,
        timeout=settings.embedder_timeout,
        retries=settings.embedder_retries,
    )


def open_vector_index(spec: str) -> VectorIndex:
    """``edge:/path`` (embedded qdrant-edge), ``http(s)://host:6333`` or ``grpc(s)://host:6334`` (a
    Qdrant server over REST or gRPC, ``?collection=NAME``: docs/vector-stores.md), ``memory:``."""
    if spec.startswith("edge:"):
        from crp_stream.fabric.vectors.edge import EdgeVectorIndex

        return EdgeVectorIndex(spec[len("edge:") :])
    if spec.startswith(SERVER_SCHEMES):
        from crp_stream.fabric.vectors.qdrant import QdrantVectorIndex

        try:
            return QdrantVectorIndex(url=spec)
        except ValueError as exc:
            raise ConfigError(f"qdrant: {exc}") from None
    if spec in ("memory:", ":memory:"):
        from crp_stream.fabric.vectors.qdrant import QdrantVectorIndex

        return QdrantVectorIndex(location=":memory:")
    raise ConfigError(f"qdrant: {spec!r} is not edge:PATH, http(s)://HOST:PORT, grpc(s)://HOST:PORT or memory:")


@dataclass
class UnitOfWork:
    repo: Repository
    fabric: Fabric
    # facts this transaction wrote whose records a runtime has not released to the handlers downstream
    # yet (the embedded runtime releases a micro-batch record by record): not there for them yet
    unreleased: set[str] = field(default_factory=set)
    # ``forget`` commands this transaction applied: the embedded runtime removes them from its log
    forgotten: list[Forgotten] = field(default_factory=list)
    # a session started before a reembed switched models: its windows read that model's vectors
    model: ModelView | None = None

    @property
    def vectors(self) -> VectorIndex:
        return self.model.vectors if self.model is not None else self.fabric.vectors

    @property
    def embedder(self) -> Embedder:
        return self.model.embedder if self.model is not None else self.fabric.embedder

    @property
    def facts(self) -> FactCache:
        return self.model.facts if self.model is not None else self.fabric.facts

    def thresholds(self) -> Thresholds:
        """The thresholds of the model this unit reads (``Fabric.thresholds``)."""
        return self.fabric.thresholds(self.repo, self.model.model_id if self.model is not None else None)

    @property
    def settings(self) -> Settings:
        return self.fabric.settings


class Fabric:
    def __init__(
        self,
        settings: Settings,
        *,
        migrate: bool = True,
        engine: Engine | None = None,
        vectors: VectorIndex | None = None,
        wrap: Callable[[VectorIndex], VectorIndex] | None = None,
        follow: bool = True,
    ):
        self.settings = settings
        self.wrap = wrap or (lambda v: v)  # a runtime's guard around every vector index it opens
        self.engine = engine or db.make_engine(settings.database)
        if migrate:
            db.upgrade(self.engine)
        self.vectors = vectors or open_vector_index(settings.vectors)
        self.vectors.bound_ids(settings.cache_facts)
        if settings.vectors.startswith("edge:"):
            # The embedded engine searches exactly and one process owns it, so an in-process cache sees
            # every write. A Qdrant server indexes with HNSW itself and has other writers.
            self.vectors.enable_ann(settings.ann_min_points, settings.ann_max_points, settings.ann_snapshot_dir)
        # workers keeping their own embedded index over one shared database: each fact's vector is
        # stored with it, for the others to load (docs/vector-stores.md, "Several workers, no server")
        self.stores_vectors = settings.vectors.startswith("edge:") and self.engine.dialect.name == "postgresql"
        self.embedder = make_embedder(settings.embedder, http_options(settings))
        self._model_checked = False
        self.graph = GraphCache(settings.cache_graph_nodes)  # similarity edges, shared by every request
        self.facts = FactCache(settings.cache_facts)  # candidates' fixed columns and vectors, likewise
        self.claims = ClaimIndex(settings.cache_claim_facts)  # the arbiter's claims (members, verdict rows)
        memo.configure(settings.cache_texts)  # the screens' text memos are per process, like the caches
        self._stored_thresholds: dict[str, dict[str, float]] = {}  # model -> calibrate --store values
        self._fixed_meta: dict[str, str] = {}  # Repository.FIXED_META values, once read committed
        self._views: dict[str, ModelView] = {}  # models other than the active one, for their sessions
        self._vectors_spec = settings.vectors  # the store ``self.vectors`` holds
        # a wall clock of the process's own housekeeping, never of what it outputs
        self._tidied_at = time.monotonic()
        if follow and db.is_migrated(self.engine):
            self.follow()  # a reembed may have switched the model since the settings were written

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        try:
            with self.engine.begin() as conn:
                repo = Repository(conn, self.claims, self._fixed_meta)
                yield UnitOfWork(repo, self)
                repo.flush()
        except BaseException:
            self.facts.clear()  # it may hold rows this transaction wrote and did not commit
            raise  # the claim index was not changed: the transaction's stage is dropped with it
        if repo.claims is not None:
            self.claims.committed(repo.claims, repo.claims_base)
        if time.monotonic() - self._tidied_at >= TIDY_EVERY_S:
            self.tidy()

    def tidy(self) -> None:
        """Give back the memory nothing holds any more: the pages of SQLite's page cache (read again
        from the file, or the OS's cache, when asked), the C heap's free pages (``heap_trim``), and,
        once the ANN cache serves, the pages of the vector store's files that writes mapped again."""
        self._tidied_at = time.monotonic()
        db.release_page_cache(self.engine)
        give_back()
        if self.vectors.ann_now is not None:
            self.vectors.page_out_files()

    def warm(self, graph: bool = True) -> None:
        """Fill the in-process caches a window request reads, at start-up rather than on the first
        requests: the ANN cache of a large fabric, and (``graph``: the process serves window
        requests) the similarity graph of up to ``cache_graph_nodes`` facts (``GraphCache.preload``)
        and the rows, vectors and statuses of up to ``cache_facts`` facts (``FactCache.preload``)."""
        self.vectors.ann()
        if not graph:
            return
        graph_kernels.warm()  # compiled (or loaded from numba's cache) now, not in the first walk
        with self.unit_of_work() as uow:
            generation = uow.repo.get_meta(GRAPH_GENERATION) or "0"
            self.graph.preload(uow.repo, uow.repo.fact_ids(limit=self.graph.max_nodes), generation)
        with self.unit_of_work() as uow:
            self.facts.preload(uow.repo, uow.vectors, uow.repo.fact_ids(limit=self.facts.max_facts))
        self.tidy()  # the reads above were transient: their pages back to the system, not held idle

    def thresholds(self, repo: Repository | None = None, model_id: str | None = None) -> Thresholds:
        """The similarity thresholds in force, each from the first of these that sets it:
        explicit settings (CRP_MIN_RELEVANCE ...), the values ``crp-stream calibrate --store`` saved in
        this fabric (meta ``thresholds:<model>``), the shipped calibration of the model
        (``embedders.port.CALIBRATED_THRESHOLDS``), the seeds' defaults. The stored values are read once
        per Fabric (in ``repo``'s transaction if given) and cached: a running worker picks up a new
        ``calibrate --store`` when it restarts.
        """
        values = self.threshold_sources(repo, model_id)
        return Thresholds(edge_k=self.settings.edge_k, **{k: v for k, (v, _) in values.items()})

    def threshold_sources(
        self, repo: Repository | None = None, model_id: str | None = None
    ) -> dict[str, tuple[float, str]]:
        """Each threshold in force for ``model_id`` (default: the embedder's) and where it comes from:
        ``setting``, ``stored`` (calibrate --store), ``calibrated`` (shipped) or ``seed``. A model the
        project has not calibrated gets the seeds' numbers until ``calibrate --store`` saves its own."""
        model = model_id or self.embedder.model_id
        return threshold_sources(self.settings, model, self.stored_thresholds(model, repo))

    def stored_thresholds(
        self, model_id: str, repo: Repository | None = None, refresh: bool = False
    ) -> dict[str, float]:
        """The thresholds ``crp-stream calibrate --store`` saved for ``model_id`` ({} if none), cached."""
        cached = self._stored_thresholds
        if model_id in cached and not refresh:
            return dict(cached[model_id])
        if repo is None:
            with self.engine.connect() as conn:
                raw = Repository(conn).get_meta(thresholds_key(model_id))
        else:
            raw = repo.get_meta(thresholds_key(model_id))
        values = parse_stored_thresholds(model_id, raw)
        cached[model_id] = values
        return dict(values)

    def check_model(self, uow: UnitOfWork, model_id: str, dim: int) -> str | None:
        """SPEC-024 §2.5: the fabric's model is fixed at its first write. Returns a reason on mismatch."""
        have = uow.repo.get_meta(MODEL_KEY)
        if have is None:
            uow.repo.set_meta(MODEL_KEY, model_id)
            uow.repo.set_meta(DIM_KEY, str(dim))
            self.vectors.ensure(dim)
            return None
        if have != model_id:
            return f"embedding_model: {model_id!r} does not match the fabric's model {have!r}"
        want_dim = int(uow.repo.get_meta(DIM_KEY) or dim)
        if want_dim != dim:
            return f"embedding: dimension {dim} does not match the fabric's dimension {want_dim}"
        if not self._model_checked:
            self.vectors.ensure(dim)
            self._model_checked = True
        return None

    # models (fabric/models.py) ------------------------------------------------------------------
    def _meta(self, repo: Repository | None, key: str) -> str | None:
        if repo is not None:
            return repo.get_meta(key)
        with self.engine.connect() as conn:
            return Repository(conn).get_meta(key)

    def model_vectors_spec(self, model_id: str, repo: Repository | None = None) -> str:
        """Where ``model_id``'s vectors are stored (``models.collection_spec``)."""
        return collection_spec(self.settings.vectors, model_id, self._meta(repo, BASE_MODEL_KEY))

    def _open_model(self, model_id: str, spec: str, repo: Repository | None) -> tuple[Embedder, VectorIndex]:
        embedder = make_embedder(spec, http_options(self.settings))
        if embedder.model_id != model_id:
            raise ConfigError(f"embedder spec {spec!r} stored for {model_id!r} builds {embedder.model_id!r}")
        vectors = self.wrap(open_vector_index(self.model_vectors_spec(model_id, repo)))
        vectors.bound_ids(self.settings.cache_facts)
        return embedder, vectors

    def follow(self, repo: Repository | None = None) -> bool:
        """Take up the active model (meta ``embedding_model``) when a reembed switched it, from the
        spec it stored: the embedder, its vectors, empty caches. The model served until then stays
        open for its sessions (``view``). Returns whether the model changed."""
        active = self._meta(repo, MODEL_KEY)
        current = self.embedder.model_id
        if active is None or active == current:
            return False
        spec = self._meta(repo, spec_key(active))
        if spec is None:
            return False  # not switched by a reembed: check_model rejects the mismatch as before
        old = ModelView(current, self.embedder, self.vectors, self.facts)
        view = self._views.pop(active, None)
        if view is None:
            embedder, vectors = self._open_model(active, spec, repo)
            view = ModelView(active, embedder, vectors, FactCache(self.settings.cache_facts))
        if self.model_vectors_spec(current, repo) == self._vectors_spec:
            self._views[current] = old
        else:  # opened with an embedder whose vectors are not in the configured store
            old.close()
        self.embedder, self.vectors, self.facts = view.embedder, view.vectors, view.facts
        self._vectors_spec = self.model_vectors_spec(active, repo)
        self._model_checked = False
        self.graph = GraphCache(self.settings.cache_graph_nodes)  # the switch replaced the similarity edges
        log.info("embedding model switched from %s to %s", current, active)
        return True

    def view(self, model_id: str, repo: Repository) -> ModelView | None:
        """The embedder and vectors of ``model_id``, a model other than the active one that sessions
        started on; None once ``reembed --finish`` retired it."""
        spec = repo.get_meta(spec_key(model_id))
        view = self._views.get(model_id)
        if spec is None:
            if view is not None:
                self._views.pop(model_id).close()
            return None
        if view is None:
            embedder, vectors = self._open_model(model_id, spec, repo)
            view = self._views[model_id] = ModelView(model_id, embedder, vectors, FactCache(self.settings.cache_facts))
        return view

    def close(self) -> None:
        for view in self._views.values():
            view.close()
        self._views.clear()
        close = getattr(self.embedder, "close", None)  # the prefetch thread, an HTTP client's connections
        if close is not None:
            close()
        self.vectors.save_ann()
        self.vectors.close()
        self.engine.dispose()
