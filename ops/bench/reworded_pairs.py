"""Reworded contradictions, pair by pair: which the text rules read, which are contested, which neither.

Every ConflictQA claim / negated claim pair (``memory_answer`` / ``counter_answer``) and every
PoisonedRAG adversarial passage against the same passage with the correct answer
(``counterfactual.poisonedrag``), each side from its own source, as the envelope reads them
(``conflicts.pair_pattern``). A pair is *read* when a contradiction pattern is found (arbitrated),
*contested* when an unread pattern is (served with the SPEC-027 §2.5 note), and *neither*
otherwise: the poison is then served uncontested if both meet in one envelope. Text rules only: no
fabric, no embedder, a few seconds.

    .venv/bin/python -m ops.bench.reworded_pairs [--show neither|contested|all]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

from crp_stream.core.conflicts import FactView, pair_pattern
from crp_stream.core.unread_pairs import is_unread
from ops.bench._common import DEFAULT_DATASETS
from ops.bench.counterfactual import poisonedrag


def conflictqa_pairs(datasets: Path) -> Iterator[tuple[str, str, str]]:
    path = datasets / "conflictqa" / "conflictQA-strategyQA-chatgpt.jsonl"
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if line.strip():
            r = json.loads(line)
            if r["memory_answer"].strip() != r["counter_answer"].strip():
                yield f"cqa{i}", r["memory_answer"], r["counter_answer"]


def poisonedrag_pairs(datasets: Path) -> Iterator[tuple[str, str, str]]:
    for s in poisonedrag(datasets, 10**6):
        for k, (true, poison) in enumerate(zip(s.true_docs, s.poison_docs, strict=True)):
            yield f"{s.qid}#{k}", true[0], poison[0]


def classify(a: str, b: str) -> str:
    fa = FactView("a", a, source="official_docs", source_type="official", trust=0.8)
    fb = FactView("b", b, source="community_notes", source_type="community", trust=0.3)
    found = pair_pattern(fa, fb)
    if found is None:
        return "neither"
    return "contested" if is_unread(found) else "read"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    ap.add_argument("--show", choices=["neither", "contested", "all"], default="neither")
    args = ap.parse_args()
    for name, pairs in (("ConflictQA", conflictqa_pairs), ("PoisonedRAG", poisonedrag_pairs)):
        counts = {"read": 0, "contested": 0, "neither": 0}
        shown: list[str] = []
        for pid, a, b in pairs(args.datasets):
            kind = classify(a, b)
            counts[kind] += 1
            if kind != "read" and args.show in (kind, "all"):
                shown.append(f"  {kind} {pid}: {a[:150]!r}\n      / {b[:150]!r}")
        total = sum(counts.values())
        print(
            f"{name}: {total} pairs; read {counts['read']}, not read {total - counts['read']} "
            f"(contested {counts['contested']}, neither {counts['neither']})"
        )
        for line in shown:
            print(line)


if __name__ == "__main__":
    main()
