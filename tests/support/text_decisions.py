"""The recorded decisions of the text rules (``tests/data/text_rule_decisions.jsonl.gz``).

Each line is one input and the decision ``crp_stream.core``'s conflicts, substitution and polarity
made on it before their fast paths (8d84df9): ``{"kind", "input", "old"}``, tuples written as lists.
The current modules must decide the same on every one (docs/development.md, "Recorded decisions").
A change of decision is a change of the rules: record it with them, never edit a line by hand.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections import defaultdict
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

CORPUS = Path(__file__).resolve().parents[1] / "data" / "text_rule_decisions.jsonl.gz"


@cache
def recorded() -> dict[str, list[dict[str, Any]]]:
    """The records by kind, in the order they were recorded."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            out[rec["kind"]].append(rec)
    return dict(out)


def plain(x: Any) -> Any:
    """A decision as it was recorded: tuples (named or not) as lists."""
    if isinstance(x, tuple | list):
        return [plain(v) for v in x]
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    return x


def array(d: dict[str, Any]) -> np.ndarray[Any, Any]:
    """A recorded array, bit for bit."""
    return np.frombuffer(base64.b64decode(d["b64"]), dtype=d["dtype"]).reshape(d["shape"]).copy()


def _diff(want: Any, now: Any) -> tuple[Any, Any]:
    if isinstance(want, dict) and isinstance(now, dict):  # only the decisions that differ
        keys = [k for k in want.keys() | now.keys() if want.get(k) != now.get(k)]
        return {k: want.get(k) for k in sorted(keys)}, {k: now.get(k) for k in sorted(keys)}
    return want, now


def assert_decides_as_recorded(
    kind: str, decide: Callable[[dict[str, Any]], Any], expect: Callable[[dict[str, Any], Any], Any] | None = None
) -> int:
    """``decide(input)`` equals the recorded decision (or ``expect(record, now)``) for every record of
    ``kind``; on a mismatch the message shows the input and both decisions. Returns how many were checked."""
    records = recorded()[kind]
    wrong = []
    for rec in records:
        now = plain(decide(rec["input"]))
        want = rec["old"] if expect is None else expect(rec, now)
        if now != want:
            wrong.append((rec["input"], *_diff(want, now)))
    shown = "\n".join(
        f"input:    {json.dumps(i, ensure_ascii=False)[:600]}\nrecorded: {w!r}\nnow:      {n!r}"
        for i, w, n in wrong[:5]
    )
    assert not wrong, f"{len(wrong)} of {len(records)} recorded {kind!r} inputs decide otherwise now:\n{shown}"
    return len(records)
