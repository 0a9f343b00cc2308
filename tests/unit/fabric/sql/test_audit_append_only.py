"""The audit log is append-only: no code path updates or deletes its rows.

A static scan of every module of ``crp_stream/`` (SQL text and SQLAlchemy calls), a self-test that the
scan finds what it must, a run that checks every audit snapshot extends the previous one, and the rule
that operator commands name an actor.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from pathlib import Path

import pytest

from crp_stream import events
from crp_stream.config import Settings
from crp_stream.testing import replay as replay_records

ROOT = Path(__file__).resolve().parents[4] / "crp_stream"
SQL = re.compile(
    r"\b(UPDATE|DELETE\s+FROM|TRUNCATE(\s+TABLE)?|REPLACE\s+INTO|INSERT\s+OR\s+REPLACE\s+INTO)"
    r"\s+[\"'`\[]?audit_log\b",
    re.IGNORECASE,
)
MUTATORS = {"update", "delete", "truncate"}


def _mentions_audit_log(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "audit_log":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "audit_log":
            return True
        if isinstance(sub, ast.Constant) and sub.value == "audit_log":
            return True
    return False


def mutations_of_audit_log(source: str) -> list[str]:
    """Each place in ``source`` that updates or deletes audit_log rows, as ``line: code``."""
    found: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
            found.append(f"{node.lineno}: SQL {node.value.strip()[:80]!r}")
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name not in MUTATORS:
            continue
        # update(t.audit_log) / delete(audit_log) / t.audit_log.update() / t.audit_log.delete()
        target = [*node.args, *(kw.value for kw in node.keywords)]
        if isinstance(func, ast.Attribute):
            target.append(func.value)
        if any(_mentions_audit_log(a) for a in target):
            found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return found


@pytest.mark.parametrize(
    "snippet",
    [
        "update(t.audit_log).where(t.audit_log.c.seq == 1).values(key='x')",
        "sa.delete(audit_log)",
        "t.audit_log.delete().where(t.audit_log.c.seq > 0)",
        "t.audit_log.update().values(details='{}')",
        "conn.execute(text('DELETE FROM audit_log WHERE seq = 1'))",
        "conn.exec_driver_sql('update \"audit_log\" set key = 1')",
        "conn.execute(text('TRUNCATE TABLE audit_log'))",
    ],
)
def test_the_scan_finds_a_mutation(snippet: str) -> None:
    assert mutations_of_audit_log(snippet), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        "t.audit_log.insert().values(event_id='e')",
        "select(t.audit_log).order_by(t.audit_log.c.seq)",
        "update(t.facts).values(status='stale')",
        "conn.execute(text('SELECT * FROM audit_log'))",
    ],
)
def test_the_scan_leaves_reads_and_appends_alone(snippet: str) -> None:
    assert mutations_of_audit_log(snippet) == []


def test_no_code_path_updates_or_deletes_audit_rows() -> None:
    files = sorted(ROOT.rglob("*.py"))
    assert len(files) > 30  # the scan really covers the package
    offenders = {str(p.relative_to(ROOT)): hits for p in files if (hits := mutations_of_audit_log(p.read_text()))}
    assert offenders == {}


def test_repository_offers_no_audit_mutation() -> None:
    from crp_stream.fabric.sql.repository import Repository

    names = [n for n in dir(Repository) if "audit" in n]
    assert names and all(n.startswith(("append_audit", "audit")) for n in names), names


def test_audit_log_only_grows_through_a_scenario(tmp_path: Path) -> None:

    from tests.support.arbiter import NOW_US, Pipeline, seed_incident

    p = Pipeline(tmp_path)
    try:
        history: list[list[dict[str, object]]] = []
        for record in seed_incident():
            p.feed([record])
            with p.uow() as uow:
                history.append(uow.repo.audit(limit=10_000))
        refresh = p.out("crp.refresh.requests")
        assert refresh, "the seed incident files a refresh request"
        p.command("resolve_refresh", refresh[0]["request_id"], NOW_US + 1, actor="alice")
        with p.uow() as uow:
            history.append(uow.repo.audit(limit=10_000))
    finally:
        p.close()
    assert len(history[-1]) >= 2
    for before, after in itertools.pairwise(history):
        assert after[: len(before)] == before  # every earlier row is still there, unchanged


# --- operator commands must name an actor --------------------------------------------------------------


@pytest.mark.parametrize(
    ("actor", "why"),
    [
        (None, "actor"),
        ("", "actor"),
        ("   ", "must name the actor"),
        (7, "actor"),
    ],
)
def test_operator_command_without_an_actor_is_rejected(tmp_path: Path, actor: object, why: str) -> None:
    value: dict[str, object] = {"command_id": "c1", "command": "resolve_refresh", "target_id": "r1"}
    if actor is not None:
        value["actor"] = actor
    out = [
        json.loads(x)
        for x in replay_records(
            [("crp.operator.commands", "ops", 1_000_000, json.dumps(value).encode())],
            Settings(embedder="hashing"),
            tmp_path,
        )
    ]
    dead = [o["value"] for o in out if o["topic"] == "crp.deadletter"]
    assert len(dead) == 1 and why in dead[0]["reason"], dead
    assert "actor" in dead[0]["reason"]


def test_the_event_model_refuses_an_empty_actor() -> None:
    with pytest.raises(events.Rejected, match="actor"):
        events.decode_input(
            "crp.operator.commands", b'{"command_id":"c","command":"resolve_refresh","target_id":"t","actor":""}'
        )
