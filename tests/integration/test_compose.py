"""compose/docker-compose.yml is a valid Compose file with the deployment's services.

No Docker engine runs here; ``docker-compose config`` (Debian's docker-compose package) parses, interpolates
and validates the file without one. A missing docker-compose FAILS the test: .ci/run installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose" / "docker-compose.yml"


def _config(**extra_env: str) -> dict:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.fail("docker-compose is not installed: apt-get install -y docker-compose (.ci/run does)", pytrace=False)
    # the file's own defaults, not whatever CRP_* the developer's shell holds
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRP_", "COMPOSE_", "DOCKER_"))}
    env.update(extra_env)
    proc = subprocess.run(
        [exe, "-f", str(COMPOSE), "config"], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, f"docker-compose config failed:\n{proc.stderr}"
    return yaml.safe_load(proc.stdout)


def test_compose_config_is_valid_and_complete() -> None:
    cfg = _config()
    services = cfg["services"]
    assert {"kafka", "postgres", "qdrant", "migrate", "worker"} <= set(services)

    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, no ZooKeeper
    assert kafka["environment"]["KAFKA_LOG_MESSAGE_TIMESTAMP_TYPE"] == "LogAppendTime"
    assert services["postgres"]["image"].startswith("postgres:16")
    assert services["qdrant"]["image"].startswith("qdrant/qdrant:")

    assert services["migrate"]["command"] == ["db", "upgrade"]
    assert services["migrate"]["build"]["dockerfile"] == "compose/Dockerfile"

    worker = services["worker"]
    cmd = worker["command"]
    assert cmd[0] == "worker"
    assert cmd[cmd.index("--broker") + 1] == "kafka://kafka:9092"
    assert cmd[cmd.index("--database") + 1].startswith("postgresql+psycopg://")
    assert cmd[cmd.index("--qdrant") + 1] == "http://qdrant:6333"
    assert worker["environment"]["CRP_BROKER"] == "kafka://kafka:9092"
    assert worker["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert int(worker["deploy"]["replicas"]) >= 1


def test_compose_scales_workers_from_the_environment() -> None:
    assert int(_config(CRP_WORKERS="3")["services"]["worker"]["deploy"]["replicas"]) == 3
