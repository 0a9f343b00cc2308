"""``crp-stream refresh|quarantine|audit`` through ``crp_stream.cli.main`` on a prepared data dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run, run_json


def test_refresh_list_show_and_resolve(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    code, out, _ = run(capsys, data, "refresh", "list")
    assert code == 0
    header, line = out.splitlines()
    assert header.split()[:3] == ["REQUEST", "STATUS", "SOURCE"]
    assert "open" in line and "vendor_docs" in line and "1000 rps -> 250 rps" in line
    [req] = run_json(capsys, data, "refresh", "list")
    assert req["source"] == "vendor_docs" and req["status"] == "open" and req["corroborating_partitions"] == 1
    rid = req["request_id"]

    code, out, _ = run(capsys, data, "refresh", "show", rid[:8])
    assert code == 0 and rid in out and "observed_value" in out and "250 rps" in out

    code, out, _ = run(capsys, data, "refresh", "resolve", rid[:10], "--actor", "alice", "--reason", "ticket 42")
    assert code == 0
    assert out.strip() == (
        f"resolved refresh request {rid} (vendor_docs: billing api rate limit 1000 rps -> 250 rps) by alice"
    )
    assert run_json(capsys, data, "refresh", "show", rid)["resolved_by"] == "alice"
    code, out, _ = run(capsys, data, "refresh", "list", "--status", "open")
    assert out.strip() == "no refresh requests (open)"
    [audit] = run_json(capsys, data, "audit", "tail", "--type", "REFRESH_RESOLVED")
    assert audit["details"]["actor"] == "alice" and audit["details"]["reason"] == "ticket 42"

    code, _, err = run(capsys, data, "refresh", "resolve", rid, "--actor", "alice")
    assert code == 2 and err.strip() == f"crp-stream: refresh request {rid} is already resolved by alice"


def test_quarantine_confirm_and_release_round_trip(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    [cand] = run_json(capsys, data, "quarantine", "list")
    assert cand["source"] == "field_telemetry" and cand["status"] == "pending" and cand["value"] == "50 rps"
    cid = cand["candidate_id"]
    code, out, _ = run(capsys, data, "quarantine", "list")
    assert code == 0 and cid[:12] in out and "pending" in out

    code, out, _ = run(capsys, data, "quarantine", "confirm", cid[:12], "--actor", "bob")
    assert code == 0 and out.strip() == f"quarantined 1 fact(s) of field_telemetry (candidate {cid}) by bob"
    shown = run_json(capsys, data, "quarantine", "show", cid)
    assert shown["status"] == "confirmed" and shown["decided_by"] == "bob"
    assert [f["status"] for f in shown["facts"]] == ["quarantined"]
    assert [h["audit_type"] for h in shown["history"]] == ["POISONING_CANDIDATE", "FACT_QUARANTINED"]

    code, out, _ = run(capsys, data, "quarantine", "release", cid, "--actor", "carol", "--reason", "verified")
    assert code == 0 and out.startswith(f"released candidate {cid} of field_telemetry")
    shown = run_json(capsys, data, "quarantine", "show", cid)
    assert shown["status"] == "released" and [f["status"] for f in shown["facts"]] == ["active"]
    events = run_json(capsys, data, "audit", "tail", "--limit", "50")
    quarantined = [e for e in events if e["audit_type"] == "FACT_QUARANTINED"]
    released = [e for e in events if e["audit_type"] == "QUARANTINE_RELEASED"]
    assert quarantined[0]["details"]["actor"] == "bob"  # the history stays in the audit log
    assert released[0]["details"]["actor"] == "carol" and released[0]["details"]["reason"] == "verified"

    code, out, _ = run(capsys, data, "quarantine", "show", cid)
    assert code == 0 and "QUARANTINE_RELEASED" in out and "actor=carol" in out


def test_audit_tail_table_and_filters(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    code, out, _ = run(capsys, data, "audit", "tail")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["AT", "TYPE", "KEY", "SUMMARY"]
    types = {line.split()[2] for line in lines[1:]}
    assert {"STALE_HIGH_TRUST", "REFRESH_REQUESTED", "POISONING_CANDIDATE"} <= types
    assert len(run_json(capsys, data, "audit", "tail", "--limit", "1")) == 1
    only = run_json(capsys, data, "audit", "tail", "--type", "STALE_HIGH_TRUST")
    assert [a["audit_type"] for a in only] == ["STALE_HIGH_TRUST"]
    code, out, _ = run(capsys, data, "audit", "tail", "--type", "FACT_QUARANTINED")
    assert out.strip() == "no audit events of type FACT_QUARANTINED"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("refresh", "resolve", "abc"), "the following arguments are required: --actor"),
        (("refresh", "resolve", "ffff", "--actor", "a"), "no refresh request 'ffff'"),
        (("refresh", "show", "ffff"), "no refresh request 'ffff'"),
        (("quarantine", "confirm", "ffff", "--actor", "a"), "no quarantine candidate 'ffff'"),
        (("quarantine", "release", "ffff", "--actor", "a"), "no quarantine candidate or fact 'ffff'"),
        (("quarantine", "confirm", " ", "--actor", "a"), "ID: must not be empty"),
        (("refresh", "resolve", "abc", "--actor", " "), "--actor: must name who decides"),
        (("audit", "tail", "--type", "BOGUS"), "--type: 'BOGUS' is not an audit type"),
        (("audit", "tail", "--limit", "0"), "--limit: 0 must be at least 1"),
    ],
)
def test_bad_arguments_print_one_line(
    capsys: pytest.CaptureFixture[str], data: Path, args: tuple[str, ...], message: str
) -> None:
    code, out, err = run(capsys, data, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


def test_empty_data_dir(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, tmp_path, "quarantine", "list")
    assert code == 0 and out.strip() == "no quarantine candidates (all)"
    assert run_json(capsys, tmp_path, "refresh", "list") == []


def test_ids_resolve_by_unique_prefix() -> None:
    from crp_stream.cli.base import CliError
    from crp_stream.cli.tables import resolve_id as _resolve_id

    ids = ["abc123", "abd456", "xyz"]
    assert _resolve_id("x", "abc", ids) == "abc123"
    assert _resolve_id("x", "xyz", ids) == "xyz"
    assert _resolve_id("x", "q", ids) is None
    with pytest.raises(CliError, match="ambiguous: abc123, abd456"):
        _resolve_id("request", "ab", ids)
