"""Embedding ahead (``EmbeddingPrefetch``) changes when the model runs, never what comes out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crp_stream.config import Settings
from crp_stream.fabric.embedders.port import Embedder, HashingEmbedder
from crp_stream.fabric.embedders.prefetch import EmbeddingPrefetch
from crp_stream.runtime.embedded import LogRecord, open_runtime
from crp_stream.runtime.embedded.log import Append

T0 = 1_790_000_000_000_000
DOCS = [
    ("Avon Bridge", "The Avon Bridge opened in 1901. It spans the river Avon near the old mill."),
    ("Avon Bridge copy", "The Avon Bridge opened in 1877. It spans the river Avon near the old mill."),
    ("Mill", "The old mill was built in 1820. It ground wheat until 1950."),
    (None, "The river Avon floods in spring. The Avon Bridge was closed in 1990."),
]


class _Counting(HashingEmbedder):
    costly = True

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:  # type: ignore[override]
        self.calls.append(list(texts))
        return super().embed(texts)


def test_announced_texts_are_embedded_ahead_and_served_in_any_order() -> None:
    inner = _Counting()
    emb = EmbeddingPrefetch(inner)
    emb.announce(["a", "b"])
    emb.announce(["b", "c"])  # "b" is pending already: only "c" is a new job
    got = emb.embed(["c", "x", "a"])
    assert np.array_equal(got, HashingEmbedder().embed(["c", "x", "a"]))
    assert sorted(map(sorted, inner.calls)) == [["a", "b"], ["c"], ["x"]]  # "x" was not announced
    assert (emb.hits, emb.misses) == (2, 1)
    emb.forget()
    emb.embed(["b"])  # forgotten: embedded again, on this thread
    assert inner.calls[-1] == ["b"]
    emb.close()


def _run(tmp: Path, costly: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[str, bytes, int]], Embedder]:
    from crp_stream.fabric.embedders import port as embedders

    monkeypatch.setattr(embedders.OnnxMiniLMEmbedder, "costly", costly)
    rt = open_runtime(Settings(data_dir=tmp, embedder="default"), clock=lambda: T0 + 10**9)
    out: list[LogRecord] = []
    rt.on_output = out.append
    items = []
    for i, (title, text) in enumerate(DOCS):
        body = {"event_id": f"d{i}", "source": f"s{i % 2}", "source_type": "official", "text": text}
        if title:
            body["title"] = title
        items.append(Append(rt.fabric.settings.topic("crp.documents"), "k", json.dumps(body).encode(), ts_us=T0 + i))
    rt.log.append(items)
    rt.run_until_idle()
    emb = rt.fabric.embedder
    rt.fabric.close()
    rt.log.close()
    return [(r.topic, r.value, r.ts_us) for r in out], emb


def test_the_runtime_embeds_ahead_with_the_same_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ahead, emb = _run(tmp_path / "ahead", True, monkeypatch)
    plain, plain_emb = _run(tmp_path / "plain", False, monkeypatch)
    assert isinstance(emb, EmbeddingPrefetch) and not isinstance(plain_emb, EmbeddingPrefetch)
    assert emb.hits == sum(len(t.split(". ")) for _title, t in DOCS) and emb.misses == 0
    assert ahead == plain and any(b"FactRecorded" in v for _t, v, _ts in ahead)
