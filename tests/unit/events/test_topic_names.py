"""Topic names are written in one place, crp_stream/events/topics.py; every other module imports them.

The scan reads every string the package's code holds (constants, the text parts of f-strings, module
templates), and every template, script and stylesheet shipped in it; docstrings and comments may name
a topic in a sentence.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import crp_stream
from crp_stream.events import topics

PACKAGE = Path(crp_stream.__file__).parent
HOME = PACKAGE / "events" / "topics.py"
NAMES = frozenset(topics.TOPICS)
# a topic name not followed by more of a name (crp.window.requests, not crp.window.requests_total)
NAMED = re.compile(
    "(?<![\\w.])(?:" + "|".join(re.escape(n) for n in sorted(NAMES, key=len, reverse=True)) + ")(?![\\w])"
)
SHIPPED = (".html", ".js", ".css", ".json", ".toml", ".txt", ".yaml", ".yml", ".sql")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def topic_literals(path: Path) -> list[str]:
    """``line: 'text'`` of every string in ``path``'s code (not a docstring) that names a topic."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docs = _docstrings(tree)
    return [
        f"{node.lineno}: {NAMED.search(node.value).group()!r}"  # type: ignore[union-attr]
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and NAMED.search(node.value)
    ]


def test_the_names_are_the_contract_topics() -> None:
    assert topics.ALL_TOPICS == topics.INPUT_TOPICS + topics.OUTPUT_TOPICS
    assert set(topics.ALL_TOPICS) == NAMES and len(NAMES) == 11
    assert all(n.startswith(topics.DEFAULT_PREFIX) for n in NAMES)
    assert topics.FACTS in topics.OUTPUT_TOPICS and topics.DOCUMENTS in topics.INPUT_TOPICS


def test_no_module_but_events_topics_spells_a_topic_name() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        hits = topic_literals(path)
        if hits:
            found[path.relative_to(PACKAGE).as_posix()] = hits
    assert found == {}, f"import the topic names from crp_stream.events.topics instead: {found}"
    assert len(topic_literals(HOME)) == len(NAMES)  # the scan sees them where they are defined


def test_no_file_shipped_in_the_package_spells_a_topic_name() -> None:
    shipped = [p for p in sorted(PACKAGE.rglob("*")) if p.suffix in SHIPPED]
    assert any(p.suffix == ".html" for p in shipped)  # the console's templates are among them
    found = {
        p.relative_to(PACKAGE).as_posix(): NAMED.findall(p.read_text(encoding="utf-8", errors="replace"))
        for p in shipped
    }
    assert {k: v for k, v in found.items() if v} == {}, "pass the topic names in from crp_stream.events.topics"


def test_the_scan_finds_a_literal(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Reads crp.facts."""\n'
        'X = "crp.facts"\n'
        'Y = f"{X}"  # crp.audit\n'
        "def f(n: int) -> str:\n"
        '    """Writes crp.audit."""\n'
        '    return f"{n} records on crp.deadletter"\n'
        'Z = "crp.window.requests_total crp.factsheet"\n',
        encoding="utf-8",
    )
    assert topic_literals(module) == ["2: 'crp.facts'", "6: 'crp.deadletter'"]
