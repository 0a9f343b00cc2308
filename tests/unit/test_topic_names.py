"""Topic names are written in one place, crp_stream/events/topics.py; every other module imports them."""

from __future__ import annotations

import ast
from pathlib import Path

import crp_stream
from crp_stream.events import topics

PACKAGE = Path(crp_stream.__file__).parent
HOME = PACKAGE / "events" / "topics.py"
NAMES = frozenset(topics.TOPICS)


def topic_literals(path: Path) -> list[str]:
    """``line: 'name'`` of every string constant in ``path`` that is exactly a topic name (docstrings
    and comments that mention a topic in a sentence are not constants equal to its name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        f"{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    ]


def test_the_names_are_the_contract_topics() -> None:
    assert topics.ALL_TOPICS == topics.INPUT_TOPICS + topics.OUTPUT_TOPICS
    assert set(topics.ALL_TOPICS) == NAMES and len(NAMES) == 11
    assert all(n.startswith(topics.DEFAULT_PREFIX) for n in NAMES)
    assert topics.FACTS in topics.OUTPUT_TOPICS and topics.DOCUMENTS in topics.INPUT_TOPICS


def test_no_module_but_events_topics_spells_a_topic_name() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if path == HOME:
            continue
        hits = topic_literals(path)
        if hits:
            found[rel] = hits
    assert found == {}, f"import the topic names from crp_stream.events.topics instead: {found}"
    assert len(topic_literals(HOME)) == len(NAMES)  # the scan sees them where they are defined


def test_the_scan_finds_a_literal(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Reads crp.facts."""\nX = "crp.facts"\nY = f"{X}"  # crp.audit\n', encoding="utf-8")
    assert topic_literals(module) == ["2: 'crp.facts'"]
