"""``crp_stream.client`` on the real broker's SASL_SSL listener with a real worker: publish a document
and telemetry, ask for a window and get its typed envelope, a rejected request, a window report,
the audit events; the async client; bad input and bad credentials before anything is produced; a
sealed document and observation whose text the broker's files never hold, served all the same."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from crp_stream.client import AsyncClient, Client, Envelope, RequestRejected
from crp_stream.config import ConfigError, load_settings
from crp_stream.runtime.kafka.topics import create_topics
from tests.integration.test_kafka_sealed_forget import files_holding
from tests.support.kafka import Kafka, WorkerProcess, unique_prefix
from tests.support.kafka_secure import secure_client, secure_env
from tests.support.services import fresh_postgres_url

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]
README = Path(__file__).resolve().parents[2] / "README.md"
SEALED_SENTENCE = "The vault door code of building Tamarack is 90210."
SEALED_OBSERVATION = "Sensor Juniper-7 reported the vault door open at night."
PLAIN_SENTENCE = "The lobby of building Tamarack opens at 7 am."


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    tmp = tmp_path_factory.mktemp("client")
    prefix = unique_prefix("cl")
    env = secure_env()
    settings = {k: v for k, v in env.items() if k != "CRP_BROKER"}
    worker = WorkerProcess(tmp, prefix, fresh_postgres_url(), partitions=2, broker=env["CRP_BROKER"], env=settings)
    worker.start()
    try:
        worker.wait_ready()
        yield SimpleNamespace(prefix=prefix, env={**env, "CRP_TOPIC_PREFIX": prefix}, worker=worker)
    finally:
        worker.stop()


def test_a_first_script_publishes_and_gets_its_envelope(
    deployment: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in deployment.env.items():  # as a service's environment would hold them
        monkeypatch.setenv(name, value)
    with Client() as crp:
        doc = crp.publish_document(
            "vendor_docs",
            "The billing API allows 1000 requests per second. Its burst limit is 1500 requests.",
            source_type="official",
        )
        tel = crp.publish_telemetry("field_telemetry", "billing API", "p99 latency", 120, unit="ms")
        assert doc.topic == "crp.documents" and doc.epoch <= tel.epoch
        envelope = crp.request_window(
            "client-s1",
            "What are the billing API's rate limit and latency?",
            sub_queries=["billing API requests per second", "billing API p99 latency"],
            timeout=60,
        )
    assert isinstance(envelope, Envelope)
    assert envelope.session_id == "client-s1" and envelope.window == 1 and envelope.status == "in-progress"
    texts = [f.text for f in envelope.facts]
    assert any("1000 requests per second" in t for t in texts), texts
    assert "billing API p99 latency is 120 ms" in texts, texts  # published just before: the barrier waited for it
    assert float(envelope.headers["CRP-Context-Coverage-Score"]) > 0


def test_a_rejected_request_raises_with_the_workers_reason_and_reports_open_the_next_window(
    deployment: SimpleNamespace,
) -> None:
    with Client(load_settings({}, deployment.env)) as crp:
        crp.publish_document(
            "etcd_docs",
            "The etcd client port is 2379. The etcd peer port is 2380. Its metrics port is 2381.",
            document_id="etcd-ports",
        )
        first = crp.request_window("client-s2", "etcd ports", sub_queries=["etcd client port", "etcd peer port"])
        assert first.window == 1 and first.status == "in-progress", first
        with pytest.raises(RequestRejected) as info:
            crp.request_window("client-s2", "etcd ports", window=2, timeout=60)
        assert "has not fanned in" in info.value.reason
        crp.report_window(
            "client-s2",
            1,
            completeness=0.4,
            output_text="The etcd client port is 2379.",
            addressed=[{"id": "q1", "depth": 0.8}],
        )
        second = crp.request_window("client-s2", "etcd ports", window=2, timeout=60)
        assert second.window == 2 and second.request_id != first.request_id
        rejected = [
            a for a in crp.audit(audit_type="EVENT_REJECTED") if a.details.get("topic", "").endswith("window.requests")
        ]
    assert len(rejected) == 1 and "has not fanned in" in rejected[0].details["reason"]


def test_the_async_client(deployment: SimpleNamespace) -> None:
    async def go() -> tuple[Envelope, list[str]]:
        async with AsyncClient(load_settings({}, deployment.env)) as crp:
            await crp.publish_document(
                "etcd_docs",
                facts=[{"text": "The etcd snapshot count is 10000.", "subject": "etcd", "attribute": "snapshot count"}],
            )
            envelope = await crp.request_window("client-s3", "What is the etcd snapshot count?", timeout=60)
            kinds = [a.audit_type async for a in crp.audit()]
        return envelope, kinds

    envelope, kinds = asyncio.run(go())
    assert any("snapshot count is 10000" in f.text for f in envelope.facts)
    assert "EVENT_REJECTED" in kinds  # the audit of the whole deployment, from the beginning


def test_bad_input_bad_credentials_and_no_worker(deployment: SimpleNamespace, tmp_path: Path) -> None:
    crp = Client(load_settings({}, deployment.env))
    try:
        with pytest.raises(ValueError, match=r"publish_telemetry: .*value"):
            crp.publish_telemetry("probe", "etcd", "latency", None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="publish_document: "):
            crp.publish_document("vendor_docs")  # neither text nor facts
    finally:
        crp.close()
    wrong = load_settings({}, {**deployment.env, "CRP_KAFKA_SASL_PASSWORD": "not-the-password"})
    with pytest.raises(ConfigError, match="refused authentication as 'crp'"), Client(wrong):
        pass
    with pytest.raises(ConfigError, match="broker: set CRP_BROKER"):
        Client(load_settings({}, {}))
    idle = load_settings({}, {**deployment.env, "CRP_TOPIC_PREFIX": unique_prefix("clidle")})
    asyncio.run(create_topics(idle))  # topics, but no worker reads them
    with Client(idle) as crp, pytest.raises(TimeoutError, match="no envelope for window request"):
        crp.request_window("nobody", "is anyone there?", timeout=3)


def test_the_readmes_first_script_runs_as_written(deployment: SimpleNamespace, tmp_path: Path) -> None:
    text = README.read_text()
    section = text[text.index("### From a service: `crp_stream.client`") :]
    script = re.search(r"```python\n(.*?)```", section, re.S)
    assert script is not None
    (tmp_path / "first.py").write_text(script.group(1))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRP_") or k.startswith("CRP_TEST_")}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "first.py")],
        env={**env, **deployment.env},
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any("billing API rate limit is 250 rps" in line for line in lines), done.stdout
    assert any(line.startswith("in-progress ") for line in lines), done.stdout  # status and coverage
    assert deployment.env["CRP_KAFKA_SASL_PASSWORD"] not in done.stdout + done.stderr


def test_sealed_publishes_leave_no_plaintext_on_the_broker_and_are_served(deployment: SimpleNamespace) -> None:
    prefix = deployment.prefix
    with Client(load_settings({}, deployment.env), database=deployment.worker.database) as crp:
        doc = crp.publish_document("facilities", SEALED_SENTENCE, document_id="vault-codes", title="Vault", seal=True)
        obs = crp.publish_telemetry("door_sensors", "vault door", "state", "open", text=SEALED_OBSERVATION, seal=True)
        plain = crp.publish_document("facilities", PLAIN_SENTENCE, document_id="lobby-hours")  # the control
        envelope = crp.request_window(
            "client-sealed",
            "What is the vault door code of building Tamarack?",
            sub_queries=["vault door code of building Tamarack"],
            timeout=60,
        )
        sensed = crp.request_window(
            "client-sealed-2", "Which sensor reported the vault door open at night?", sub_queries=["sensor Juniper-7"]
        )
    texts = [f.text for f in envelope.facts]
    assert SEALED_SENTENCE in texts, texts  # the worker opened it: served in plaintext to the LLM
    assert SEALED_OBSERVATION in [f.text for f in sensed.facts], sensed.facts
    # the records as the broker holds them: ciphertext where the text was
    tap = Kafka(prefix, client=secure_client())
    try:
        tap.tap(("crp.documents", "crp.telemetry", "crp.facts"))
        ours = {doc.event_id, obs.event_id, plain.event_id}
        tap.wait_for(
            lambda rs: {r.json.get("origin_event_id") for r in rs if r.topic == "crp.facts"} >= ours,
            what="the facts of the three inputs",
        )
        raw = b"".join(r.value for r in tap.snapshot())
    finally:
        tap.close()
    assert b"vault-codes" in raw and b"vault door code" not in raw and b"Juniper" not in raw
    # and in the broker's own partition files (the control proves the search reads them)
    topics = [f"{prefix}{t}-" for t in ("documents", "telemetry", "facts")]
    assert files_holding(PLAIN_SENTENCE.encode(), topics)
    assert files_holding(b"vault door code", topics) == [] and files_holding(b"Juniper-7", topics) == []


def test_seal_without_the_workers_database_is_refused_before_anything_is_produced(
    deployment: SimpleNamespace,
) -> None:
    settings = load_settings({}, {k: v for k, v in deployment.env.items() if k != "CRP_DATABASE_URL"})
    with Client(settings) as crp, pytest.raises(ConfigError, match="seal needs the workers' database"):
        crp.publish_document("facilities", SEALED_SENTENCE, seal=True)
