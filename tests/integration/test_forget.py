"""Forgetting on the embedded default: ``crp-stream forget`` removes a tenant's document (or source,
or every fact) from the fabric and from the log, and after ``rebuild --yes`` no file of the data
directory holds the forgotten sentence (a byte search over every file, free pages included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from crp_stream.cli import main
from crp_stream.config import Settings
from crp_stream.testing import Pipeline

T0 = 1_793_000_000_000_000
MIN = 60_000_000
SECRET = "Erika Mustermann lives at 12 Linden Street and her badge number is 4711."
KEPT = "The badge office opens at eight."


def document(tenant: str | None, event_id: str, source: str, document_id: str, facts: list[str]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "event_id": event_id,
        "source": source,
        "source_type": "official",
        "document_id": document_id,
        "facts": [{"text": f} for f in facts],
    }
    return doc if tenant is None else {**doc, "tenant": tenant}


def scenario(p: Pipeline) -> None:
    """The secret in tenant acme (a document, a telemetry-free source) and, with the same sentence,
    in tenant globex; a window of acme that serves the secret; a malformed record quoting it."""
    p.publish("crp.documents", "hr", document("acme", "e1", "hr", "person-17", [SECRET, KEPT]), ts_us=T0)
    p.publish(
        "crp.documents", "hr", document("acme", "e2", "hr", "office", [KEPT + " Visitors sign in."]), ts_us=T0 + MIN
    )
    p.publish("crp.documents", "hr", document("globex", "e3", "hr", "person-17", [SECRET]), ts_us=T0 + 2 * MIN)
    p.publish(
        "crp.window.requests",
        "s1",
        {
            "tenant": "acme",
            "request_id": "r1",
            "session_id": "s1",
            "window": 1,
            "query": {"text": "Where does Erika Mustermann live?"},
            "sub_queries": [{"id": "q1", "text": "Erika Mustermann address"}],
            "policy": {"min_relevance": 0.05},
        },
        ts_us=T0 + 3 * MIN,
    )
    bad = {**document("acme", "e4", "hr", "person-17", [SECRET]), "trust": 7}  # a bad re-publish
    p.publish("crp.documents", "hr", bad, ts_us=T0 + 4 * MIN)


def files_holding(root: Path, needle: bytes) -> list[str]:
    return sorted(str(f.relative_to(root)) for f in root.rglob("*") if f.is_file() and needle in f.read_bytes())


def cli(*args: str) -> int:
    return main(list(args))


def _count(p: Pipeline, sql: str) -> int:
    with p.fabric.engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def test_forget_a_document_then_rebuild_leaves_no_byte_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    """On SQLite (the default) and on PostgreSQL: zero rows after ``rebuild``, and no file of the data
    directory (the log, the vector store, the SQLite fabric) holds the sentence."""
    data = tmp_path / "data" / "d"  # the SQLite fabric of ``database_url`` is beside it: searched too
    settings = Settings(data_dir=data, embedder="hashing", database_url=database_url)
    with Pipeline(settings) as p:
        scenario(p)
        assert any(SECRET in json.dumps(e) for e in p.out("crp.envelopes")), "the window served the secret"
        assert p.out("crp.deadletter"), "the malformed record quoting it was dead-lettered"
    assert files_holding(tmp_path, SECRET.encode()), "the sentence is in the data directory before"
    common = ["--data", str(data), "--embedder", "hashing", "--database", database_url]
    assert cli("forget", *common, "--tenant", "acme", "--document", "person-17", "--actor", "dpo") == 0
    assert "forgot 2 fact(s) of tenant acme (document:person-17)" in capsys.readouterr().out
    with Pipeline(settings) as p:
        assert _count(p, "SELECT COUNT(*) FROM facts WHERE tenant = 'acme' AND text LIKE '%Mustermann%'") == 0
        assert _count(p, "SELECT COUNT(*) FROM facts WHERE tenant = 'globex'") == 1  # another tenant's copy stays
        assert _count(p, "SELECT COUNT(*) FROM facts WHERE tenant = 'acme'") == 1  # the office document
        with p.fabric.engine.connect() as conn:
            forgotten = list(conn.execute(text("SELECT details FROM audit_log WHERE audit_type = 'FACTS_FORGOTTEN'")))
        assert len(forgotten) == 1
        details = json.loads(forgotten[0][0])
        assert details["facts"] == 2 and details["vectors"] == 2 and "Mustermann" not in forgotten[0][0]
    # the same sentence in globex is a different fact: forget it too, so the bytes can be searched
    assert cli("forget", *common, "--tenant", "globex", "--all", "--actor", "dpo") == 0
    assert cli("rebuild", *common, "--yes") == 0
    with Pipeline(settings) as p:
        assert _count(p, "SELECT COUNT(*) FROM facts WHERE text LIKE '%Mustermann%'") == 0
        assert _count(p, "SELECT COUNT(*) FROM facts WHERE tenant = 'globex'") == 0
        assert _count(p, "SELECT COUNT(*) FROM facts WHERE tenant = 'acme'") == 1  # the rest came back
        # a later window of acme cannot serve it
        p.publish(
            "crp.window.requests",
            "s2",
            {
                "tenant": "acme",
                "request_id": "r2",
                "session_id": "s2",
                "window": 1,
                "query": {"text": "Who lives on Linden Street, and what is the badge number?"},
                "sub_queries": [{"id": "q1", "text": "badge number of the person on Linden Street"}],
                "policy": {"min_relevance": 0.05},
            },
            ts_us=T0 + 10 * MIN,
        )
        served = [f["text"] for e in p.out("crp.envelopes") for f in e["facts"]]
        assert served and not any("Mustermann" in t for t in served)
    # (the window request quoting the name is a question, not the forgotten document: it stays)
    for needle in (SECRET, "Mustermann lives at", "12 Linden Street", "badge number is 4711"):
        assert files_holding(tmp_path, needle.encode()) == [], needle


def test_forget_rejects_a_malformed_target_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    assert cli("forget", "--data", str(data), "--tenant", "a|b", "--all", "--actor", "dpo") != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--tenant" in err and "Traceback" not in err
