"""Tenants: two teams on one deployment share near-identical facts with different values, and
nothing crosses between them: no fact, edge, claim, conflict note, session or envelope."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from crp_stream.config import Settings
from crp_stream.testing import Pipeline

T0 = 1_793_000_000_000_000
MIN = 60_000_000
TENANTS = ("acme", "globex")
VALUE = {"acme": "1000", "globex": "250"}
SHARED = "The deploy freeze starts every Friday at noon."


def document(tenant: str | None, event_id: str, source: str, source_type: str, value: str) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "event_id": event_id,
        "source": source,
        "source_type": source_type,
        "document_id": "limits",
        "facts": [
            {
                "text": f"The API allows {value} requests per second.",
                "subject": "api",
                "attribute": "rate limit",
                "value": value,
                "unit": "rps",
            },
            {"text": f"Bulk exports run at most {value} rows per minute."},
            {"text": SHARED},
        ],
    }
    return doc if tenant is None else {**doc, "tenant": tenant}


def window(tenant: str, request_id: str, session_id: str) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "request_id": request_id,
        "session_id": session_id,
        "window": 1,
        "query": {"text": "How many requests per second does the API allow?"},
        "sub_queries": [{"id": "q1", "text": "API rate limit in requests per second"}],
        "fact_budget": 10,
        "policy": {"min_relevance": 0.1},
    }


def scenario(p: Pipeline) -> None:
    """Each tenant: an official document and a community one that disagrees with it, about the same
    subject and sentences as the other tenant's; then one window each."""
    ts = T0
    for tenant in TENANTS:
        other = VALUE["globex" if tenant == "acme" else "acme"]
        for event_id, source, kind, value in (
            (f"{tenant}-vendor", "vendor_docs", "official", VALUE[tenant]),
            (f"{tenant}-forum", "forum", "community", other),
        ):
            ts += MIN
            p.publish("crp.documents", source, document(tenant, event_id, source, kind, value), ts_us=ts)
    for tenant in TENANTS:
        ts += MIN
        p.publish("crp.window.requests", "s1", window(tenant, f"r-{tenant}", f"s-{tenant}"), ts_us=ts)


@pytest.fixture
def pipe(tmp_path: Path, database_url: str) -> Iterator[Pipeline]:
    with Pipeline(Settings(data_dir=tmp_path / "d", database_url=database_url, embedder="hashing")) as p:
        yield p


def _rows(p: Pipeline, sql: str) -> list[Any]:
    with p.fabric.engine.connect() as conn:
        return list(conn.execute(text(sql)))


def test_two_tenants_share_no_fact_edge_claim_or_note(pipe: Pipeline) -> None:
    scenario(pipe)
    tenant_of = dict(_rows(pipe, "SELECT fact_id, tenant FROM facts"))
    assert sorted(set(tenant_of.values())) == list(TENANTS)
    assert len(tenant_of) == 12  # the shared sentence is one fact per document, of its tenant
    facts = pipe.out("crp.facts", "FactRecorded")
    assert {f["fact_id"]: f["tenant"] for f in facts} == tenant_of
    shared = [f["fact_id"] for f in facts if f["text"] == SHARED]
    assert len(shared) == 4 and len(set(shared)) == 4
    edges = _rows(pipe, "SELECT src, dst FROM edges")
    assert edges, "each tenant's facts are linked among themselves"
    assert [e for e in edges if tenant_of[e[0]] != tenant_of[e[1]]] == []
    claims = _rows(pipe, "SELECT claim_key, tenant FROM facts WHERE claim_key IS NOT NULL")
    by_claim: dict[str, set[str]] = {}
    for key, tenant in claims:
        by_claim.setdefault(key, set()).add(tenant)
    assert all(len(t) == 1 for t in by_claim.values())
    assert sorted(t for ts in by_claim.values() for t in ts) == ["acme", "acme", "globex", "globex"]
    # each tenant's claim is contested inside it, never by the other tenant's values
    for audit in pipe.out("crp.audit"):
        named = {f for f in json.dumps(audit["details"]).split('"') if f in tenant_of}
        assert len({tenant_of[f] for f in named}) <= 1, audit
    envelopes = {e["request_id"]: e for e in pipe.out("crp.envelopes")}
    assert set(envelopes) == {"r-acme", "r-globex"}
    for tenant in TENANTS:
        env = envelopes[f"r-{tenant}"]
        ids = [f["fact_id"] for f in env["facts"]]
        assert ids and {tenant_of[f] for f in ids} == {tenant}
        # every fact id anywhere in the envelope (conflict notes, graph, claims) is the tenant's
        assert {tenant_of[w] for w in json.dumps(env).split('"') if w in tenant_of} == {tenant}


def test_a_session_is_one_tenants(pipe: Pipeline) -> None:
    scenario(pipe)
    second = {**window("globex", "r-2", "s-acme"), "window": 2}
    pipe.publish("crp.window.requests", "s-acme", second, ts_us=T0 + 100 * MIN)
    dead = pipe.out("crp.deadletter")
    assert len(dead) == 1
    assert "tenant: session 's-acme' is not a session of tenant 'globex'" in json.dumps(dead[0])


def test_the_default_tenant_keeps_its_ids_and_bytes(tmp_path: Path) -> None:
    """An input naming ``default`` is an input without ``tenant``: the same ids, the same outputs."""
    outs = []
    for name, tenant in (("none", None), ("named", "default")):
        with Pipeline.fresh(tmp_path / name, embedder="hashing") as p:
            p.publish("crp.documents", "v", document(tenant, "e1", "v", "official", "1000"), ts_us=T0)
            outs.append(p.lines())
    assert outs[0] == outs[1]
    assert '"tenant"' not in "".join(outs[0])


def test_a_malformed_tenant_is_dead_lettered_with_its_reason(tmp_path: Path) -> None:
    with Pipeline.fresh(tmp_path, embedder="hashing") as p:
        p.publish("crp.documents", "v", document("a|b", "e1", "v", "official", "1000"), ts_us=T0)
        dead = p.out("crp.deadletter")
        assert len(dead) == 1 and "tenant" in dead[0]["reason"]
        p.publish("crp.documents", "v", document("acme", "e2", "v", "official", "1000"), ts_us=T0 + MIN)
        assert len(p.out("crp.facts", "FactRecorded")) == 3  # the worker kept running
