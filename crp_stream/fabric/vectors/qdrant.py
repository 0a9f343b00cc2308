"""Deployment backend of the vector port: a Qdrant server through ``qdrant-client``.

``QdrantVectorIndex(url=spec)`` talks to a server, over REST (``http(s)://HOST:6333``) or gRPC
(``grpc(s)://HOST:6334``, qdrant-client's ``prefer_grpc``), on the collection ``crp_facts`` or the one
named by ``?collection=NAME`` (docs/vector-stores.md). Nothing is sent to the server before the first
call of the port, so a fabric opens while the server is down, and each failure reaches the runtime as
a transient error (``runtime/vector_guard.py``). ``location=":memory:"`` or ``path=DIR`` runs the very
same adapter on qdrant-client's local mode; that is for tests only (it scans in Python and ignores
payload indexes: ~0.4 s per filtered top-50 at 20k points), the embedded default is
``edge.EdgeVectorIndex``.

On a server the collection gets keyword/float payload indexes on the filter fields and queries use
exact search by default (``exact=False`` switches to HNSW for very large collections, at the price of
approximate, build-dependent results). In local mode neither is sent: qdrant-client would warn that
they have no effect.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import numpy as np
from qdrant_client import QdrantClient, models

from crp_stream.core.ids import point_id
from crp_stream.fabric.vectors.port import (
    F_EXPIRES_AT,
    F_FACT_ID,
    F_SOURCE,
    F_STATUS,
    F_TENANT,
    Constraint,
    Vector,
    VectorIndex,
    scanned_point,
)

log = logging.getLogger(__name__)

DEFAULT_COLLECTION: Final = "crp_facts"
# The server versions this adapter supports: 1.19, which the tests run against (tests/contract,
# tests/integration/test_qdrant_server.py), and 1.20; qdrant-client 1.19-1.20 (pyproject.toml) talks to
# both without a version warning.
SUPPORTED_SERVERS: Final = ("1.19", "1.20")
_SCHEMES: Final = {"http": (False, False, 6333), "https": (False, True, 6333), "grpc": (True, False, 6334)}
_SCHEMES_TLS: Final = {"grpcs": (True, True, 6334)}
# A restarted server is found again within this long (gRPC backs off up to 120 s between reconnects).
_GRPC_OPTIONS: Final = {"grpc.initial_reconnect_backoff_ms": 100, "grpc.max_reconnect_backoff_ms": 2000}
_BATCH: Final = 512
_QUERY_BATCH: Final = 64
_INDEXES: Final = (
    (F_STATUS, models.PayloadSchemaType.KEYWORD),
    (F_EXPIRES_AT, models.PayloadSchemaType.FLOAT),
    (F_SOURCE, models.PayloadSchemaType.KEYWORD),
    (F_TENANT, models.PayloadSchemaType.KEYWORD),
)


@dataclass(frozen=True)
class ServerSpec:
    """Where a Qdrant server is and how to talk to it, from ``http(s)://`` or ``grpc(s)://HOST:PORT``."""

    host: str
    port: int
    grpc: bool = False
    tls: bool = False
    collection: str = DEFAULT_COLLECTION

    @classmethod
    def parse(cls, spec: str) -> ServerSpec:
        try:
            parts = urlsplit(spec)
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"{spec!r}: {exc}") from None
        known = {**_SCHEMES, **_SCHEMES_TLS}
        if parts.scheme not in known or not parts.hostname:
            raise ValueError(f"{spec!r} is not http(s)://HOST:PORT or grpc(s)://HOST:PORT")
        if parts.path not in ("", "/"):
            raise ValueError(f"{spec!r}: no path expected (a collection is named by ?collection=NAME)")
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False)
        unknown = sorted(set(query) - {"collection"})
        if unknown:
            raise ValueError(f"{spec!r}: unknown option {unknown[0]!r} (expected collection)")
        collection = query.get("collection", [DEFAULT_COLLECTION])[-1]
        if not collection or not all(c.isalnum() or c in "_-" for c in collection):
            raise ValueError(f"{spec!r}: collection must be letters, digits, '_' or '-'")
        grpc, tls, default_port = known[parts.scheme]
        return cls(parts.hostname, port or default_port, grpc, tls, collection)

    def client(self, api_key: str | None = None, timeout: int | None = None) -> QdrantClient:
        # The client's own version check runs on a thread at construction and warns when the server
        # is down; ``QdrantVectorIndex`` checks the version itself on its first contact instead.
        if self.grpc:
            return QdrantClient(
                host=self.host,
                grpc_port=self.port,
                prefer_grpc=True,
                https=self.tls,
                api_key=api_key,
                timeout=timeout,
                grpc_options=dict(_GRPC_OPTIONS),
                check_compatibility=False,
            )
        scheme = "https" if self.tls else "http"
        return QdrantClient(
            url=f"{scheme}://{self.host}:{self.port}", api_key=api_key, timeout=timeout, check_compatibility=False
        )


def version_note(version: str) -> str | None:
    """Why a server of ``version`` may not work with this adapter, or None when it is supported."""
    if ".".join(version.split(".")[:2]) in SUPPORTED_SERVERS:
        return None
    return f"Qdrant server {version} is not one of the supported versions {', '.join(SUPPORTED_SERVERS)}"


def _qdrant_filter(where: Constraint) -> models.Filter | None:
    must_not: list[models.Condition] = []
    if where.exclude_statuses:
        must_not.append(models.FieldCondition(key=F_STATUS, match=models.MatchAny(any=list(where.exclude_statuses))))
    if where.alive_at is not None:
        # A null expires_at never matches a range, so "never expires" survives this must_not.
        must_not.append(models.FieldCondition(key=F_EXPIRES_AT, range=models.Range(lte=where.alive_at)))
    if where.exclude_id is not None:
        must_not.append(models.HasIdCondition(has_id=[point_id(where.exclude_id)]))
    # Scoped to one tenant, always: other processes may have written a named tenant's points.
    tenant: models.Condition = (
        models.FieldCondition(key=F_TENANT, match=models.MatchValue(value=where.tenant))
        if where.tenant is not None
        else models.IsEmptyCondition(is_empty=models.PayloadField(key=F_TENANT))
    )
    return models.Filter(must=[tenant], must_not=must_not or None)


class QdrantVectorIndex(VectorIndex):
    """The vector port on one Qdrant collection (server, or qdrant-client local mode for tests)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        location: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        collection: str | None = None,
        exact: bool = True,
        timeout: int | None = None,
        client: QdrantClient | None = None,
    ) -> None:
        given = [x for x in (url, location, path, client) if x is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of url, location, path or client")
        if url is not None:
            server = ServerSpec.parse(url)  # ``collection`` given here wins over the URL's ?collection=
            client, collection = server.client(api_key, timeout), collection or server.collection
        elif client is None:
            client = QdrantClient(location=location, path=path)
        self._client = client
        options = client.init_options
        self._local = options.get("path") is not None or options.get("location") == ":memory:"
        self._collection = collection or DEFAULT_COLLECTION
        self._params = None if self._local else models.SearchParams(exact=exact)
        self._closed = False
        self._dim: int | None = None
        self._contacted = False  # a server is first asked on the port's first call, not here
        self._indexed = False  # the payload indexes were made sure of by this process
        if self._local:
            self._look()

    @property
    def collection(self) -> str:
        return self._collection

    def server_version(self) -> str:
        """The server's version (``""`` in local mode)."""
        return "" if self._local else str(self._live().info().version)

    def _look(self) -> None:
        """Read whether the collection exists, and its dimension. On a server: again while it does not
        exist (another worker, or a rebuild, may create it), and the version once."""
        client = self._live()
        if not self._contacted and not self._local:
            note = version_note(self.server_version())
            if note:
                log.warning("%s; tested: %s", note, ", ".join(SUPPORTED_SERVERS))
        self._contacted = True
        if client.collection_exists(self._collection):
            self._dim = self._read_dim()

    @property
    def is_local(self) -> bool:
        """True when running on qdrant-client's local mode (tests), not on a server."""
        return self._local

    # ---- lifecycle ----------------------------------------------------------------------------------

    @property
    def dim(self) -> int | None:
        if self._dim is None and not self._closed and (not self._contacted or not self._local):
            self._look()
        return self._dim

    def _read_dim(self) -> int:
        vectors = self._client.get_collection(self._collection).config.params.vectors
        if not isinstance(vectors, models.VectorParams):
            raise ValueError(f"collection {self._collection!r} has named vectors; expected one unnamed")
        return int(vectors.size)

    def _live(self) -> QdrantClient:
        if self._closed:
            raise RuntimeError("vector index is closed")
        return self._client

    def ensure(self, dim: int) -> None:
        client = self._live()
        if dim <= 0:
            raise ValueError(f"dimension must be positive, got {dim}")
        if self.dim is None:
            try:
                client.create_collection(
                    self._collection,
                    vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
                )
            except Exception:
                # Another worker on the same server may have created it first: then use that one.
                if not client.collection_exists(self._collection):
                    raise
            else:
                self._dim = dim
        if self._dim is None:
            self._dim = self._read_dim()
        if dim != self._dim:
            raise ValueError(f"vector index has dimension {self._dim}, asked for {dim}")
        if not self._local and not self._indexed:
            # Idempotent: whoever created the collection, each process makes sure the indexes exist.
            for field, schema in _INDEXES:
                client.create_payload_index(self._collection, field, field_schema=schema, wait=True)
            self._indexed = True

    def flush(self) -> None:
        # Writes are sent with wait=True: the server (or local file) has them when the call returns.
        self._live()

    def close(self) -> None:
        if not self._closed:
            self._client.close()
            self._closed = True

    def delete_all(self) -> None:
        client = self._live()
        if client.collection_exists(self._collection):
            client.delete_collection(self._collection)
        self._dim = None
        self._indexed = False
        self._ann_reset()

    # ---- writes -------------------------------------------------------------------------------------

    def _upsert(self, ids: list[str], vectors: Vector, payloads: list[dict[str, Any]]) -> None:
        client = self._live()
        for start in range(0, len(ids), _BATCH):
            stop = start + _BATCH
            points = [
                models.PointStruct(id=point_id(fid), vector=vec.tolist(), payload=payload)
                for fid, vec, payload in zip(ids[start:stop], vectors[start:stop], payloads[start:stop], strict=True)
            ]
            client.upsert(self._collection, points=points, wait=True)

    def _set_status(self, fact_ids: list[str], status: str) -> None:
        # By filter, not by ids: points that do not exist are skipped instead of failing the batch.
        client = self._live()
        for start in range(0, len(fact_ids), _BATCH):
            ids: list[models.ExtendedPointId] = [point_id(f) for f in fact_ids[start : start + _BATCH]]
            where = models.Filter(must=[models.HasIdCondition(has_id=ids)])
            client.set_payload(self._collection, payload={F_STATUS: status}, points=where, wait=True)

    # ---- reads --------------------------------------------------------------------------------------

    def _query(self, query: Vector, limit: int, where: Constraint, min_score: float | None) -> list[tuple[str, float]]:
        response = self._live().query_points(
            self._collection,
            query=query.tolist(),
            query_filter=_qdrant_filter(where),
            limit=limit,
            score_threshold=min_score,
            search_params=self._params,
            with_payload=[F_FACT_ID],
            with_vectors=False,
        )
        return [(str(p.payload[F_FACT_ID]), float(p.score)) for p in response.points if p.payload]

    def expires_between(self, lo: float, hi: float) -> bool:
        if self.dim is None:
            return False
        between = models.Filter(must=[models.FieldCondition(key=F_EXPIRES_AT, range=models.Range(gte=lo, lte=hi))])
        return self._live().count(self._collection, count_filter=between, exact=True).count > 0

    def _query_many(
        self, queries: Vector, limit: int, where: Constraint, min_score: float | None
    ) -> list[list[tuple[str, float]]]:
        client = self._live()
        condition = _qdrant_filter(where)
        out: list[list[tuple[str, float]]] = []
        for start in range(0, len(queries), _QUERY_BATCH):
            requests = [
                models.QueryRequest(
                    query=q.tolist(),
                    filter=condition,
                    limit=limit,
                    score_threshold=min_score,
                    params=self._params,
                    with_payload=[F_FACT_ID],
                    with_vector=False,
                )
                for q in queries[start : start + _QUERY_BATCH]
            ]
            for response in client.query_batch_points(self._collection, requests=requests):
                out.append([(str(p.payload[F_FACT_ID]), float(p.score)) for p in response.points if p.payload])
        return out

    def get_vectors(self, fact_ids: Sequence[str]) -> dict[str, Vector]:
        if not fact_ids or self.dim is None:
            return {}
        client = self._live()
        out: dict[str, Vector] = {}
        unique = sorted(set(fact_ids))
        for start in range(0, len(unique), _BATCH):
            ids: list[models.ExtendedPointId] = [point_id(f) for f in unique[start : start + _BATCH]]
            for record in client.retrieve(self._collection, ids, with_payload=[F_FACT_ID], with_vectors=True):
                if record.payload and isinstance(record.vector, list):
                    out[str(record.payload[F_FACT_ID])] = np.asarray(record.vector, dtype=np.float32)
        return out

    def _scan(self) -> list[tuple[str, Vector, str, float | None]]:
        if self.dim is None:
            return []
        client = self._live()
        out: list[tuple[str, Vector, str, float | None]] = []
        offset: models.ExtendedPointId | None = None
        while True:
            records, offset = client.scroll(
                self._collection, limit=_BATCH, offset=offset, with_payload=True, with_vectors=True
            )
            out.extend(x for r in records if (x := scanned_point(r.payload, r.vector)) is not None)
            if offset is None:
                return sorted(out, key=lambda x: x[0])

    def _delete(self, fact_ids: list[str]) -> None:
        client = self._live()
        for start in range(0, len(fact_ids), _BATCH):
            ids: list[models.ExtendedPointId] = [point_id(f) for f in fact_ids[start : start + _BATCH]]
            client.delete(self._collection, points_selector=models.PointIdsList(points=ids), wait=True)

    def count(self) -> int:
        if self.dim is None:
            return 0
        return int(self._live().count(self._collection, exact=True).count)
