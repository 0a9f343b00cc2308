"""Local models beyond the default: ``onnx:PATH`` and ``sentence-transformers:NAME`` (docs/embedder.md).

- ``onnx:PATH``: a sentence-embedding model exported to ONNX, run like the default embedder (the same
  tokenizer handling, masked mean pooling unless the model pools itself, L2 normalisation). PATH is a
  directory with ``model.onnx`` (or ``onnx/model.onnx``) and ``tokenizer.json``, or the ``.onnx`` file
  with ``tokenizer.json`` beside it. The model id is ``onnx:<name>@<first 12 hex of the model's
  sha256>``: another file is another vector space even under the same directory name.
- ``sentence-transformers:NAME``: the optional extra ``crp-stream[sentence-transformers]`` (it brings
  torch). Without it, one line says what to install. The model loads as sentence-transformers loads it
  (its cache, or the Hugging Face hub unless ``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import hashlib
import importlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crp_stream.config import ConfigError
from crp_stream.fabric.embedders.port import Embedder, EmbedderError, OnnxMiniLMEmbedder, _check_texts, _normalise_rows

PROBE_TEXT = "dimension probe"
ST_EXTRA_HINT = "pip install 'crp-stream[sentence-transformers]'"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def onnx_files(spec: str) -> tuple[Path, Path]:
    """PATH of ``onnx:PATH`` -> (model.onnx, tokenizer.json). Raises EmbedderError naming what is missing."""
    path = Path(spec).expanduser()
    if path.is_file():
        model, folder = path, path.parent
    elif path.is_dir():
        found = [p for p in (path / "model.onnx", path / "onnx" / "model.onnx") if p.is_file()]
        if not found:
            raise EmbedderError(f"embedder onnx:{spec}: no model.onnx (or onnx/model.onnx) in {path}")
        model, folder = found[0], path
    else:
        raise EmbedderError(f"embedder onnx:{spec}: {path} is neither a directory nor an .onnx file")
    tokenizer = next((p for p in (folder / "tokenizer.json", model.parent / "tokenizer.json") if p.is_file()), None)
    if tokenizer is None:
        raise EmbedderError(f"embedder onnx:{spec}: no tokenizer.json in {folder}")
    return model, tokenizer


class OnnxDirEmbedder(OnnxMiniLMEmbedder):
    """``onnx:PATH``: the default embedder's ONNX code on a model the user names."""

    def __init__(self, spec: str, threads: int | None = None, batch_size: int = 16) -> None:
        super().__init__(threads=threads, batch_size=batch_size)
        self.model_path, self.tokenizer_path = onnx_files(spec)
        name = self.model_path.parent.name if self.model_path.name == "model.onnx" else self.model_path.stem
        if name == "onnx":  # a hub layout: <model>/onnx/model.onnx
            name = self.model_path.parent.parent.name
        self.model_id = f"onnx:{name}@{_sha256(self.model_path)[:12]}"
        self._dim: int | None = None

    @property
    def dim(self) -> int:  # type: ignore[override]  # the model's output fixes it
        if self._dim is None:
            try:
                self.load()
            except EmbedderError as exc:
                raise ConfigError(str(exc)) from None
        assert self._dim is not None
        return self._dim

    def _files(self) -> tuple[Path, Path]:
        return self.model_path, self.tokenizer_path

    def load(self) -> None:
        try:
            super().load()
        except EmbedderError:
            raise
        except Exception as exc:  # onnxruntime's own errors: a file that is not a usable model
            raise EmbedderError(f"embedder {self.model_id}: {self.model_path} does not load ({exc})") from None
        if self._dim is None:
            ids = np.asarray([self._tokenizer.encode(PROBE_TEXT).ids], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
            self._dim = int(hidden.shape[-1])


class SentenceTransformersEmbedder(Embedder):
    """``sentence-transformers:NAME`` through the optional extra; normalised float32 rows."""

    costly = True

    def __init__(self, name: str) -> None:
        if not name.strip():
            raise EmbedderError(
                "embedder sentence-transformers: needs a model name, e.g. sentence-transformers:all-MiniLM-L6-v2"
            )
        try:
            self._module: Any = importlib.import_module("sentence_transformers")
        except ImportError:
            raise EmbedderError(
                f"embedder sentence-transformers:{name} needs the optional extra ({ST_EXTRA_HINT})"
            ) from None
        self.name = name
        self.model_id = f"sentence-transformers:{name}"
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        if self._model is not None:
            return
        with self._lock:
            if self._model is None:
                try:
                    self._model = self._module.SentenceTransformer(self.name, device="cpu")
                except Exception as exc:  # a name the hub does not know, no network, a broken cache
                    raise ConfigError(f"embedder {self.model_id}: the model does not load ({exc})") from None

    @property
    def dim(self) -> int:  # type: ignore[override]
        self.load()
        return int(self._model.get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        rows = self._model.encode(items, convert_to_numpy=True, normalize_embeddings=False)
        return _normalise_rows(np.asarray(rows, dtype=np.float64))


__all__ = ["OnnxDirEmbedder", "SentenceTransformersEmbedder", "onnx_files"]
