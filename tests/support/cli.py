"""The operator CLI's prepared data dir (a stale-high-trust claim and a poisoning candidate) and how to
run a command against it; fixtures loaded via ``pytest_plugins``."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from crp_stream.cli import main
from crp_stream.config import Settings
from crp_stream.processors.base import dt_to_us
from crp_stream.testing import ManualClock, Pipeline

DAY = 86_400 * 1_000_000
NOW = dt_to_us(datetime(2026, 11, 13, tzinfo=UTC))
TRUST = {"vendor_docs": 0.9, "field_telemetry": 0.4, "community_notes": 0.2}


def _doc(source: str, source_type: str, eid: str, subject: str, value: str) -> dict[str, Any]:
    return {
        "event_id": eid,
        "source": source,
        "source_type": source_type,
        "document_id": eid,
        "facts": [
            {
                "text": f"The {subject} rate limit is {value} rps.",
                "subject": subject,
                "attribute": "rate limit",
                "value": value,
                "unit": "rps",
            }
        ],
    }


def _tele(eid: str, subject: str, value: str, at: int) -> dict[str, Any]:
    return {
        "event_id": eid,
        "source": "field_telemetry",
        "subject": subject,
        "attribute": "rate limit",
        "value": value,
        "unit": "rps",
        "observed_at": datetime.fromtimestamp(at / 1e6, tz=UTC).isoformat(),
    }


def _prepare(data: Path) -> None:
    """A stale-high-trust claim ("billing api") and a poisoning candidate ("search api")."""
    inputs = [
        ("crp.documents", _doc("vendor_docs", "official", "v-billing", "billing api", "1000"), NOW - 90 * DAY),
        ("crp.telemetry", _tele("t-billing", "billing api", "250", NOW - 5 * DAY), NOW - 5 * DAY),
        ("crp.documents", _doc("community_notes", "community", "c-billing", "billing api", "250"), NOW - 4 * DAY),
        ("crp.telemetry", _tele("t-search", "search api", "50", NOW - 3 * DAY), NOW - 3 * DAY),
        ("crp.documents", _doc("vendor_docs", "official", "v-search", "search api", "10"), NOW - 2 * DAY),
    ]
    # outputs are appended at the time of the input that caused them, as in replay
    with Pipeline(Settings(data_dir=data, embedder="hashing", trust=TRUST), clock=ManualClock()) as p:
        for topic, value, ts in inputs:
            p.publish(topic, value["source"], value, ts_us=ts)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("prepared")
    _prepare(data)
    return data


@pytest.fixture
def data(prepared: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(prepared, target)
    return target


def run(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> tuple[int, str, str]:
    code = main([*args, "--data", str(data), "--embedder", "hashing"])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> Any:
    code, out, err = run(capsys, data, *args, "--json")
    assert code == 0, err
    return json.loads(out)
