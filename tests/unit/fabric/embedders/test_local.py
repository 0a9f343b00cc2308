"""``onnx:PATH`` on the default model's own files, and ``sentence-transformers:NAME`` without its extra."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from crp_stream.config import ConfigError
from crp_stream.fabric.embedders import port as embedders
from crp_stream.fabric.embedders.local import OnnxDirEmbedder
from crp_stream.fabric.embedders.port import EmbedderError, make_embedder

TEXTS = ["The billing API allows 1000 requests per second.", "Paris is the capital of France.", ""]


def _default_files() -> tuple[Path, Path]:
    return embedders.OnnxMiniLMEmbedder()._files()


def test_onnx_path_runs_the_default_models_files_to_the_same_vectors(tmp_path: Path) -> None:
    model, tokenizer = _default_files()
    folder = tmp_path / "minilm-int8"
    folder.mkdir()
    (folder / "model.onnx").symlink_to(model)
    (folder / "tokenizer.json").symlink_to(tokenizer)
    emb = make_embedder(f"onnx:{folder}")
    assert isinstance(emb, OnnxDirEmbedder)
    assert emb.model_id == "onnx:minilm-int8@8199be6f699a"  # the pinned file's sha256, first 12 hex
    assert emb.dim == 384
    got = emb.embed(TEXTS)
    assert got.dtype == np.float32 and got.shape == (3, 384)
    assert np.array_equal(got, make_embedder("default").embed(TEXTS))


def test_onnx_path_may_name_the_file(tmp_path: Path) -> None:
    model, tokenizer = _default_files()
    (tmp_path / "tokenizer.json").symlink_to(tokenizer)
    (tmp_path / "mini.onnx").symlink_to(model)
    emb = make_embedder(f"onnx:{tmp_path / 'mini.onnx'}")
    assert emb.model_id == "onnx:mini@8199be6f699a"


def test_onnx_path_errors_name_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match=r"neither a directory nor an \.onnx file"):
        make_embedder(f"onnx:{tmp_path / 'nope'}")
    with pytest.raises(EmbedderError, match=r"no model\.onnx"):
        make_embedder(f"onnx:{tmp_path}")
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(EmbedderError, match=r"no tokenizer\.json"):
        make_embedder(f"onnx:{tmp_path}")
    (tmp_path / "tokenizer.json").symlink_to(_default_files()[1])
    broken = make_embedder(f"onnx:{tmp_path}")
    with pytest.raises(ConfigError, match="does not load"):
        _ = broken.dim
    with pytest.raises(EmbedderError, match="needs a path"):
        make_embedder("onnx:")


def test_sentence_transformers_without_the_extra_is_one_line() -> None:
    assert importlib.util.find_spec("sentence_transformers") is None  # the test venv has no torch
    with pytest.raises(EmbedderError) as exc:
        make_embedder("sentence-transformers:all-MiniLM-L6-v2")
    msg = str(exc.value)
    assert msg == (
        "embedder sentence-transformers:all-MiniLM-L6-v2 needs the optional extra "
        "(pip install 'crp-stream[sentence-transformers]')"
    )


def test_the_cli_prints_one_line_for_a_missing_extra(tmp_path: Path) -> None:
    cmd = [str(Path(sys.executable).parent / "crp-stream"), "run", "--sample", "--until-idle", "--data", str(tmp_path)]
    done = subprocess.run(
        [*cmd, "--embedder", "sentence-transformers:x"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "crp-stream: embedder sentence-transformers:x needs the optional extra "
        "(pip install 'crp-stream[sentence-transformers]')"
    ]
