"""Operator commands act on their own tenant's data only: a command of one tenant (or of the default
tenant) naming another tenant's refresh request, candidate or fact is dead-lettered as if the target
did not exist, and touches nothing; the CLI names the target's tenant in the command it publishes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from crp_stream import cli
from crp_stream.config import Settings
from crp_stream.core.tenants import command_reaches
from crp_stream.runtime.embedded import EmbeddedLog, system_clock
from crp_stream.testing import Pipeline
from tests.integration.test_tenant_trust import incidents
from tests.support.arbiter import NOW_US, TRUST


def rows(p: Pipeline, sql: str) -> list[Any]:
    with p.fabric.engine.connect() as conn:
        return list(conn.execute(text(sql)))


def command(tenant: str | None, command_id: str, name: str, target: str) -> dict[str, Any]:
    value = {"command_id": command_id, "command": name, "target_id": target, "actor": "ops"}
    return value if tenant is None else {**value, "tenant": tenant}


def requests_by_tenant(p: Pipeline) -> dict[str, str]:
    owners = dict(rows(p, "SELECT DISTINCT claim_key, tenant FROM facts WHERE claim_key IS NOT NULL"))
    return {owners[key]: rid for rid, key in rows(p, "SELECT request_id, claim_key FROM refresh_requests")}


def test_the_rule() -> None:
    assert command_reaches("acme", "acme") and command_reaches(None, "default") and command_reaches(None, None)
    assert not command_reaches("acme", "globex") and not command_reaches(None, "acme")
    assert not command_reaches("acme", None)


@pytest.fixture
def pipe(tmp_path: Path) -> Any:
    with Pipeline(Settings(data_dir=tmp_path / "d", embedder="hashing", trust=dict(TRUST))) as p:
        p.feed(incidents(("acme", "globex")))
        yield p


def test_a_command_never_reaches_another_tenants_request(pipe: Pipeline) -> None:
    req = requests_by_tenant(pipe)
    assert set(req) == {"acme", "globex"}
    ts = NOW_US + 1_000_000
    for i, (tenant, name) in enumerate(
        (
            (None, "resolve_refresh"),
            ("acme", "resolve_refresh"),
            ("acme", "reject_refresh"),
            ("acme", "acknowledge_refresh"),
        )
    ):
        out = pipe.publish("crp.operator.commands", "x", command(tenant, f"c{i}", name, req["globex"]), ts_us=ts + i)
        dead = [json.loads(r.value) for r in out if r.topic.endswith("deadletter")]
        suffix = "" if tenant is None else f" in tenant {tenant}"
        assert [d["reason"] for d in dead] == [f"target_id: no refresh request {req['globex']!r}{suffix}"]
    assert rows(pipe, "SELECT status FROM refresh_requests ORDER BY request_id") == [("open",), ("open",)]
    assert [
        a
        for a in pipe.out("crp.audit")
        if a["audit_type"].startswith("REFRESH_") and a["audit_type"] != "REFRESH_REQUESTED"
    ] == []
    # its own tenant's command applies
    pipe.publish("crp.operator.commands", "x", command("globex", "ok", "resolve_refresh", req["globex"]), ts_us=ts + 10)
    status = dict(rows(pipe, "SELECT request_id, status FROM refresh_requests"))
    assert status == {req["globex"]: "resolved", req["acme"]: "open"}


def test_release_of_another_tenants_fact_is_refused(pipe: Pipeline) -> None:
    (fact,) = rows(pipe, "SELECT fact_id FROM facts WHERE tenant = 'globex' LIMIT 1")[0]
    out = pipe.publish(
        "crp.operator.commands", "x", command("acme", "r1", "release_quarantine", fact), ts_us=NOW_US + 5
    )
    dead = [json.loads(r.value)["reason"] for r in out if r.topic.endswith("deadletter")]
    assert dead == [f"target_id: no quarantine candidate or fact {fact!r} in tenant acme"]


def test_the_cli_names_the_targets_tenant(pipe: Pipeline, capsys: pytest.CaptureFixture[str]) -> None:
    req = requests_by_tenant(pipe)
    data = str(pipe.settings.data_dir)
    pipe.close()
    args = ["refresh", "resolve", req["acme"], "--actor", "ops", "--data", data, "--embedder", "hashing"]
    assert cli.main(args) == 0, capsys.readouterr().err
    settings = Settings(data_dir=Path(data), embedder="hashing", trust=dict(TRUST))
    log = EmbeddedLog(settings.log_path, system_clock)
    try:
        cmds = [json.loads(r.value) for r in log.iter_topic(settings.topic("crp.operator.commands"), 0)]
    finally:
        log.close()
    with Pipeline(settings) as p:
        status = dict(rows(p, "SELECT request_id, status FROM refresh_requests"))
    assert status == {req["acme"]: "resolved", req["globex"]: "open"}
    assert [(c["tenant"], c["target_id"]) for c in cmds] == [("acme", req["acme"])]
