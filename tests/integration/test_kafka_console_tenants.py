"""The console's tenant tokens on the Kafka runtime (``worker --console``, PostgreSQL, the real broker):
the tenants' scenario of ``test_tenants`` through Kafka, then over HTTP a tenant's token sees its own
tenant's facts, sessions and envelopes only (no other tenant's fact id on any page, 404 for its
session, 403 for ``?tenant=other``), and the operator token sees both, as on the embedded runtime
(``test_console_tenants``)."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.integration.test_kafka_console import ConsoleWorker
from tests.integration.test_tenants import TENANTS, VALUE, document, window
from tests.support.kafka import OUTPUT_TOPICS, Kafka, unique_prefix
from tests.support.services import fresh_postgres_url

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

ADMIN = "kafka-operator-token-0123456789"
TOKENS = {"acme": "kafka-acme-token-0123456789a", "globex": "kafka-globex-token-012345678"}


def rows(url: str, sql: str) -> list[Any]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)))
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    tmp = tmp_path_factory.mktemp("kafka-console-tenants")
    prefix = unique_prefix("ct")
    kafka = Kafka(prefix)
    url = fresh_postgres_url()
    tokens = {"CRP_CONSOLE_TOKEN": ADMIN, "CRP_CONSOLE_TENANT_TOKENS": ",".join(f"{t}={k}" for t, k in TOKENS.items())}
    w = ConsoleWorker(tmp, prefix, url, partitions=2, env=tokens).start()
    try:
        w.wait_ready()
        kafka.tap(OUTPUT_TOPICS)
        for tenant in TENANTS:
            other = VALUE["globex" if tenant == "acme" else "acme"]
            for event_id, source, kind, value in (
                (f"{tenant}-vendor", "vendor_docs", "official", VALUE[tenant]),
                (f"{tenant}-forum", "forum", "community", other),
            ):
                kafka.produce("crp.documents", source, document(tenant, event_id, source, kind, value))
        kafka.wait_for(
            lambda rs: sum(1 for r in rs if r.topic == "crp.facts" and r.json.get("type") == "FactRecorded") >= 12,
            timeout=120,
            what="the tenants' twelve facts",
        )
        for tenant in TENANTS:
            kafka.produce("crp.window.requests", f"s-{tenant}", window(tenant, f"r-{tenant}", f"s-{tenant}"))
        kafka.wait_for(
            lambda rs: {r.json["request_id"] for r in rs if r.topic == "crp.envelopes"} >= {"r-acme", "r-globex"},
            timeout=120,
            what="an envelope per tenant",
        )
        tenant_of = dict(rows(url, "SELECT fact_id, tenant FROM facts"))
        yield SimpleNamespace(base=f"http://127.0.0.1:{w.port}/console", url=url, tenant_of=tenant_of, worker=w)
    finally:
        w.stop()
        kafka.close()


def get(env: SimpleNamespace, path: str, token: str) -> tuple[int, str]:
    req = urllib.request.Request(env.base + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return int(r.status), str(r.read().decode())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def ids_of(env: SimpleNamespace, tenant: str) -> list[str]:
    return [f for f, t in env.tenant_of.items() if t == tenant]


def test_the_scenario_reached_both_tenants(env: SimpleNamespace) -> None:
    assert sorted(set(env.tenant_of.values())) == list(TENANTS) and len(env.tenant_of) == 12


@pytest.mark.parametrize("tenant", TENANTS)
def test_a_tenant_token_sees_only_its_tenants_facts_and_envelopes(env: SimpleNamespace, tenant: str) -> None:
    other = "globex" if tenant == "acme" else "acme"
    mine = TOKENS[tenant]
    code, page = get(env, "/fabric", mine)
    assert code == 200 and f"tenant {tenant}" in page
    counts = [
        int(n)
        for m in re.finditer(r'<tr data-source="[^"]+">(.*?)</tr>', page, re.S)
        for n in re.findall(r'class="num">(\d+)<', m.group(1))
    ]
    assert sum(counts) == len(ids_of(env, tenant))  # the other tenant has as many: not counted
    assert 'id="topics"' not in page
    assert get(env, f"/fabric?tenant={other}", mine)[0] == 403
    code, sessions = get(env, "/envelopes", mine)
    assert code == 200 and f"s-{tenant}" in sessions and f"s-{other}" not in sessions
    assert get(env, f"/envelopes/s-{other}", mine)[0] == 404
    code, envelope = get(env, f"/envelopes/s-{tenant}", mine)
    assert code == 200 and any(f in envelope for f in ids_of(env, tenant)), "its envelope shows its facts"
    theirs = ids_of(env, other)
    for path in ("/fabric", "/audit", "/refresh?status=all", "/quarantine?status=all", f"/envelopes/s-{tenant}"):
        code, body = get(env, path, mine)
        assert code == 200, path
        assert [f for f in theirs if f in body] == [], path


def test_the_operator_token_sees_every_tenant(env: SimpleNamespace) -> None:
    code, sessions = get(env, "/envelopes", ADMIN)
    assert code == 200 and "s-acme" in sessions and "s-globex" in sessions
    code, page = get(env, "/fabric", ADMIN)
    assert code == 200 and 'id="topics"' in page
    code, only = get(env, "/envelopes?tenant=globex", ADMIN)
    assert code == 200 and "s-globex" in only and "s-acme" not in only
    assert get(env, "/fabric", "not-a-token-at-all-xx")[0] == 401


def test_tokens_are_not_in_the_workers_log(env: SimpleNamespace) -> None:
    log = Path(env.worker.log_path).read_text(errors="replace")
    assert all(t not in log for t in (ADMIN, *TOKENS.values()))
