"""Docs that must agree with the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "crp_stream"

# core functions behind the rules docs/retrieval.md and docs/graph.md describe: the pipeline must call each one
RULES = (
    "update_residual_set",
    "recency_penalised_count",
    "coverage_partitions_header",
    "depth_from_words",
    "report_depth",
    "marginal_residual",
    "residual_done",
    "ngram_guard_diagnostic",
    "hard_expired",
    "typed_bridge_values",
    "connector_score",
    "admit_connectors",
    "refill_anchors",
    "serves_facts",
    "ckf_exhausted_note",
    "backward_summary",
)


def _callers(name: str) -> list[Path]:
    pattern = re.compile(rf"\b{name}\(")
    return [
        p
        for p in PKG.rglob("*.py")
        if p.name != "__init__.py"
        and pattern.search(p.read_text())
        and not (
            p.parent.name == "core" and f"def {name}(" in p.read_text() and len(pattern.findall(p.read_text())) == 1
        )
    ]


def test_every_named_core_rule_is_called_by_the_pipeline() -> None:
    uncalled = [n for n in RULES if not _callers(n)]
    assert uncalled == []


def test_the_configuration_table_lists_agreement_window_and_the_barrier() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Configuration") :]
    assert "CRP_AGREEMENT_WINDOW" in table
    assert "CRP_BARRIER_WAIT" in table


def test_arbiter_doc_describes_the_lagging_rule_and_no_longer_calls_the_setting_proposed() -> None:
    doc = (ROOT / "docs" / "arbiter.md").read_text()
    assert "proposed `Settings` field" not in doc
    assert "### The lagging rule" in doc
