"""The console and tenants, over HTTP (the app in process, the embedded default underneath): a tenant's
token reads only its tenant's facts, requests, candidates, sessions and audit events, cannot forget
another tenant's data; the operator token sees every tenant and filters; forget takes a preview and a
confirmation, and what it removed leaves no text on any page."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

with warnings.catch_warnings():  # starlette's notice that it prefers httpx2: the httpx client works as is
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from crp_stream.config import Settings
from crp_stream.console import EmbeddedBackend, create_app
from crp_stream.fabric.sql.db import make_engine
from crp_stream.testing import Pipeline
from tests.integration.test_tenants import MIN, T0, TENANTS, scenario
from tests.support.arbiter import TRUST, Input, seed_incident

ADMIN = "operator-token-0123456789"
TOKENS = {"acme-token-0123456789abc": "acme", "globex-token-0123456789ab": "globex"}
ACME, GLOBEX = "acme-token-0123456789abc", "globex-token-0123456789ab"


def incidents(after_us: int) -> list[Input]:
    """The seed's stale-vendor incident once per tenant (a refresh request each), after ``after_us``."""
    base = seed_incident()
    shift = after_us - min(ts for _t, _k, ts, _v in base)
    out = []
    for tenant in TENANTS:
        for topic, key, ts, raw in base:
            value = json.loads(raw)
            value.update(tenant=tenant, event_id=f"{tenant}-{value['event_id']}")
            out.append((topic, key, ts + shift, json.dumps(value).encode()))
    return sorted(out, key=lambda r: r[2])


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = Settings(data_dir=tmp_path / "d", embedder="hashing", trust=dict(TRUST))
    with Pipeline(s) as p:
        scenario(p)
        p.feed(incidents(T0 + 1000 * MIN))
    return s


@pytest.fixture
def backend(settings: Settings) -> Iterator[EmbeddedBackend]:
    b = EmbeddedBackend(settings)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def client(backend: EmbeddedBackend) -> Iterator[TestClient]:
    with TestClient(create_app(backend, token=ADMIN, tenant_tokens=TOKENS), follow_redirects=False) as c:
        yield c


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def rows(settings: Settings, sql: str) -> list[Any]:
    engine = make_engine(settings.database)  # the database only: the console holds the vector index
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)))
    finally:
        engine.dispose()


def csrf(client: TestClient, token: str) -> str:
    """The CSRF field of a form the reader was shown (the forget confirmation), with its cookie."""
    page = client.get("/fabric/forget?kind=all", headers=bearer(token))
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert found, page.text[:500]
    return found.group(1)


def test_every_page_needs_a_token_once_tenant_tokens_exist(client: TestClient) -> None:
    for path in ("/fabric", "/refresh", "/quarantine", "/audit", "/envelopes", "/envelopes/s-acme"):
        r = client.get(path)
        assert r.status_code == 401 and 'id="login"' in r.text, path
        assert client.get(path, headers=bearer("not-a-token-at-all-xx")).status_code == 401


def test_a_tenant_token_reads_only_its_tenant(client: TestClient, settings: Settings) -> None:
    acme_sources = {s for (s,) in rows(settings, "SELECT DISTINCT source FROM facts WHERE tenant = 'acme'")}
    page = client.get("/fabric", headers=bearer(ACME))
    assert page.status_code == 200 and "tenant acme" in page.text
    counts = {
        m.group(1): sum(int(n) for n in re.findall(r'class="num">(\d+)<', m.group(2)))
        for m in re.finditer(r'<tr data-source="([^"]+)">(.*?)</tr>', page.text, re.S)
    }
    ((mine,),) = rows(settings, "SELECT COUNT(*) FROM facts WHERE tenant = 'acme'")
    assert set(counts) == acme_sources and sum(counts.values()) == mine  # globex has as many: not shown
    assert 'id="topics"' not in page.text  # another tenant's offsets are not a tenant reader's business
    assert client.get("/fabric?tenant=globex", headers=bearer(ACME)).status_code == 403
    # sessions: its own, never the other tenant's, not even by id
    sessions = client.get("/envelopes", headers=bearer(ACME)).text
    assert "s-acme" in sessions and "s-globex" not in sessions
    assert client.get("/envelopes/s-globex", headers=bearer(ACME)).status_code == 404
    assert client.get("/envelopes/s-acme", headers=bearer(ACME)).status_code == 200
    # no page shows globex's facts to acme: globex's ids appear nowhere
    globex_ids = [f for (f,) in rows(settings, "SELECT fact_id FROM facts WHERE tenant = 'globex'")]
    for path in ("/fabric", "/refresh?status=all", "/quarantine?status=all", "/audit", "/envelopes/s-acme"):
        body = client.get(path, headers=bearer(ACME)).text
        assert [f for f in globex_ids if f in body] == [], path


def test_requests_and_candidates_are_scoped_by_their_claims_tenant(client: TestClient, settings: Settings) -> None:
    owner = dict(rows(settings, "SELECT DISTINCT claim_key, tenant FROM facts WHERE claim_key IS NOT NULL"))
    found = 0
    for table, path, id_col in (
        ("refresh_requests", "/refresh", "request_id"),
        ("quarantine_candidates", "/quarantine", "candidate_id"),
    ):
        for rid, key in rows(settings, f"SELECT {id_col}, claim_key FROM {table}"):
            found += 1
            mine, theirs = (ACME, GLOBEX) if owner[key] == "acme" else (GLOBEX, ACME)
            assert client.get(f"{path}/{rid}", headers=bearer(mine)).status_code == 200
            assert client.get(f"{path}/{rid}", headers=bearer(theirs)).status_code == 404
            assert rid in client.get(f"{path}?status=all", headers=bearer(mine)).text
            assert rid not in client.get(f"{path}?status=all", headers=bearer(theirs)).text
            assert rid in client.get(f"{path}?status=all", headers=bearer(ADMIN)).text
    assert found >= 2, "the scenario contests each tenant's claim"


def test_the_operator_token_sees_every_tenant_and_filters(client: TestClient) -> None:
    whole = client.get("/fabric", headers=bearer(ADMIN)).text
    assert 'id="topics"' in whole and "every tenant" in whole
    sessions = client.get("/envelopes", headers=bearer(ADMIN)).text
    assert "s-acme" in sessions and "s-globex" in sessions
    only = client.get("/envelopes?tenant=globex", headers=bearer(ADMIN)).text
    assert "s-globex" in only and "s-acme" not in only
    assert client.get("/fabric?tenant=no|pe", headers=bearer(ADMIN)).status_code == 400


def test_login_sets_a_signed_session_and_never_the_token(client: TestClient) -> None:
    form = client.get("/login")
    nonce = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text)
    assert nonce
    bad = client.post("/login", data={"csrf": nonce.group(1), "token": "wrong-token-wrong-token", "next": "/fabric"})
    assert bad.status_code == 401
    ok = client.post("/login", data={"csrf": nonce.group(1), "token": GLOBEX, "next": "//evil.example/"})
    assert ok.status_code == 303 and ok.headers["location"].endswith("/fabric")  # no open redirect
    cookie = ok.cookies.get("crp_session") or client.cookies.get("crp_session")
    assert cookie and GLOBEX not in cookie and cookie.startswith("globex.")
    assert "tenant globex" in client.get("/fabric").text
    client.cookies.set("crp_session", "acme." + cookie.split(".", 1)[1])  # a forged scope
    assert client.get("/fabric").status_code == 401


def test_a_tenant_token_cannot_forget_another_tenants_data(client: TestClient, settings: Settings) -> None:
    before = rows(settings, "SELECT tenant, COUNT(*) FROM facts GROUP BY tenant ORDER BY tenant")
    assert client.get("/fabric/forget?forget_tenant=globex&kind=all", headers=bearer(ACME)).status_code == 403
    nonce = csrf(client, ACME)
    form = {"csrf": nonce, "forget_tenant": "globex", "kind": "all", "confirm": "yes", "actor": "mallory"}
    r = client.post("/fabric/forget", data={**form, "token": ACME}, headers=bearer(ACME))
    assert r.status_code == 403 and "acme only" in r.text
    # the operator token in the header does not lend its rights: a write acts with the form's token
    r = client.post("/fabric/forget", data={**form, "token": ACME}, headers=bearer(ADMIN))
    assert r.status_code == 403
    assert rows(settings, "SELECT tenant, COUNT(*) FROM facts GROUP BY tenant ORDER BY tenant") == before
    denied = rows(settings, "SELECT details FROM audit_log WHERE audit_type = 'ACCESS_DENIED'")
    assert denied and all(ACME not in d for (d,) in denied)  # the token is never written down


def test_forget_previews_then_needs_a_confirmation(client: TestClient, settings: Settings) -> None:
    ((globex,),) = rows(settings, "SELECT COUNT(*) FROM facts WHERE tenant = 'globex'")
    ((doc,),) = rows(settings, "SELECT COUNT(*) FROM facts WHERE document_id = 'acme' || char(31) || 'limits'")
    preview = client.get("/fabric/forget?kind=document&name=limits", headers=bearer(ACME))
    assert preview.status_code == 200 and f"<strong>{doc}</strong> fact(s)" in preview.text and doc >= 3
    assert "requests per second" not in preview.text  # counts, never text
    nonce = csrf(client, ACME)
    form = {"csrf": nonce, "forget_tenant": "acme", "kind": "source", "name": "forum", "actor": "dpo", "token": ACME}
    unconfirmed = client.post("/fabric/forget", data=form, headers=bearer(ACME))
    assert unconfirmed.status_code == 400 and "Nothing was published" in unconfirmed.text
    assert rows(settings, "SELECT COUNT(*) FROM facts WHERE tenant = 'acme' AND source = 'forum'") == [(3,)]
    done = client.post("/fabric/forget", data={**form, "confirm": "yes"}, headers=bearer(ACME))
    assert done.status_code == 303 and done.headers["location"].endswith("/fabric?done=forget")
    assert rows(settings, "SELECT COUNT(*) FROM facts WHERE tenant = 'acme' AND source = 'forum'") == [(0,)]
    assert rows(settings, "SELECT COUNT(*) FROM facts WHERE tenant = 'globex'") == [(globex,)]
    (details,) = rows(settings, "SELECT details FROM audit_log WHERE audit_type = 'FACTS_FORGOTTEN'")[0]
    got = json.loads(details)
    assert got["tenant"] == "acme" and got["target"] == "source:forum" and got["facts"] == 3 and got["actor"] == "dpo"
    # the forum's acme sentences ("... 1000 ..." is the vendor's; the forum said globex's value) are on no page
    gone = "The API allows 250 requests per second."
    for path in ("/fabric", "/audit", "/refresh?status=all", "/quarantine?status=all", "/envelopes/s-acme"):
        assert gone not in client.get(path, headers=bearer(ACME)).text, path


def test_without_tenant_tokens_the_console_reads_as_before(backend: EmbeddedBackend) -> None:
    with TestClient(create_app(backend, token=ADMIN), follow_redirects=False) as c:
        page = c.get("/fabric")
        assert page.status_code == 200 and 'id="topics"' in page.text
        assert all(t in c.get("/envelopes").text for t in ("s-acme", "s-globex"))
    assert TENANTS == ("acme", "globex")
