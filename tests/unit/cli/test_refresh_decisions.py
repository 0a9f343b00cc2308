"""``crp-stream refresh acknowledge|reject`` on the prepared data dir (tests/support/cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run, run_json


def test_acknowledge_keeps_it_open_and_reject_closes_it(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    [req] = run_json(capsys, data, "refresh", "list")
    rid = req["request_id"]
    code, out, err = run(capsys, data, "refresh", "acknowledge", rid[:8], "--actor", "hana", "--reason", "on it")
    assert code == 0, err
    assert out.strip() == f"acknowledged refresh request {rid} (vendor_docs) by hana"
    assert run_json(capsys, data, "refresh", "show", rid)["status"] == "open"
    [ack] = run_json(capsys, data, "audit", "tail", "--type", "REFRESH_ACKNOWLEDGED")
    assert ack["details"]["actor"] == "hana" and ack["details"]["reason"] == "on it"

    done = run_json(capsys, data, "refresh", "reject", rid, "--actor", "ivan")
    assert done == {"command": "reject_refresh", "request_id": rid, "actor": "ivan", "status": "rejected"}
    [row] = run_json(capsys, data, "refresh", "list", "--status", "rejected")
    assert (row["request_id"], row["resolved_by"]) == (rid, "ivan")
    [rej] = run_json(capsys, data, "audit", "tail", "--type", "REFRESH_REJECTED")
    assert rej["details"]["fact_ids"]  # the vendor's stale fact is active again

    code, _out, err = run(capsys, data, "refresh", "acknowledge", rid, "--actor", "hana")
    assert code == 2 and err.strip() == f"crp-stream: refresh request {rid} is already rejected by ivan"
