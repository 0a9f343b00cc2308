"""No secret in any log line or error message.

The CLI runs as a real process with a PostgreSQL URL holding a password (the server is unreachable on
purpose, so the error path runs), signing keys and a Kafka SASL password in its environment, at DEBUG,
in both log formats; every byte it writes is searched for the secrets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crp_stream import redaction
from crp_stream.config import load_settings
from crp_stream.runtime.embedded.log import EmbeddedLog

DB_PASSWORD = "s3cretPW"
SIGNING_KEY_A = "SigK3y-vendor-abcdef"
SIGNING_KEY_B = "SigK3y-field-123456"
SASL_PASSWORD = "Sasl-PW-98765"
SECRETS = (DB_PASSWORD, SIGNING_KEY_A, SIGNING_KEY_B, SASL_PASSWORD)
BAD_DB = f"postgresql+psycopg://crp:{DB_PASSWORD}@127.0.0.1:1/x"


def crp(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("CRP_")}
    full.update(
        CRP_SIGNING_KEYS=f"vendor_docs={SIGNING_KEY_A},field_telemetry={SIGNING_KEY_B}",
        CRP_KAFKA_SASL_PASSWORD=SASL_PASSWORD,
        **env,
    )
    return subprocess.run(
        [sys.executable, "-m", "crp_stream", *args], capture_output=True, text=True, env=full, cwd=tmp_path, timeout=120
    )


def assert_clean(proc: subprocess.CompletedProcess[str]) -> None:
    text = proc.stdout + proc.stderr
    for secret in SECRETS:
        assert secret not in text, f"secret {secret[:3]}... leaked:\n{text[-3000:]}"


@pytest.mark.parametrize(
    ("command", "fmt"),
    [
        (["run", "--until-idle"], "text"),
        (["run", "--until-idle"], "json"),
        (["status"], "json"),
        (["db", "upgrade"], "text"),
        (["rebuild", "--yes"], "json"),
        (["refresh", "list"], "text"),
    ],
)
def test_unreachable_database_error_names_no_password(tmp_path: Path, fmt: str, command: list[str]) -> None:
    EmbeddedLog(tmp_path / "d" / "log.sqlite", lambda: 0).close()  # rebuild needs a log to start from
    proc = crp(
        [*command, "--data", str(tmp_path / "d"), "--database", BAD_DB, "--log-level", "DEBUG", "--log-format", fmt],
        tmp_path,
    )
    assert proc.returncode != 0
    assert "127.0.0.1" in proc.stderr or "connection" in proc.stderr.lower(), proc.stderr[-2000:]
    assert_clean(proc)


def test_database_url_from_the_environment_is_redacted_too(tmp_path: Path) -> None:
    proc = crp(
        ["run", "--until-idle", "--data", str(tmp_path / "d"), "--log-level", "DEBUG"],
        tmp_path,
        CRP_DATABASE_URL=BAD_DB,
    )
    assert proc.returncode != 0
    assert_clean(proc)


def test_malformed_database_url_error_names_no_password(tmp_path: Path) -> None:
    proc = crp(["status", "--data", str(tmp_path / "d"), "--database", f"nosuchdb://crp:{DB_PASSWORD}@h/x"], tmp_path)
    assert (proc.returncode == 2 and "not supported" in proc.stderr) or "valid" in proc.stderr
    assert_clean(proc)


def test_a_working_run_with_signing_keys_logs_no_key(tmp_path: Path) -> None:
    data = tmp_path / "d"
    lines = tmp_path / "in.jsonl"
    doc = {"event_id": "e1", "source": "vendor_docs", "source_type": "official", "text": "One fact here."}
    lines.write_text(
        json.dumps({"topic": "crp.documents", "key": "vendor_docs", "value": doc})
        + "\n"
        + json.dumps(
            {"topic": "crp.documents", "key": "vendor_docs", "value": doc, "headers": {"crp-signature": "00" * 32}}
        )
        + "\n"
    )
    signed = crp(["sign", "--source", "vendor_docs", "--key-env", "MY_KEY", str(lines)], tmp_path, MY_KEY=SIGNING_KEY_A)
    assert signed.returncode == 0
    assert SIGNING_KEY_A not in signed.stderr and "crp-signature" in signed.stdout
    (tmp_path / "signed.jsonl").write_text(signed.stdout)
    for fmt in ("text", "json"):
        pub = crp(["publish", "--data", str(data), str(tmp_path / "signed.jsonl"), "--log-format", fmt], tmp_path)
        run = crp(
            [
                "run",
                "--until-idle",
                "--data",
                str(data),
                "--embedder",
                "hashing",
                "--log-level",
                "DEBUG",
                "--log-format",
                fmt,
            ],
            tmp_path,
        )
        tail = crp(["tail", "crp.deadletter", "--from-beginning", "--data", str(data)], tmp_path)
        for proc in (pub, run, tail):
            assert proc.returncode == 0, proc.stderr[-2000:]
            assert_clean(proc)
    assert "crp.facts" in run.stderr


def test_redact_masks_urls_pairs_and_registered_secrets() -> None:
    redaction.register([SIGNING_KEY_A])
    text = (
        f"postgresql://u:{DB_PASSWORD}@h:5432/db kafka://user:pw%40x@b:9092 "
        f"host=h password={DB_PASSWORD} dbname=x key {SIGNING_KEY_A}"
    )
    out = redaction.redact(text)
    assert DB_PASSWORD not in out and "pw%40x" not in out and SIGNING_KEY_A not in out
    assert "postgresql://u:***@h:5432/db" in out and "password=***" in out


def test_secrets_in_settings_and_environment() -> None:
    env = {
        "CRP_SIGNING_KEYS": f"a={SIGNING_KEY_A}",
        "CRP_KAFKA_SASL_PASSWORD": SASL_PASSWORD,
        "CRP_DATABASE_URL": BAD_DB,
        "CRP_EMBEDDER": "hashing",
    }
    found = redaction.secrets_in(load_settings({}, env), env)
    assert {SIGNING_KEY_A, SASL_PASSWORD, DB_PASSWORD} <= set(found)
    assert "hashing" not in found
