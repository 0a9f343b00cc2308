"""Partition trust per tenant and source: one source, two tenants, two trusts; without a pair of its
own a tenant falls back to the source's trust. The arbiter follows: the same incident is a stale
high-trust source for one tenant and not for the other, whose operators trust that source less."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from crp_stream.config import ConfigError, Settings, load_settings
from crp_stream.core.tenants import partition_trust
from crp_stream.testing import Pipeline
from tests.support.arbiter import TRUST, Input, seed_incident


def test_the_pair_wins_then_the_source_then_nothing() -> None:
    by_tenant = {("acme", "vendor_docs"): 0.2}
    by_source = {"vendor_docs": 0.9}
    assert partition_trust("acme", "vendor_docs", by_tenant, by_source) == 0.2
    assert partition_trust("globex", "vendor_docs", by_tenant, by_source) == 0.9
    assert partition_trust(None, "vendor_docs", {("default", "vendor_docs"): 0.5}, by_source) == 0.5
    assert partition_trust("acme", "forum", by_tenant, by_source) is None


def test_tenant_trust_from_the_environment_and_the_file(tmp_path: Path) -> None:
    env = {"CRP_TENANT_TRUST": "acme:vendor_docs=0.2, globex:team:ops=0.7", "CRP_TRUST": "vendor_docs=0.9"}
    s = load_settings({}, env)
    assert s.tenant_trust == {("acme", "vendor_docs"): 0.2, ("globex", "team:ops"): 0.7}
    assert s.trust_for("vendor_docs", "official", None, "acme") == 0.2
    assert s.trust_for("vendor_docs", "official", None, "globex") == 0.9
    assert s.trust_for("vendor_docs", "official", None) == 0.9
    toml = tmp_path / "crp.toml"
    toml.write_text('[tenant_trust.acme]\nvendor_docs = 0.3\n"field telemetry" = 0.6\n', encoding="utf-8")
    assert load_settings({"config": str(toml)}, {}).tenant_trust == {
        ("acme", "vendor_docs"): 0.3,
        ("acme", "field telemetry"): 0.6,
    }
    for bad, reason in (
        ("vendor_docs=0.2", "is not TENANT:SOURCE"),
        ("a|b:vendor_docs=0.2", "is not a tenant name"),
        ("acme:vendor_docs=1.5", "out of range"),
    ):
        with pytest.raises(ConfigError, match=reason):
            load_settings({}, {"CRP_TENANT_TRUST": bad})


def incidents(tenants: tuple[str, ...]) -> list[Input]:
    out = []
    for tenant in tenants:
        for topic, key, ts, raw in seed_incident():
            value = json.loads(raw)
            value.update(tenant=tenant, event_id=f"{tenant}-{value['event_id']}")
            out.append((topic, key, ts, json.dumps(value).encode()))
    return sorted(out, key=lambda r: r[2])


def rows(p: Pipeline, sql: str) -> list[Any]:
    with p.fabric.engine.connect() as conn:
        return list(conn.execute(text(sql)))


def test_each_tenant_arbitrates_with_its_own_trust(tmp_path: Path) -> None:
    # acme trusts the vendor below its telemetry: telemetry is acme's high-trust partition, so the
    # vendor's older value is not a stale high-trust source there; globex keeps the source's 0.9
    settings = Settings(
        data_dir=tmp_path / "d",
        embedder="hashing",
        trust=dict(TRUST),
        tenant_trust={("acme", "vendor_docs"): 0.1},
    )
    with Pipeline(settings) as p:
        p.feed(incidents(("acme", "globex")))
        trust = rows(p, "SELECT DISTINCT tenant, trust FROM facts WHERE source = 'vendor_docs' ORDER BY tenant")
        assert trust == [("acme", 0.1), ("globex", 0.9)]
        stale = [a for a in p.out("crp.audit") if a["audit_type"] == "STALE_HIGH_TRUST"]
        owners = dict(rows(p, "SELECT DISTINCT claim_key, tenant FROM facts WHERE claim_key IS NOT NULL"))
        assert [owners[a["details"]["claim"]] for a in stale] == ["globex"]
        requests = rows(p, "SELECT source, claim_key FROM refresh_requests")
        assert [(src, owners[key]) for src, key in requests] == [("vendor_docs", "globex")]
