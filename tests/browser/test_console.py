"""The operator console in a real browser (headless Debian Chromium via Selenium and chromedriver):
the sample plus a poisoning scenario, every page opened, a refresh request resolved and a quarantine
candidate rejected as an operator would, and what the pages and the topics show afterwards.

Fails, never skips, without Chromium (ops/setup installs it). ``CRP_CONSOLE_SCREENSHOTS=docs/console``
refreshes the screenshots of docs/console.md.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import console as cs

TOKEN = "op-token-5f2c9e7d"  # a test secret: it must appear in no page and no log line


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("console-data")
    cs.prepare(d)
    return d


@pytest.fixture(scope="module")
def server(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("console-log") / "console.log"
    with cs.serve(data, TOKEN, log) as url:
        yield url, log


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    d = cs.browser()
    try:
        yield d
    finally:
        d.quit()


def by_css(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, css)


def all_css(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, css))


def submit(driver: Any, form: str, actor: str, token: str | None, reason: str = "") -> None:
    if actor:
        by_css(driver, f"#{form} input[name=actor]").send_keys(actor)
    if reason:
        by_css(driver, f"#{form} input[name=reason]").send_keys(reason)
    if token:
        by_css(driver, f"#{form} input[name=token]").send_keys(token)
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    button = by_css(driver, f"#{form} button[type=submit]")
    button.click()

    def next_page(d: Any) -> bool:
        try:
            button.is_enabled()  # raises once the page it belonged to is gone
            return False
        except WebDriverException:  # stale element, or chromedriver's "node does not belong to the document"
            return bool(d.execute_script("return document.readyState") == "complete")

    WebDriverWait(driver, 30, ignored_exceptions=(WebDriverException,)).until(next_page)


def ids(driver: Any, url: str, table: str) -> list[str]:
    driver.get(url)
    return [r.get_attribute("data-id") for r in all_css(driver, f"#{table} tbody tr")]


def test_every_page_renders_the_sample(server: tuple[str, Path], driver: Any, data: Path, tmp_path: Path) -> None:
    url, _log = server
    [rid] = ids(driver, url + "/refresh", "refresh-requests")
    assert "vendor_docs" in by_css(driver, "#refresh-requests").text and "1000 rps → 250 rps" in driver.page_source
    cs.screenshot(driver, "refresh-list", tmp_path)

    driver.get(f"{url}/refresh/{rid}")
    rows = {r.get_attribute("data-source"): r.text for r in all_css(driver, "table.grid tr[data-source]")}
    assert {"vendor_docs", "field_telemetry", "community_notes"} <= set(rows)
    assert "0.90" in rows["vendor_docs"] and "1000 rps" in rows["vendor_docs"]
    assert "250 rps" in rows["field_telemetry"] and "0.40" in rows["field_telemetry"]
    dots = all_css(driver, "svg.timeline circle title")
    evidence = sum(int(m) for m in re.findall(r"<td class=\"num\">(\d+)</td>", driver.page_source))
    assert len(dots) == evidence > 0  # one dot per record (legend dots have no title)
    assert by_css(driver, "#status").text == "open" and all_css(driver, "#resolve-form")
    cs.screenshot(driver, "refresh-detail", tmp_path)

    [cid_a, _cid_b] = ids(driver, url + "/quarantine", "candidates")  # field_telemetry, community_notes
    cs.screenshot(driver, "quarantine-list", tmp_path)
    driver.get(f"{url}/quarantine/{cid_a}")
    assert "250 rps" in by_css(driver, "section.suspect").text
    trusted = by_css(driver, "section.trusted").text
    assert "1000 rps" in trusted and "vendor_docs" in trusted
    assert all_css(driver, "#approve-form") and all_css(driver, "#reject-form")
    cs.screenshot(driver, "quarantine-detail", tmp_path)

    driver.get(url + "/audit?type=STALE_HIGH_TRUST")
    types = {r.get_attribute("data-type") for r in all_css(driver, "#audit-rows tr[data-seq]")}
    assert types == {"STALE_HIGH_TRUST"}
    driver.get(url + "/audit")
    cs.screenshot(driver, "audit", tmp_path)

    driver.get(url + "/envelopes")
    by_css(driver, "#sessions a").click()
    # the score moves with the wall clock (recency decay of the sample's dated facts), so the page must
    # show the envelope's own header, not a fixed number
    envelope = cs.topic_values(data, "crp.envelopes")[0]
    score = envelope["headers"]["CRP-Context-Coverage-Score"]
    assert 0.0 < score <= 1.0
    assert by_css(driver, "#window-1 .coverage").text.startswith(f"{score} (depth ")
    assert "Rate limits" in by_css(driver, "#window-1 .residual").text
    assert "NUMBER_CHANGED" in by_css(driver, "#window-1 .conflicts").text
    roles = {r.text for r in all_css(driver, "#window-1 table.facts td span.tag")}
    assert roles <= {"anchor", "connector"} and "anchor" in roles
    vias = {f["via"] for f in envelope["facts"] if "via" in f}  # the typed graph's field, shown when present
    assert all(f"via: {v}" in by_css(driver, "#window-1 table.facts").text for v in vias)
    assert "CRP-Context-Conflicts-Resolved" in by_css(driver, "#window-1 table.headers").text
    cs.screenshot(driver, "envelope", tmp_path)

    driver.get(url + "/fabric")
    facts = {r.get_attribute("data-source"): r.text for r in all_css(driver, "#facts tr[data-source]")}
    assert "stale" in driver.page_source and "vendor_docs" in facts
    topics = {r.get_attribute("data-topic"): r.text for r in all_css(driver, "#topics tr[data-topic]")}
    assert "ingest:" in topics["crp.documents"] and "(lag 0)" in topics["crp.documents"]
    assert "all-MiniLM" in by_css(driver, "#model").text and "min_relevance" in by_css(driver, "#model").text
    cs.screenshot(driver, "fabric", tmp_path)


def test_write_without_or_with_a_wrong_token_is_refused_and_audited(
    server: tuple[str, Path], driver: Any, data: Path
) -> None:
    url, log = server
    [rid] = ids(driver, url + "/refresh", "refresh-requests")
    commands_before = len(cs.topic_values(data, "crp.operator.commands"))
    driver.get(f"{url}/refresh/{rid}")
    submit(driver, "resolve-form", "mallory", None)
    assert "operator token is required" in by_css(driver, "#error").text
    driver.get(f"{url}/refresh/{rid}")
    submit(driver, "resolve-form", "mallory", "not-the-token")
    assert "token is wrong" in by_css(driver, "#error").text
    denied = [a for a in cs.topic_values(data, "crp.audit") if a["audit_type"] == "ACCESS_DENIED"]
    assert [(a["details"]["status"], a["details"]["actor"]) for a in denied[-2:]] == [
        (401, "mallory"),
        (403, "mallory"),
    ]
    assert len(cs.topic_values(data, "crp.operator.commands")) == commands_before  # nothing published
    driver.get(url + "/audit?type=ACCESS_DENIED")
    assert len(all_css(driver, "#audit-rows tr[data-seq]")) >= 2
    assert TOKEN not in driver.page_source and "not-the-token" not in str(denied)
    assert TOKEN not in log.read_text()


def test_a_post_without_the_csrf_field_is_refused(server: tuple[str, Path], data: Path) -> None:
    url, _log = server
    [req] = [r for r in cs.topic_values(data, "crp.refresh.requests")]
    body = urllib.parse.urlencode({"actor": "eve", "token": TOKEN}).encode()
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{url}/refresh/{req['request_id']}/resolve", data=body, timeout=10)
    assert err.value.code == 403 and "CSRF" in err.value.read().decode()
    assert any(
        a["audit_type"] == "ACCESS_DENIED" and a["details"]["actor"] == "eve"
        for a in cs.topic_values(data, "crp.audit")
    )


def test_a_command_for_an_unknown_id_shows_an_error_and_publishes_nothing(
    server: tuple[str, Path], driver: Any, data: Path
) -> None:
    url, _log = server
    [rid] = ids(driver, url + "/refresh", "refresh-requests")
    before = len(cs.topic_values(data, "crp.operator.commands"))
    driver.get(f"{url}/refresh/{rid}")
    driver.execute_script("document.getElementById('resolve-form').action = '/refresh/0000dead/resolve'")
    submit(driver, "resolve-form", "alice", TOKEN)
    assert "No such refresh request" in by_css(driver, "#error").text and "nothing was published" in driver.page_source
    assert len(cs.topic_values(data, "crp.operator.commands")) == before


def test_acknowledge_then_resolve_a_refresh_request(server: tuple[str, Path], driver: Any, data: Path) -> None:
    url, _log = server
    [rid] = ids(driver, url + "/refresh", "refresh-requests")
    driver.get(f"{url}/refresh/{rid}")
    submit(driver, "acknowledge-form", "alice", TOKEN, reason="ticket VEN-7")
    assert by_css(driver, "#status").text == "open" and "alice: ticket VEN-7" in by_css(driver, ".acknowledged").text
    [ack] = [a for a in cs.topic_values(data, "crp.audit") if a["audit_type"] == "REFRESH_ACKNOWLEDGED"]
    assert ack["details"]["request_id"] == rid and ack["details"]["actor"] == "alice"
    submit(driver, "resolve-form", "alice", TOKEN, reason="vendor confirmed 250 rps")
    assert by_css(driver, "#status").text == "resolved" and "resolve_refresh" in by_css(driver, "#flash").text
    assert "alice" in by_css(driver, "#resolved-by").text and not all_css(driver, "#resolve-form")
    cmds = [
        (c["command"], c["actor"], c["reason"])
        for c in cs.topic_values(data, "crp.operator.commands")
        if c["target_id"] == rid
    ]
    assert cmds == [
        ("acknowledge_refresh", "alice", "ticket VEN-7"),
        ("resolve_refresh", "alice", "vendor confirmed 250 rps"),
    ]
    [done] = [a for a in cs.topic_values(data, "crp.audit") if a["audit_type"] == "REFRESH_RESOLVED"]
    assert done["details"]["request_id"] == rid and done["details"]["actor"] == "alice"
    assert ids(driver, url + "/refresh", "refresh-requests") == []
    assert ids(driver, url + "/refresh?status=resolved", "refresh-requests") == [rid]


def test_reject_a_quarantine_candidate(server: tuple[str, Path], driver: Any, data: Path, tmp_path: Path) -> None:
    url, _log = server
    cid = ids(driver, url + "/quarantine", "candidates")[0]
    driver.get(f"{url}/quarantine/{cid}")
    suspect = by_css(driver, "section.suspect tr[data-source]").get_attribute("data-source")
    submit(driver, "reject-form", "carol", TOKEN, reason="telemetry is right")
    assert by_css(driver, "#status").text == "released" and "carol" in by_css(driver, "#decided-by").text
    cs.screenshot(driver, "quarantine-decided", tmp_path)
    [cmd] = [c for c in cs.topic_values(data, "crp.operator.commands") if c["target_id"] == cid]
    assert (cmd["command"], cmd["actor"]) == ("release_quarantine", "carol")
    [rel] = [a for a in cs.topic_values(data, "crp.audit") if a["audit_type"] == "QUARANTINE_RELEASED"]
    assert rel["details"]["candidate_id"] == cid and rel["details"]["actor"] == "carol"
    assert cid not in ids(driver, url + "/quarantine", "candidates")
    assert ids(driver, url + "/quarantine?status=released", "candidates") == [cid]
    quarantined = [
        f
        for f in cs.topic_values(data, "crp.facts")
        if f["type"] == "FactStatusChanged" and f["status"] == "quarantined"
    ]
    assert quarantined == []  # rejecting a candidate quarantines nothing
    driver.get(url + "/fabric")
    assert "quarantined" not in by_css(driver, f"#facts tr[data-source='{suspect}']").text


def test_approve_the_other_candidate_quarantines_its_facts(server: tuple[str, Path], driver: Any, data: Path) -> None:
    url, _log = server
    [cid] = ids(driver, url + "/quarantine", "candidates")  # the one the reject test left pending
    driver.get(f"{url}/quarantine/{cid}")
    suspect = by_css(driver, "section.suspect tr[data-source]").get_attribute("data-source")
    submit(driver, "approve-form", "dora", TOKEN, reason="confirmed poisoning")
    assert by_css(driver, "#status").text == "confirmed" and "dora" in by_css(driver, "#decided-by").text
    [q] = [a for a in cs.topic_values(data, "crp.audit") if a["audit_type"] == "FACT_QUARANTINED"]
    assert q["details"]["candidate_id"] == cid and q["details"]["actor"] == "dora"
    changed = {
        f["fact_id"]
        for f in cs.topic_values(data, "crp.facts")
        if f["type"] == "FactStatusChanged" and f["status"] == "quarantined"
    }
    assert changed and changed == set(q["details"]["fact_ids"])
    driver.get(url + "/fabric")
    assert "quarantined" in driver.page_source
    row = by_css(driver, f"#facts tr[data-source='{suspect}']").text
    assert str(len(changed)) in row


def test_the_audit_tail_shows_new_events_without_a_reload(server: tuple[str, Path], driver: Any) -> None:
    url, _log = server
    driver.get(url + "/audit?type=ACCESS_DENIED")
    before = len(all_css(driver, "#audit-rows tr[data-seq]"))
    driver.execute_script("window.__marker = 1")  # survives only if the page is not reloaded
    body = urllib.parse.urlencode({"actor": "tail-probe"}).encode()
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"{url}/refresh/x/resolve", data=body, timeout=10)
    cs.wait_for("the new audit row", lambda: len(all_css(driver, "#audit-rows tr[data-seq]")) == before + 1)
    assert driver.execute_script("return window.__marker") == 1
    assert "tail-probe" in all_css(driver, "#audit-rows tr[data-seq]")[-1].get_attribute("innerHTML")


def test_forget_a_document_from_the_fabric_page_after_a_confirmation(
    server: tuple[str, Path], driver: Any, data: Path
) -> None:
    """Last: it removes the sample's community thread. The button shows a preview (counts, never text);
    only the confirmation with its box ticked publishes the operator command."""
    from selenium.webdriver.support.ui import Select

    url, _log = server
    thread = [f for f in cs.topic_values(data, "crp.facts") if f.get("origin_event_id") == "sample-community-rate"]
    texts = [f["text"] for f in thread]
    assert texts
    driver.get(url + "/fabric")
    assert all_css(driver, '#facts tr[data-source="community_notes"]')
    Select(by_css(driver, "#forget select[name=kind]")).select_by_value("document")
    by_css(driver, "#forget input[name=name]").send_keys("rate-limit-thread")
    by_css(driver, "#forget button[type=submit]").click()
    cs.wait_for("the preview", lambda: all_css(driver, "#forget-preview"))
    preview = by_css(driver, "#forget-preview").text
    assert re.search(r"removes \d+ fact", preview) and all(t not in driver.page_source for t in texts)
    by_css(driver, "#forget-confirm input[name=confirm]").click()
    submit(driver, "forget-confirm", "dpo", TOKEN, reason="erasure request")
    cs.wait_for("the fabric page", lambda: all_css(driver, "#done"))
    # the embedded log forgot too: of the thread's facts only their "forgotten" status changes are left (ids only)
    left = [f for f in cs.topic_values(data, "crp.facts") if f.get("fact_id") in {t["fact_id"] for t in thread}]
    assert sorted((f["type"], f["status"]) for f in left) == [("FactStatusChanged", "forgotten")] * len(thread)
    assert all(t not in str(left) for t in texts)
    [cmd] = [c for c in cs.topic_values(data, "crp.operator.commands") if c["command"] == "forget"]
    assert (cmd["target_id"], cmd["actor"]) == ("document:rate-limit-thread", "dpo")
    [event] = [a for a in cs.topic_values(data, "crp.audit") if a["audit_type"] == "FACTS_FORGOTTEN"]
    assert event["details"]["facts"] == len(thread) and all(t not in str(event) for t in texts)
