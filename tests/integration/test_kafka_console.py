"""The operator console mounted on a Kafka worker's HTTP port (``crp-stream worker --console``): the sample
through a real broker into PostgreSQL, every page served under /console, a refresh request resolved
through the form (the command produced to Kafka and applied by the worker), a wrong token refused and
audited on the topic."""

from __future__ import annotations

import http.cookiejar
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from crp_stream.replay_format import raw_value
from tests.support.kafka import OUTPUT_TOPICS, Kafka, WorkerProcess, unique_prefix
from tests.support.services import fresh_postgres_url, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]
SAMPLE = Path(__file__).resolve().parents[2] / "ops" / "sample" / "sample.jsonl"
TOKEN = "kafka-console-token-31e"


class ConsoleWorker(WorkerProcess):
    def args(self) -> list[str]:
        return [*super().args(), "--console"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    tmp = tmp_path_factory.mktemp("kafka-console")
    prefix = unique_prefix("co")
    kafka = Kafka(prefix)
    w = ConsoleWorker(tmp, prefix, fresh_postgres_url(), partitions=2, env={"CRP_CONSOLE_TOKEN": TOKEN}).start()
    try:
        w.wait_ready()
        kafka.tap((*OUTPUT_TOPICS, "crp.operator.commands"))
        for line in SAMPLE.read_text().splitlines():
            obj = json.loads(line)
            kafka.produce(obj["topic"], obj.get("key"), raw_value(obj["value"]))
        kafka.wait_for(
            lambda rs: any(r.topic == "crp.refresh.requests" for r in rs),
            timeout=120,
            what="the sample's refresh request",
        )
        kafka.wait_for(lambda rs: any(r.topic == "crp.envelopes" for r in rs), timeout=120, what="the envelope")
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        yield SimpleNamespace(kafka=kafka, worker=w, base=f"http://127.0.0.1:{w.port}/console", http=opener)
    finally:
        w.stop()
        kafka.close()


def get(env: SimpleNamespace, path: str) -> str:
    with env.http.open(env.base + path, timeout=120) as r:
        assert r.status == 200
        return str(r.read().decode())


def post(env: SimpleNamespace, path: str, form: dict[str, str]) -> tuple[int, str]:
    try:
        with env.http.open(env.base + path, data=urllib.parse.urlencode(form).encode(), timeout=120) as r:
            return int(r.status), str(r.read().decode())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_pages_are_served_on_the_workers_port(env: SimpleNamespace) -> None:
    [req] = [json.loads(r.value) for r in env.kafka.snapshot("crp.refresh.requests")]
    listing = get(env, "/refresh")
    assert req["request_id"][:12] in listing and 'href="/console/refresh/' in listing
    detail = get(env, f"/refresh/{req['request_id']}")
    assert "vendor_docs" in detail and "<svg" in detail and 'action="/console/refresh/' in detail
    fabric = get(env, "/fabric")
    assert 'data-topic="crp.documents"' in fabric and "ingest:" in fabric and "hashing-384" in fabric
    envelope = get(env, "/envelopes/session-demo")
    assert "Window 1" in envelope and "CRP-Context-Coverage-Score" in envelope and "crp-id" in envelope
    assert "STALE_HIGH_TRUST" in get(env, "/audit?type=STALE_HIGH_TRUST")
    assert get(env, "/static/htmx.min.js").startswith("var htmx")


def test_a_wrong_token_is_refused_and_the_denial_is_on_the_audit_topic(env: SimpleNamespace) -> None:
    [req] = [json.loads(r.value) for r in env.kafka.snapshot("crp.refresh.requests")]
    page = get(env, f"/refresh/{req['request_id']}")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    code, body = post(env, f"/refresh/{req['request_id']}/resolve", {"csrf": csrf, "actor": "zed", "token": "no"})
    assert code == 403 and "token is wrong" in body and TOKEN not in body
    env.kafka.wait_for(
        lambda rs: any(r.topic == "crp.audit" and json.loads(r.value)["audit_type"] == "ACCESS_DENIED" for r in rs),
        what="ACCESS_DENIED on crp.audit",
    )
    assert not env.kafka.snapshot("crp.operator.commands")


def test_resolve_through_the_form_is_applied_by_the_worker(env: SimpleNamespace) -> None:
    [req] = [json.loads(r.value) for r in env.kafka.snapshot("crp.refresh.requests")]
    rid = req["request_id"]
    page = get(env, f"/refresh/{rid}")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    code, body = post(env, f"/refresh/{rid}/resolve", {"csrf": csrf, "actor": "yan", "token": TOKEN})
    assert code == 200 and 'id="status">resolved' in body and "yan" in body  # after the redirect
    [cmd] = [json.loads(r.value) for r in env.kafka.snapshot("crp.operator.commands")]
    assert (cmd["command"], cmd["target_id"], cmd["actor"]) == ("resolve_refresh", rid, "yan")

    def resolved() -> bool:
        return any(
            r.topic == "crp.audit"
            and json.loads(r.value)["audit_type"] == "REFRESH_RESOLVED"
            and json.loads(r.value)["details"]["actor"] == "yan"
            for r in env.kafka.snapshot()
        )

    wait_until("REFRESH_RESOLVED on crp.audit", resolved, timeout=60)
    assert rid not in get(env, "/refresh") and rid[:12] in get(env, "/refresh?status=resolved")
