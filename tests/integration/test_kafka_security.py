"""The Kafka runtime over the test broker's secure listeners (``ops/kafka start --secure``, the broker's
certificate signed by a CA made on the spot): SASL_SSL with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, SSL
with a client certificate (mutual TLS), SASL_SSL with OAUTHBEARER.

A worker runs end to end over each (its only listener: the PLAINTEXT one is never named). A wrong
password (SCRAM or PLAIN), an untrusted CA, a missing or foreign client certificate and a refused token are
configuration errors: one line, a non-zero exit, well within 60 s. A broker that is down is not: the
worker waits for it, as on PLAINTEXT.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.kafka import Kafka, WorkerProcess, free_port, unique_prefix
from tests.support.kafka_secure import MECHANISMS, make_ca, secure_client, secure_env, unsigned_token
from tests.support.services import fresh_postgres_url, wait_until

pytestmark = [pytest.mark.kafka]

WRONG_PASSWORD = "Wr0ng-Passw0rd-4711"


@pytest.mark.postgres
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_worker_runs_end_to_end_over_each_mechanism(tmp_path: Path, mechanism: str) -> None:
    env = secure_env(mechanism)
    prefix = unique_prefix("sec")
    kafka = Kafka(prefix, client=secure_client(mechanism))  # OAUTHBEARER: this client reads the token file
    settings = {k: v for k, v in env.items() if k != "CRP_BROKER"}  # the broker is the --broker flag
    if mechanism == "oauthbearer":  # and the worker asks a command for it
        token_file = settings.pop("CRP_KAFKA_OAUTH_TOKEN_FILE")
        settings["CRP_KAFKA_OAUTH_TOKEN_COMMAND"] = f"cat {token_file}"
    worker = WorkerProcess(tmp_path, prefix, fresh_postgres_url(), broker=env["CRP_BROKER"], env=settings)
    worker.start()
    try:
        worker.wait_ready()
        kafka.tap()
        kafka.produce(
            "crp.documents",
            "vendor_docs",
            {
                "event_id": "sec-doc-1",
                "source": "vendor_docs",
                "source_type": "official",
                "text": "The etcd client port is 2379. The etcd peer port is 2380.",
            },
        )
        kafka.wait_for(
            lambda rs: (
                sum(1 for r in rs if r.topic == "crp.facts" and r.json.get("origin_event_id") == "sec-doc-1") == 2
            ),
            what="the document's two facts",
        )
        kafka.produce(
            "crp.window.requests",
            "sec-session",
            {
                "request_id": "sec-req-1",
                "session_id": "sec-session",
                "window": 1,
                "query": {"text": "What is the etcd client port?"},
                "sub_queries": [{"id": "q1", "text": "etcd client port"}],
                "fact_budget": 5,
            },
        )
        recs = kafka.wait_for(
            lambda rs: any(r.topic == "crp.envelopes" and r.key == "sec-session" for r in rs), what="the envelope"
        )
        envelope = next(r.json for r in recs if r.topic == "crp.envelopes" and r.key == "sec-session")
        assert envelope["request_id"] == "sec-req-1"
        assert any("2379" in f["text"] for f in envelope["facts"]), envelope["facts"]
        assert worker.health()["status"] == "ok"  # type: ignore[index]
    finally:
        code = worker.stop()
        kafka.close()
    log = worker.log_path.read_text(errors="replace")
    assert code == 0, worker.log_tail()
    for secret in secrets(env):
        assert secret not in log
    assert env["CRP_BROKER"].removeprefix("kafka://") in log  # the worker says which listener it used


def secrets(env: dict[str, str]) -> list[str]:
    """The password or the token of a listener's settings: never in an output."""
    out = [env["CRP_KAFKA_SASL_PASSWORD"]] if "CRP_KAFKA_SASL_PASSWORD" in env else []
    if "CRP_KAFKA_OAUTH_TOKEN_FILE" in env:
        out.append(Path(env["CRP_KAFKA_OAUTH_TOKEN_FILE"]).read_text().strip())
    return out


def run_worker(tmp_path: Path, mechanism: str = "scram-sha-512", **overrides: str) -> tuple[int, str, float]:
    """``crp-stream worker`` as a process with a listener's settings and ``overrides``: (code, output, seconds)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRP_") or k.startswith("CRP_TEST_")}
    env.update(secure_env(mechanism))
    env.update(CRP_TOPIC_PREFIX=unique_prefix("secbad"), CRP_EMBEDDER="hashing", **overrides)
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "crp_stream", "worker", "--data", str(tmp_path / "data"), "--log-format", "text"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - t0


def assert_one_line(output: str, *wanted: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output[-3000:]
    assert "Traceback" not in output
    for w in wanted:
        assert w in lines[0], lines[0]
    return lines[0]


def test_wrong_password_is_a_configuration_error_within_60_s(tmp_path: Path) -> None:
    real = secure_env()["CRP_KAFKA_SASL_PASSWORD"]
    code, output, seconds = run_worker(tmp_path, CRP_KAFKA_SASL_PASSWORD=WRONG_PASSWORD)
    assert code == 2 and seconds < 60, (code, seconds, output[-2000:])
    assert_one_line(output, "refused authentication as 'crp'", "SCRAM-SHA-512", "kafka_sasl_password")
    assert WRONG_PASSWORD not in output and real not in output


def test_a_wrong_plain_password_is_a_configuration_error_within_60_s(tmp_path: Path) -> None:
    real = secure_env("plain")["CRP_KAFKA_SASL_PASSWORD"]
    code, output, seconds = run_worker(tmp_path, "plain", CRP_KAFKA_SASL_PASSWORD=WRONG_PASSWORD)
    assert code == 2 and seconds < 60, (code, seconds, output[-2000:])
    assert_one_line(output, "refused authentication as 'crpplain'", "PLAIN", "kafka_sasl_password")
    assert WRONG_PASSWORD not in output and real not in output


def test_untrusted_ca_is_a_configuration_error_within_60_s(tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "ca")
    code, output, seconds = run_worker(tmp_path, CRP_KAFKA_SSL_CAFILE=str(ca))
    assert code == 2 and seconds < 60, (code, seconds, output[-2000:])
    assert_one_line(output, "certificate is not trusted", "kafka_ssl_cafile")
    assert secure_env()["CRP_KAFKA_SASL_PASSWORD"] not in output


def test_scram_sha_256_credentials_are_refused_under_sha_512(tmp_path: Path) -> None:
    """The SHA-256 user has no SHA-512 credentials: the mechanism, not only the password, is checked."""
    env = secure_env("scram-sha-256")
    code, output, seconds = run_worker(tmp_path, "scram-sha-256", CRP_KAFKA_SASL_MECHANISM="SCRAM-SHA-512")
    assert code == 2 and seconds < 60, (code, seconds, output[-2000:])
    assert_one_line(output, "refused authentication as 'crp256'", "SCRAM-SHA-512")
    assert env["CRP_KAFKA_SASL_PASSWORD"] not in output


def test_mtls_without_a_client_certificate_is_a_configuration_error_within_60_s(tmp_path: Path) -> None:
    code, output, seconds = run_worker(tmp_path, "mtls", CRP_KAFKA_SSL_CERTFILE="", CRP_KAFKA_SSL_KEYFILE="")
    assert code == 2 and seconds < 60, (code, seconds, output[-2000:])
    assert_one_line(output, "requires a client certificate", "kafka_ssl_certfile", "kafka_ssl_keyfile")


def test_mtls_with_a_foreign_client_certificate_is_a_configuration_error(tmp_path: Path) -> None:
    foreign = make_ca(tmp_path / "foreign", "foreign-client")  # self-signed: no CA the broker trusts
    code, output, seconds = run_worker(
        tmp_path, "mtls", CRP_KAFKA_SSL_CERTFILE=str(foreign), CRP_KAFKA_SSL_KEYFILE=str(foreign.with_suffix(".key"))
    )
    assert code == 2 and seconds < 60, (code, seconds, output[-2000:])
    assert_one_line(output, "refused the client certificate", str(foreign))


@pytest.mark.parametrize("source", ["file", "command"])
def test_a_refused_oauthbearer_token_is_a_configuration_error_within_60_s(tmp_path: Path, source: str) -> None:
    now = int(time.time())
    expired = unsigned_token(tmp_path / "expired.token", iat=now - 7200, exp=now - 3600)
    given = (
        {"CRP_KAFKA_OAUTH_TOKEN_FILE": str(expired)}
        if source == "file"
        else {"CRP_KAFKA_OAUTH_TOKEN_FILE": "", "CRP_KAFKA_OAUTH_TOKEN_COMMAND": f"cat {expired}"}
    )
    code, output, seconds = run_worker(tmp_path, "oauthbearer", **given)
    assert code == 2 and seconds < 60, (code, seconds, output[-2000:])
    assert_one_line(output, "refused the OAUTHBEARER token", "invalid_token", f"kafka_oauth_token_{source}")
    assert expired.read_text() not in output


def test_missing_ca_file_and_incomplete_settings_are_one_line(tmp_path: Path) -> None:
    code, output, _ = run_worker(tmp_path, CRP_KAFKA_SSL_CAFILE=str(tmp_path / "nope.pem"))
    assert code == 2
    assert_one_line(output, "kafka_ssl_cafile", "nope.pem", "no such file")
    code, output, _ = run_worker(tmp_path, CRP_KAFKA_SASL_USERNAME="")
    assert code == 2
    assert_one_line(output, "kafka_sasl_username: required with SCRAM-SHA-512")


def test_a_secure_broker_that_is_down_is_waited_for(tmp_path: Path) -> None:
    env = secure_env()
    settings = {k: v for k, v in env.items() if k != "CRP_BROKER"}
    down = f"kafka://127.0.0.1:{free_port()}"  # nothing listens there
    worker = WorkerProcess(
        tmp_path, unique_prefix("secdown"), f"sqlite:///{tmp_path / 'f.sqlite'}", broker=down, env=settings
    )
    worker.start()
    try:
        wait_until(
            "/health: degraded, waiting for the broker",
            lambda: "broker" in (worker.health() or {}).get("waiting_for", {}),
            60.0,
            0.3,
        )
        time.sleep(5.0)
        assert worker.alive(), worker.log_tail()
        assert worker.health()["status"] == "degraded"  # type: ignore[index]
    finally:
        worker.stop()
    assert "waiting before start" in worker.log_path.read_text(errors="replace")


@pytest.mark.heavy
def test_ops_kafka_start_secure_prints_only_the_export_lines_a_client_needs(tmp_path: Path) -> None:
    """A private broker of this test's own (free ports, its own run dir): stdout is exactly the exports,
    and a client configured from them alone gets in; so does one from each mechanism's `secure-env`."""
    import asyncio
    import re
    import shlex

    from crp_stream.config import load_settings
    from crp_stream.runtime.kafka.security import check_broker
    from tests.support.services import OPS

    secure_env()  # the suite's secure broker must be configured: fail, never skip
    ports = [free_port() for _ in range(5)]
    env = {
        **os.environ,
        "CRP_KAFKA_PORT": str(ports[0]),
        "CRP_KAFKA_CONTROLLER_PORT": str(ports[1]),
        "CRP_KAFKA_SECURE_PORT": str(ports[2]),
        "CRP_KAFKA_MTLS_PORT": str(ports[3]),
        "CRP_KAFKA_OAUTH_PORT": str(ports[4]),
        "CRP_KAFKA_RUN": str(tmp_path / "kafka"),
        "CRP_PYTHON": sys.executable,
    }

    def ops(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(OPS / "kafka"), *args], env=env, capture_output=True, text=True, timeout=300)

    try:
        first = ops("start", "--secure")
        assert first.returncode == 0, first.stderr[-3000:]
        lines = first.stdout.splitlines()
        assert all(re.fullmatch(r"export CRP_[A-Z_]+=\S+", line) for line in lines), first.stdout
        exported = dict(shlex.split(line)[1].split("=", 1) for line in lines)
        assert set(exported) == {
            "CRP_BROKER",
            "CRP_KAFKA_SECURITY_PROTOCOL",
            "CRP_KAFKA_SASL_MECHANISM",
            "CRP_KAFKA_SASL_USERNAME",
            "CRP_KAFKA_SASL_PASSWORD",
            "CRP_KAFKA_SSL_CAFILE",
        }
        assert exported["CRP_BROKER"] == f"kafka://127.0.0.1:{ports[2]}"
        assert exported["CRP_KAFKA_SASL_PASSWORD"] not in first.stderr  # messages go to stderr, without it
        assert asyncio.run(check_broker(load_settings({}, exported))) is None
        again = ops("start", "--secure")  # already running: the same lines again
        assert again.returncode == 0 and again.stdout == first.stdout, again.stderr[-2000:]
        assert ops("secure-env").stdout == first.stdout
        listeners = (("scram-sha-256", ports[2]), ("plain", ports[2]), ("mtls", ports[3]), ("oauthbearer", ports[4]))
        for mechanism, port in listeners:
            lines = ops("secure-env", mechanism).stdout.splitlines()
            settings = dict(shlex.split(line)[1].split("=", 1) for line in lines)
            assert settings["CRP_BROKER"] == f"kafka://127.0.0.1:{port}", (mechanism, settings)
            assert asyncio.run(check_broker(load_settings({}, settings))) is None, mechanism
        assert ops("secure-env", "kerberos").returncode == 2
    finally:
        ops("stop")


TOKEN_SCRIPT = (
    "import base64, json, sys, time\n"
    "open(sys.argv[1], 'a').write('x')\n"
    "now = int(time.time())\n"
    "claims = json.dumps({'sub': 'crp', 'iat': now, 'exp': now + int(sys.argv[2])}).encode()\n"
    "print('eyJhbGciOiJub25lIn0.' + base64.urlsafe_b64encode(claims).decode().rstrip('=') + '.')\n"
)


def short_lived_tokens(tmp_path: Path, lifetime_s: int) -> tuple[dict[str, str], Path]:
    """The OAUTHBEARER listener's settings with a command that prints a fresh token valid ``lifetime_s``
    seconds at each run, and the file its runs are counted in (one ``x`` a run)."""
    script, calls = tmp_path / "token.py", tmp_path / "calls"
    script.write_text(TOKEN_SCRIPT)
    calls.write_text("")
    env = {k: v for k, v in secure_env("oauthbearer").items() if k != "CRP_KAFKA_OAUTH_TOKEN_FILE"}
    env["CRP_KAFKA_OAUTH_TOKEN_COMMAND"] = f"{sys.executable} {script} {calls} {lifetime_s}"
    return env, calls


def test_a_new_connection_after_the_commands_token_expired_gets_a_fresh_one(tmp_path: Path) -> None:
    """One client's connections share its token provider: the second, made after the first token
    expired (well inside the command's minute), must not reuse it; the broker checks ``exp``."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient

    from crp_stream.config import load_settings
    from crp_stream.runtime.kafka.security import client_kwargs

    env, calls = short_lived_tokens(tmp_path, 8)
    kwargs = client_kwargs(load_settings({}, env))

    async def connect() -> None:
        admin = AIOKafkaAdminClient(request_timeout_ms=10000, **kwargs)
        await admin.start()
        try:
            assert (await admin.describe_cluster())["brokers"]
        finally:
            await admin.close()

    asyncio.run(connect())
    time.sleep(9.0)  # the first token has expired
    asyncio.run(connect())
    assert calls.read_text().count("x") >= 2


@pytest.mark.postgres
def test_a_worker_keeps_working_after_its_token_expires(tmp_path: Path) -> None:
    """Kafka (and the test broker) does not re-authenticate a connection (connections.max.reauth.ms is 0):
    the worker's connections outlive the token; whatever it connects anew asks the command again."""
    env, calls = short_lived_tokens(tmp_path, 10)
    prefix = unique_prefix("secexp")
    kafka = Kafka(prefix, client=secure_client("oauthbearer"))
    settings = {k: v for k, v in env.items() if k != "CRP_BROKER"}
    worker = WorkerProcess(tmp_path, prefix, fresh_postgres_url(), broker=env["CRP_BROKER"], env=settings)
    worker.start()
    try:
        worker.wait_ready()
        kafka.tap()
        time.sleep(12.0)  # every token printed so far has expired
        kafka.produce(
            "crp.documents",
            "vendor_docs",
            {
                "event_id": "exp-doc-1",
                "source": "vendor_docs",
                "source_type": "official",
                "text": "The etcd client port is 2379.",
            },
        )
        kafka.wait_for(
            lambda rs: any(r.topic == "crp.facts" and r.json.get("origin_event_id") == "exp-doc-1" for r in rs),
            what="the document's fact, after the worker's token expired",
        )
        assert worker.alive() and worker.health()["status"] == "ok", worker.log_tail()  # type: ignore[index]
    finally:
        code = worker.stop()
        kafka.close()
    assert code == 0, worker.log_tail()
    assert calls.read_text().count("x") >= 1
