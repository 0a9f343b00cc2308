"""Embedding models side by side: the active one, and those sessions started on before a reembed.

``crp-stream reembed`` builds a new model's vectors in a collection of their own, then switches the
active model (meta ``embedding_model``) in one transaction. Each model's vectors live in the collection
its id names (``collection_spec``), except the model the fabric was first built with, which keeps the
configured one. A process finds a model's embedder by the spec stored for it (meta
``embedder_spec:<model id>``), so a running worker follows a switch without a restart.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from crp_stream.fabric.caches.fact_cache import FactCache
from crp_stream.fabric.embedders.port import Embedder
from crp_stream.fabric.vectors.port import VectorIndex

SPEC_PREFIX = "embedder_spec:"  # + model id: the --embedder spec that builds that model
BASE_MODEL_KEY = "vectors_base_model"  # the model whose vectors are in the configured collection
REEMBED_TARGET_KEY = "reembed_target"  # the spec a reembed is building, until it switches
DEFAULT_COLLECTION = "crp_facts"  # vectors.qdrant's


def spec_key(model_id: str) -> str:
    """The meta key of the ``--embedder`` spec that builds ``model_id``."""
    return SPEC_PREFIX + model_id


def model_slug(model_id: str) -> str:
    """A name part derived from a model id: its letters and digits, then a hash of the whole id."""
    readable = re.sub(r"[^a-z0-9]+", "_", model_id.lower()).strip("_")[:40]
    return f"{readable}_{hashlib.sha256(model_id.encode()).hexdigest()[:8]}"


def collection_spec(base: str, model_id: str, base_model: str | None) -> str:
    """The vector store spec of ``model_id``'s vectors: ``base`` itself for the fabric's first model
    (``base_model``, or any model while none is recorded), else a store named after the model: a
    sibling directory (``edge:``), a collection ``<collection>_<slug>`` (a Qdrant server)."""
    if base_model is None or model_id == base_model:
        return base
    slug = model_slug(model_id)
    if base.startswith("edge:"):
        return f"{base.rstrip('/')}-{slug}"
    if base in ("memory:", ":memory:"):
        return base  # a fresh in-memory index each time it is opened
    parts = urlsplit(base)
    query = parse_qs(parts.query)
    collection = query.get("collection", [DEFAULT_COLLECTION])[-1]
    query["collection"] = [f"{collection}_{slug}"]
    return urlunsplit(parts._replace(query=urlencode(query, doseq=True)))


@dataclass
class ModelView:
    """One model's embedder, vectors and candidate cache (the cache holds that model's vectors)."""

    model_id: str
    embedder: Embedder
    vectors: VectorIndex
    facts: FactCache

    @property
    def dim(self) -> int | None:
        return self.vectors.dim

    def close(self) -> None:
        close: Callable[[], None] | None = getattr(self.embedder, "close", None)
        if close is not None:
            close()
        self.vectors.close()


__all__ = [
    "BASE_MODEL_KEY",
    "REEMBED_TARGET_KEY",
    "SPEC_PREFIX",
    "ModelView",
    "collection_spec",
    "model_slug",
    "spec_key",
]
