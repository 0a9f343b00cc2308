"""The test broker's secure listeners (``ops/kafka start --secure``): their client settings, read from the
files ``ops/kafka`` wrote beside ``CRP_TEST_KAFKA_SECURE`` (exported by ``ops/env.sh``). Missing: the test FAILS.

Mechanisms (each a file in the same directory): ``scram-sha-512`` (``client.env``, the user ``crp``),
``scram-sha-256`` (the user ``crp256``) and ``plain`` (the user ``crpplain``) on the SASL_SSL listener;
``mtls`` (SSL with a client certificate);
``oauthbearer`` (SASL_SSL with an unsigned token the test-only validator accepts).
"""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from crp_stream.config import load_settings
from crp_stream.runtime.kafka.security import client_kwargs
from tests.support.services import require_env

MECHANISMS = ("scram-sha-512", "scram-sha-256", "plain", "mtls", "oauthbearer")
PROTOCOL = {
    "scram-sha-512": "SASL_SSL",
    "scram-sha-256": "SASL_SSL",
    "plain": "SASL_SSL",
    "mtls": "SSL",
    "oauthbearer": "SASL_SSL",
}


def secure_env(mechanism: str = "scram-sha-512") -> dict[str, str]:
    """``CRP_BROKER`` and the ``CRP_KAFKA_*`` settings of one secure listener (a password among them)."""
    main = Path(require_env("CRP_TEST_KAFKA_SECURE"))
    path = main if mechanism == "scram-sha-512" else main.with_name(f"client-{mechanism}.env")
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
    assert out.get("CRP_KAFKA_SECURITY_PROTOCOL") == PROTOCOL[mechanism], f"{path}: not the {mechanism} settings"
    return out


def secure_client(mechanism: str = "scram-sha-512") -> dict[str, Any]:
    """aiokafka's connection arguments for a secure listener (through the product's own helper)."""
    return client_kwargs(load_settings({}, secure_env(mechanism)))


def unsigned_token(path: Path, *, sub: str = "crp", iat: int, exp: int) -> Path:
    """An unsigned JWS (alg "none") such as the test broker's OAUTHBEARER validator checks: only its
    claims count (``exp`` in the past: refused)."""

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    path.write_text(f"{part({'alg': 'none'})}.{part({'sub': sub, 'iat': iat, 'exp': exp})}.")
    return path


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
