"""Embedding ahead of the pipeline: the model runs on a background thread while the handlers work.

With live embedding the model is the bound (the aim: the pipeline adds at most 10% on top
of it). Run one after the other, a document's model time and its pipeline time (edges, arbiter, SQL)
add up; announced ahead, the next documents' sentences are embedded on a second core while the
current document is handled, so the pipeline mostly hides behind the model.

A text's vector does not depend on the batch it is embedded in (``OnnxMiniLMEmbedder``: padding is
masked; tested), so a vector computed ahead is the one ingest would have computed itself: outputs
and replays stay byte-identical. A text that was not announced (or was announced twice and used
once) is embedded on the caller's thread, as without this wrapper.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from crp_stream.fabric.embedders.port import Embedder


class EmbeddingPrefetch(Embedder):
    """``inner`` with ``announce``: texts embedded ahead, one background job per announcement."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.requires_vectors = inner.requires_vectors
        self.costly = inner.costly
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="crp-embed")
        self._pending: dict[str, tuple[Future[np.ndarray], int]] = {}
        self.hits = 0
        self.misses = 0

    def announce(self, texts: Sequence[str]) -> None:
        """Start embedding ``texts`` (those not already pending) in the background, in one job."""
        new = [t for t in dict.fromkeys(texts) if t not in self._pending]
        if not new:
            return
        job = self._pool.submit(self.inner.embed, new)
        for i, text in enumerate(new):
            self._pending[text] = (job, i)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = list(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        missing: list[int] = []
        for i, text in enumerate(items):
            found = self._pending.pop(text, None) if isinstance(text, str) else None
            if found is None:
                missing.append(i)
                continue
            job, row = found
            out[i] = job.result()[row]  # an embedder error surfaces here, as from a direct call
        self.hits += len(items) - len(missing)
        self.misses += len(missing)
        if missing:
            out[missing] = self.inner.embed([items[i] for i in missing])
        return out

    def pending(self) -> int:
        """Texts announced and not taken yet."""
        return len(self._pending)

    def forget(self) -> None:
        """Drop what was announced and not used (a record dead-lettered, a batch rolled back): bounded."""
        self._pending.clear()

    def close(self) -> None:
        self._pending.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)
        inner_close = getattr(self.inner, "close", None)
        if inner_close is not None:
            inner_close()

    def __getattr__(self, name: str) -> Any:
        # the inner embedder's other parts (``validate`` of precomputed vectors, ``load``...)
        return getattr(self.inner, name)


__all__ = ["EmbeddingPrefetch"]
