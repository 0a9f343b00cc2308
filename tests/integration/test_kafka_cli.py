"""The CLI against a real broker, over its SASL_SSL listener: ``topics check|create``, and ``publish``,
``tail``, ``status``, ``refresh`` and ``audit`` with ``--broker`` beside a real worker.

Every command runs as a process with only the secure listener's settings (the PLAINTEXT one is
never named): the security settings reach every client the CLI builds.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.support.kafka import OUTPUT_TOPICS, Kafka, WorkerProcess, unique_prefix
from tests.support.kafka_secure import secure_client, secure_env
from tests.support.services import fresh_postgres_url

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]
SAMPLE = Path(__file__).resolve().parents[2] / "ops" / "sample" / "sample.jsonl"


def crp(
    args: list[str], prefix: str, cwd: Path, mechanism: str = "scram-sha-512", **extra: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRP_") or k.startswith("CRP_TEST_")}
    listener = secure_env(mechanism)
    env.update(listener, CRP_TOPIC_PREFIX=prefix, **extra)
    done = subprocess.run(
        [sys.executable, "-m", "crp_stream", *args], env=env, capture_output=True, text=True, timeout=180, cwd=cwd
    )
    secrets = [listener[k] for k in ("CRP_KAFKA_SASL_PASSWORD",) if k in listener]
    if "CRP_KAFKA_OAUTH_TOKEN_FILE" in listener:
        secrets.append(Path(listener["CRP_KAFKA_OAUTH_TOKEN_FILE"]).read_text().strip())
    assert not [s for s in secrets if s in done.stdout + done.stderr]
    return done


def admin_run(coro_fn: object) -> object:
    async def go() -> object:
        admin = AIOKafkaAdminClient(**secure_client())
        await admin.start()
        try:
            return await coro_fn(admin)  # type: ignore[operator]
        finally:
            await admin.close()

    return asyncio.run(go())


def configs(names: list[str]) -> dict[str, dict[str, str]]:
    async def describe(admin: AIOKafkaAdminClient) -> dict[str, dict[str, str]]:
        wanted = [ConfigResource(ConfigResourceType.TOPIC, n, {"retention.ms": None}) for n in names]
        out: dict[str, dict[str, str]] = {}
        for resp in await admin.describe_configs(wanted):
            for res in resp.to_object()["resources"]:
                out[res["resource_name"]] = {e["config_names"]: e["config_value"] for e in res["config_entries"]}
        return out

    return admin_run(describe)  # type: ignore[return-value]


def test_topics_check_reports_what_breaks_the_rules_and_create_creates_the_rest(tmp_path: Path) -> None:
    prefix = unique_prefix("tc")

    async def precreate(admin: AIOKafkaAdminClient) -> None:  # as a broker default would: CreateTime, 7 days
        await admin.create_topics(
            [NewTopic(prefix + "documents", 2, 1, topic_configs={"message.timestamp.type": "CreateTime"})]
        )

    admin_run(precreate)
    check = crp(["topics", "check", "--json"], prefix, tmp_path)
    assert check.returncode == 1, check.stderr
    report = {t["topic"]: t for t in json.loads(check.stdout)["topics"]}
    docs = report[prefix + "documents"]["problems"]
    assert any("message.timestamp.type=CreateTime" in p for p in docs), docs
    assert any("retention 7d, must be infinite (the source of truth)" in p for p in docs), docs
    assert any("2 partitions, settings say 4" in p for p in docs), docs
    assert report[prefix + "facts"]["problems"] == ["missing (crp-stream topics create)"]

    made = crp(["topics", "create", "--derived-retention", "P30D", "--json"], prefix, tmp_path)
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)["created"]
    assert len(created) == 10 and prefix + "documents" not in created
    got = configs([prefix + t for t in ("telemetry", "window.reports", "operator.commands", "envelopes")])
    assert got[prefix + "telemetry"]["retention.ms"] == "-1"
    assert got[prefix + "window.reports"]["retention.ms"] == "-1"
    assert got[prefix + "operator.commands"]["retention.ms"] == "-1"
    assert got[prefix + "envelopes"]["retention.ms"] == str(30 * 86_400_000)

    again = crp(["topics", "check", "--derived-retention", "P30D"], prefix, tmp_path)
    assert again.returncode == 1
    bad = [line for line in again.stdout.splitlines() if line.startswith(prefix) and not line.endswith(" ok")]
    assert [line.split()[0] for line in bad] == [prefix + "documents"], again.stdout
    assert "1 of 11 topics break the rules" in again.stdout


@pytest.mark.parametrize("mechanism", ["scram-sha-256", "mtls", "oauthbearer"])
def test_topics_create_and_check_over_each_mechanism(tmp_path: Path, mechanism: str) -> None:
    """The CLI's admin client over SCRAM-SHA-256, a client certificate, an OAUTHBEARER token."""
    prefix = unique_prefix("tm")
    made = crp(["topics", "create", "--json"], prefix, tmp_path, mechanism)
    assert made.returncode == 0, made.stderr
    assert len(json.loads(made.stdout)["created"]) == 11
    check = crp(["topics", "check"], prefix, tmp_path, mechanism)
    assert check.returncode == 0, check.stdout + check.stderr
    rows = [line for line in check.stdout.splitlines() if line.startswith(prefix)]
    assert len(rows) == 11 and all(row.endswith(" ok") for row in rows), check.stdout


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """A worker on the SASL_SSL listener that has ingested the sample (refresh request, envelope)."""
    tmp = tmp_path_factory.mktemp("kafka-cli")
    prefix = unique_prefix("cli")
    db = fresh_postgres_url()
    env = secure_env()
    settings = {k: v for k, v in env.items() if k != "CRP_BROKER"}
    worker = WorkerProcess(tmp, prefix, db, partitions=2, broker=env["CRP_BROKER"], env=settings).start()
    kafka = Kafka(prefix, client=secure_client())
    try:
        worker.wait_ready()
        kafka.tap((*OUTPUT_TOPICS, "crp.operator.commands"))
        published = crp(["publish", str(SAMPLE)], prefix, tmp, CRP_PARTITIONS="2")
        assert published.returncode == 0 and "published 21 records" in published.stderr, published.stderr
        kafka.wait_for(lambda rs: any(r.topic == "crp.refresh.requests" for r in rs), 120, "the refresh request")
        kafka.wait_for(lambda rs: any(r.topic == "crp.envelopes" for r in rs), 120, "the envelope")
        yield SimpleNamespace(prefix=prefix, db=db, tmp=tmp, kafka=kafka, worker=worker)
    finally:
        worker.stop()
        kafka.close()


def test_tail_reads_the_topic_in_log_append_order(deployment: SimpleNamespace) -> None:
    d = deployment
    env = crp(["tail", "crp.envelopes", "--from-beginning"], d.prefix, d.tmp)
    assert env.returncode == 0, env.stderr
    [line] = env.stdout.splitlines()
    record = json.loads(line)
    assert record["topic"] == "crp.envelopes" and record["value"]["request_id"] == "sample-req-1"
    docs = crp(["tail", "crp.documents", "--limit", "3"], d.prefix, d.tmp)
    lines = [json.loads(x) for x in docs.stdout.splitlines()]
    assert len(lines) == 3 and [x["ts"] for x in lines] == sorted(x["ts"] for x in lines)
    assert lines[-2]["value"]["event_id"] == "sample-community-rate"
    assert (lines[-1]["key"], lines[-1]["value"]) == ("blog", "{not json")  # the last one, bytes as they are
    missing = crp(["tail", "crp.nosuch"], d.prefix, d.tmp)
    assert missing.returncode == 2 and missing.stderr.strip().endswith(f"no topic {d.prefix}nosuch")


def test_status_reads_the_workers_database_and_the_topics(deployment: SimpleNamespace) -> None:
    d = deployment
    st = crp(["status", "--json", "--database", d.db], d.prefix, d.tmp)
    assert st.returncode == 0, st.stderr
    s = json.loads(st.stdout)
    assert s["topics"]["crp.documents"] == 8 and s["topics"]["crp.telemetry"] == 12
    assert s["facts"]["field_telemetry"]["active"] == 12 and "vendor_docs" in s["facts"]
    assert s["consumer_offsets"]["ingest"]["crp.documents"] >= 0
    no_db = crp(["status"], d.prefix, d.tmp)
    assert no_db.returncode == 2 and "give the workers' database" in no_db.stderr


def test_refresh_decision_goes_through_the_operator_worker_and_audit_reads_the_topic(
    deployment: SimpleNamespace,
) -> None:
    d = deployment
    listed = crp(["refresh", "list", "--json", "--database", d.db], d.prefix, d.tmp)
    assert listed.returncode == 0, listed.stderr
    [req] = json.loads(listed.stdout)
    assert req["source"] == "vendor_docs" and req["status"] == "open"
    acked = crp(
        ["refresh", "acknowledge", req["request_id"][:12], "--actor", "alice", "--reason", "on it", "--database", d.db],
        d.prefix,
        d.tmp,
    )
    assert acked.returncode == 0, acked.stderr
    assert acked.stdout.startswith(f"acknowledged refresh request {req['request_id']} (vendor_docs) by alice")
    audit = crp(["audit", "tail", "--json", "--limit", "50"], d.prefix, d.tmp)
    assert audit.returncode == 0, audit.stderr
    rows = json.loads(audit.stdout)
    kinds = [r["audit_type"] for r in rows]
    assert "STALE_HIGH_TRUST" in kinds and kinds[-1] == "REFRESH_ACKNOWLEDGED", kinds
    assert rows[-1]["details"]["actor"] == "alice"
    only = crp(["audit", "tail", "--json", "--type", "REFRESH_ACKNOWLEDGED"], d.prefix, d.tmp)
    assert [r["audit_type"] for r in json.loads(only.stdout)] == ["REFRESH_ACKNOWLEDGED"]
    # the topics the worker created keep the source of truth forever and are LogAppendTime
    check = crp(["topics", "check", "--partitions", "2"], d.prefix, d.tmp)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_command_the_operator_worker_refuses_fails_with_its_reason(deployment: SimpleNamespace) -> None:
    """Past the CLI's own checks (an id it found in the database), the worker may still refuse a command:
    the CLI waits for the dead letter and prints the handler's reason, exit 2."""
    from crp_stream.cli import kafka_ops
    from crp_stream.cli.base import CliError
    from crp_stream.config import load_settings

    d = deployment
    settings = load_settings({"database": d.db}, {**secure_env(), "CRP_TOPIC_PREFIX": d.prefix})
    ns = SimpleNamespace(actor="bob", reason="typo")
    with pytest.raises(CliError, match=r"resolve_refresh no-such-request: rejected: .*no-such-request"):
        kafka_ops.publish_command(ns, settings, "resolve_refresh", "no-such-request", "vendor_docs")  # type: ignore[arg-type]
