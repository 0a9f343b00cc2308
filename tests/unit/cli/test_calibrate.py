"""``crp-stream calibrate``: thresholds from the fabric's own similarities, printed, stored, used."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream import cli
from crp_stream.config import Settings
from crp_stream.core.calibration import Thresholds
from crp_stream.fabric.embedders.port import CALIBRATED_THRESHOLDS, DEFAULT_MODEL_ID
from crp_stream.fabric.fabric import thresholds_key
from crp_stream.runtime.embedded import open_fabric
from crp_stream.testing import replay as replay_records

DIM = 64
N_FACTS = 40
# every fact is 0.5 along axis 0 plus its own axis: each pair has cosine exactly 0.25 = the background
BACKGROUND = 0.25


def _vec(i: int) -> list[float]:
    v = np.zeros(DIM)
    v[0], v[1 + i] = 0.5, math.sqrt(0.75)
    return [float(x) for x in v]


def _fabric(tmp_path: Path, model: str, n: int = N_FACTS) -> Path:
    facts = [{"text": f"Fact number {i} stands alone", "embedding": _vec(i)} for i in range(n)]
    value = {"event_id": "d", "source": "docs", "source_type": "official", "embedding_model": model, "facts": facts}
    rec = ("crp.documents", "docs", 1_700_000_000_000_000, json.dumps(value).encode())
    lines = replay_records([rec], Settings(embedder=f"precomputed:{model}"), tmp_path)
    assert not any('"crp.deadletter"' in line for line in lines)
    return tmp_path


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], data: Path, model: str, *extra: str) -> dict[str, Any]:
    code, out, err = _cli(
        capsys, "calibrate", "--data", str(data), "--embedder", f"precomputed:{model}", "--json", *extra
    )
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def _thresholds(data: Path, model: str, **settings: Any) -> Thresholds:
    s = replace(Settings(embedder=f"precomputed:{model}", **settings), data_dir=data)
    fabric = open_fabric(s)
    try:
        return fabric.thresholds()
    finally:
        fabric.close()


def test_json_report_rescales_the_seed_thresholds_onto_the_background(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _fabric(tmp_path, "m")
    r = _json(capsys, data, "m")
    assert r["model"] == "m" and r["meta_key"] == "thresholds:m"
    assert r["sample"] == {
        "facts": N_FACTS,
        "facts_total": N_FACTS,
        "pairs": N_FACTS * (N_FACTS - 1) // 2,
        "background": BACKGROUND,
        "queries": 0,
        "query_background": None,
    }
    b = BACKGROUND
    assert r["calibrated"] == pytest.approx(
        {
            "min_relevance": b + 0.55 * (1 - b),
            "edge_threshold": b + 0.60 * (1 - b),
            "contradiction_threshold": b + 0.85 * (1 - b),
            "min_connector_relevance": b + 0.30 * (1 - b),
            "edge_k": 20,
        },
        abs=1e-4,
    )
    # nothing stored yet: the model has no calibration, so the seed defaults are in force
    assert r["stored"] is False
    assert (
        r["current"]
        == r["seed"]
        == {
            "min_relevance": 0.55,
            "edge_threshold": 0.6,
            "edge_k": 20,
            "contradiction_threshold": 0.85,
            "min_connector_relevance": 0.3,
        }
    )
    assert r["sources"]["min_relevance"] == "seed default"
    assert _thresholds(data, "m") == Thresholds()


def test_table_shows_seed_in_force_and_calibrated_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _fabric(tmp_path, "m")
    code, out, _ = _cli(capsys, "calibrate", "--data", str(data), "--embedder", "precomputed:m")
    assert code == 0
    assert "40 of 40 facts sampled, 780 pairs" in out
    assert "background (median fact-fact cosine): 0.2500" in out
    row = next(line for line in out.splitlines() if line.startswith("min_relevance"))
    assert row.split() == ["min_relevance", "0.5500", "0.5500", "seed", "default", "0.6625"]
    assert "not stored (--store saves it as meta thresholds:m)" in out


def test_store_saves_the_thresholds_and_the_fabric_uses_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _fabric(tmp_path, "m")
    r = _json(capsys, data, "m", "--store")
    assert r["stored"] is True
    assert r["current"]["min_relevance"] == pytest.approx(0.6625)
    assert set(r["sources"].values()) == {"stored", "setting"}
    fabric = open_fabric(replace(Settings(embedder="precomputed:m"), data_dir=data))
    try:
        with fabric.unit_of_work() as uow:
            saved = json.loads(uow.repo.get_meta(thresholds_key("m")) or "{}")
    finally:
        fabric.close()
    assert saved == {
        "contradiction_threshold": 0.8875,
        "edge_threshold": 0.7,
        "min_connector_relevance": 0.475,
        "min_relevance": 0.6625,
    }
    th = _thresholds(data, "m")
    assert (th.min_relevance, th.edge_threshold, th.contradiction_threshold, th.min_connector_relevance) == (
        0.6625,
        0.7,
        0.8875,
        0.475,
    )
    # explicit settings win over what is stored
    explicit = _thresholds(data, "m", min_relevance=0.4, contradiction_threshold=0.9)
    assert explicit.min_relevance == 0.4 and explicit.contradiction_threshold == 0.9
    assert explicit.edge_threshold == 0.7


def test_stored_values_win_over_the_shipped_calibration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = DEFAULT_MODEL_ID  # read with precomputed:<id>, so no model is loaded
    shipped = CALIBRATED_THRESHOLDS[model]
    data = _fabric(tmp_path, model)
    before = _thresholds(data, model)
    assert before.min_relevance == shipped["min_relevance"]
    assert before.edge_threshold == shipped["edge_threshold"]
    r = _json(capsys, data, model)
    assert r["sources"]["min_relevance"] == "shipped calibration"
    _json(capsys, data, model, "--store")
    after = _thresholds(data, model)
    assert after.min_relevance == pytest.approx(0.6625) and after.edge_threshold == pytest.approx(0.7)


def test_sample_is_the_first_ids_in_id_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _fabric(tmp_path, "m")
    a = _json(capsys, data, "m", "--sample", "10")
    b = _json(capsys, data, "m", "--sample", "10")
    assert a == b
    assert a["sample"]["facts"] == 10 and a["sample"]["facts_total"] == N_FACTS and a["sample"]["pairs"] == 45


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--sample", "1"), "--sample must be within 2..5000"),
        (("--query", "what is it"), "--query needs an embedder that embeds text"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needle: str
) -> None:
    data = _fabric(tmp_path, "m")
    code, out, err = _cli(capsys, "calibrate", "--data", str(data), "--embedder", "precomputed:m", *args)
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


def test_empty_fabric_and_wrong_embedder_are_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "calibrate", "--data", str(tmp_path / "empty"), "--embedder", "precomputed:m")
    assert code == 2 and "holds no facts" in err
    data = _fabric(tmp_path / "full", "m")
    code, _, err = _cli(capsys, "calibrate", "--data", str(data), "--embedder", "precomputed:other")
    assert code == 2 and "'m'" in err and "precomputed:m" in err


def test_one_fact_is_not_enough(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _fabric(tmp_path, "m", n=1)
    code, _, err = _cli(capsys, "calibrate", "--data", str(data), "--embedder", "precomputed:m")
    assert code == 2 and "at least 2 facts" in err


def test_queries_set_the_relevance_thresholds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With a text embedder, --query cosines against the sample drive min_relevance (hashing embedder)."""
    value = {
        "event_id": "d",
        "source": "docs",
        "source_type": "official",
        "text": "Pods get addresses. Services route traffic. Policies restrict flows. Nodes run pods.",
    }
    rec = ("crp.documents", "docs", 1_700_000_000_000_000, json.dumps(value).encode())
    replay_records([rec], Settings(embedder="hashing"), tmp_path)
    code, out, err = _cli(
        capsys,
        "calibrate",
        "--data",
        str(tmp_path),
        "--embedder",
        "hashing",
        "--json",
        "--query",
        "How do pods get addresses?",
        "--query",
        "   ",
    )
    assert code == 0, err
    r = json.loads(out)
    assert r["sample"]["queries"] == 1 and r["sample"]["query_background"] is not None
    qb = r["sample"]["query_background"]
    assert r["calibrated"]["min_relevance"] == pytest.approx(qb + 0.55 * (1 - qb), abs=1e-3)
