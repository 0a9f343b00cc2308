"""An uncalibrated model gets the seeds' thresholds until ``calibrate --store`` saves its own, and
``crp-stream status`` shows the values in force and where each comes from."""

from __future__ import annotations

import io
import json
from pathlib import Path

from crp_stream.cli.logcmds import print_status, status_dict
from crp_stream.config import Settings
from crp_stream.fabric.fabric import Fabric, thresholds_key
from crp_stream.testing import Pipeline

T0 = 1_790_000_000_000_000
DOC = {"event_id": "d1", "source": "s", "source_type": "official", "text": "The API allows 1000 requests per second."}


def _thresholds(p: Pipeline) -> dict[str, dict[str, object]]:
    th = status_dict(p.fabric, p.log, p.settings)["thresholds"]
    assert isinstance(th, dict)
    return th


def test_an_uncalibrated_model_gets_the_seeds_then_its_stored_calibration(tmp_path: Path) -> None:
    with Pipeline.fresh(tmp_path, embedder="hashing") as p:
        p.publish("crp.documents", "s", DOC, ts_us=T0)
        th = _thresholds(p)
        assert th["min_relevance"] == {"value": 0.55, "from": "seed"}
        assert th["edge_threshold"] == {"value": 0.60, "from": "seed"}
        assert th["contradiction_threshold"] == {"value": 0.85, "from": "seed"}
        with p.uow() as uow:
            uow.repo.set_meta(thresholds_key("hashing-384"), json.dumps({"min_relevance": 0.2, "edge_threshold": 0.3}))
        assert p.fabric.thresholds().min_relevance == 0.55  # cached per Fabric: a restart picks it up
    settings = Settings(data_dir=tmp_path, embedder="hashing", contradiction_threshold=0.7)
    fabric = Fabric(settings)
    try:
        sources = fabric.threshold_sources()
        assert sources["min_relevance"] == (0.2, "stored")
        assert sources["edge_threshold"] == (0.3, "stored")
        assert sources["contradiction_threshold"] == (0.7, "setting")
        assert sources["min_connector_relevance"] == (0.30, "seed")
        th = fabric.thresholds()
        assert (th.min_relevance, th.edge_threshold, th.contradiction_threshold) == (0.2, 0.3, 0.7)
    finally:
        fabric.close()


def test_status_prints_the_thresholds_of_the_fabrics_model(tmp_path: Path) -> None:
    with Pipeline.fresh(tmp_path, embedder="hashing") as p:
        p.publish("crp.documents", "s", DOC, ts_us=T0)
        out = io.StringIO()
        print_status(p.fabric, p.log, p.settings, out=out)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("thresholds:"))
    assert line == (
        "thresholds: min_relevance=0.55 (seed) edge_threshold=0.60 (seed) "
        "contradiction_threshold=0.85 (seed) min_connector_relevance=0.30 (seed)"
    )
    # the default model's shipped calibration, shown as such (an empty fabric: the embedder's model)
    with Pipeline.fresh(tmp_path / "empty") as p2:
        th = _thresholds(p2)
    assert th["min_relevance"] == {"value": 0.30, "from": "calibrated"}
    assert th["contradiction_threshold"] == {"value": 0.65, "from": "calibrated"}
