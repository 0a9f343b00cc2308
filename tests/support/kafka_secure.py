"""The test broker's SASL_SSL listener (``ops/kafka start --secure``): its client settings, read from the
file ``ops/kafka`` wrote (``CRP_TEST_KAFKA_SECURE``, exported by ``ops/env.sh``). Missing: the test FAILS."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from crp_stream.config import load_settings
from crp_stream.runtime.kafka.security import client_kwargs
from tests.support.services import require_env


def secure_env() -> dict[str, str]:
    """``CRP_BROKER`` and the ``CRP_KAFKA_*`` settings of the SASL_SSL listener (the password among them)."""
    path = Path(require_env("CRP_TEST_KAFKA_SECURE"))
    if not path.is_file():
        pytest.fail(
            f"{path} does not exist: start the test broker with `ops/kafka start --secure` (ops/test does)",
            pytrace=False,
        )
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, value = words[1].split("=", 1)
            out[name] = value
    assert out.get("CRP_KAFKA_SECURITY_PROTOCOL") == "SASL_SSL", f"{path}: not the SASL_SSL listener's settings"
    return out


def secure_client() -> dict[str, Any]:
    """aiokafka's connection arguments for the SASL_SSL listener (through the product's own helper)."""
    return client_kwargs(load_settings({}, secure_env()))


def make_ca(directory: Path, name: str = "untrusted") -> Path:
    """A CA of our own that signed nothing the broker holds: trusting only it, a client must refuse the broker."""
    directory.mkdir(parents=True, exist_ok=True)
    key, pem = directory / f"{name}.key", directory / f"{name}.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            str(key),
            "-out",
            str(pem),
            "-subj",
            f"/CN={name} test CA",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return pem
