"""Envelope packing (SPEC-003 via SPEC-025 §2.6 and SPEC-027 §4 step 6; SPEC-024 §4.2 anchor text).

API
---
- ``sandwich_order(scores) -> list[int]``: primacy-recency order of indices: best first, second-best
  last, then alternating inward (ranks 0, 2, 4, ..., 5, 3, 1); equal scores by index.
- ``place_connectors(anchor_order, connectors, adjacency=None) -> list[str]``: insert each connector
  ``(id, bridged_anchor_ids)`` between the anchors it bridges, adjacent to them, never first or last.
- ``pack_envelope(anchor_ids, anchor_scores, connectors, adjacency=None) -> list[str]``: both steps.
- ``residual_task_anchor(labels) -> str``: ``"Remaining sections to complete: a, b"``.
- ``backward_summary(covered) -> str`` (SPEC-024 §4.1/§4.3): ``"Previously covered: window 1: a, b;
  window 2: c"``, the backward-looking summary the session keeps beside the anchor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

RESIDUAL_ANCHOR_PREFIX = "Remaining sections to complete: "
BACKWARD_SUMMARY_PREFIX = "Previously covered: "


def sandwich_order(scores: ArrayLike) -> list[int]:
    """SPEC-025 §2.6 / SPEC-003: primacy and recency positions hold the highest-scoring facts.

    Highest at the start, second-highest at the end, third second, fourth second-to-last, and so on
    inward, so the weakest facts sit in the middle where models attend least.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    ranked = [int(i) for i in np.lexsort((np.arange(s.shape[0]), -s))]
    return ranked[0::2] + ranked[1::2][::-1]


def _gap_for(bridged: Sequence[str], order: Sequence[str]) -> int:
    """Insertion gap g (between order[g-1] and order[g]), 1 <= g <= len(order) - 1."""
    pos = sorted({order.index(a) for a in bridged if a in order})
    last = len(order) - 1
    if not pos:
        return (last + 1) // 2
    lo, hi = (pos[0], pos[-1]) if len(pos) > 1 else (max(pos[0] - 1, 0), min(pos[0] + 1, last))
    members = set(pos)
    # Among gaps between the outermost bridged anchors, prefer one touching two bridged anchors.
    return max(range(lo + 1, hi + 1), key=lambda g: ((g - 1 in members) + (g in members), -g))


def place_connectors(
    anchor_order: Sequence[str],
    connectors: Sequence[tuple[str, Sequence[str]]],
    adjacency: Mapping[str, Mapping[str, float]] | None = None,
) -> list[str]:
    """SPEC-025 §2.6: connectors sit ADJACENT to the anchors they bridge, never in the primacy/recency slots.

    Each connector goes into the gap between its outermost bridged anchors that touches the most of
    them (the leftmost such gap on ties), so the model reads anchor -> connector -> anchor. Several
    connectors in one gap keep their input order unless ``adjacency`` is given: then the connector
    closer to the left anchor comes first (weight to left minus weight to right, descending), which
    turns A, D with connectors B (edge to A) and C (edge to D) into A -> B -> C -> D. With fewer than
    two anchors there is no inner gap: connectors follow the anchors.
    """
    order = list(anchor_order)
    ids = [c for c, _ in connectors]
    if len(set(ids)) != len(ids) or set(ids) & set(order):
        raise ValueError("connector ids must be unique and distinct from anchor ids")
    if len(order) < 2:
        return order + ids
    gaps: dict[int, list[tuple[float, int, str]]] = {}
    for k, (cid, bridged) in enumerate(connectors):
        g = _gap_for(bridged, order)
        lean = 0.0
        if adjacency is not None:
            nbrs = adjacency.get(cid, {})
            lean = float(nbrs.get(order[g - 1], 0.0)) - float(nbrs.get(order[g], 0.0))
        gaps.setdefault(g, []).append((-lean, k, cid))
    out: list[str] = []
    for g, anchor in enumerate(order):
        out.extend(cid for _, _, cid in sorted(gaps.get(g, [])))
        out.append(anchor)
    return out


def pack_envelope(
    anchor_ids: Sequence[str],
    anchor_scores: ArrayLike,
    connectors: Sequence[tuple[str, Sequence[str]]],
    adjacency: Mapping[str, Mapping[str, float]] | None = None,
) -> list[str]:
    """SPEC-027 §4 step 6: primacy-recency sandwich of the anchors, connectors adjacent to their anchors."""
    order = [anchor_ids[i] for i in sandwich_order(anchor_scores)]
    return place_connectors(order, connectors, adjacency)


def residual_task_anchor(labels: Sequence[str]) -> str:
    """SPEC-024 §4.2: the forward-looking continuation: ``Remaining sections to complete: a, b``.

    Exactly the seed's f-string, so an empty Residual Set gives the bare prefix.
    """
    return f"{RESIDUAL_ANCHOR_PREFIX}{', '.join(labels)}"


def backward_summary(covered: Sequence[tuple[int, str]]) -> str:
    """SPEC-024 §4.1/§4.3: the backward-looking continuation, ``Previously covered: {summary}``.

    ``covered`` is every addressed sub-query's (window, label), in the order the windows reported
    them; the summary lists each window's labels in that order (a label once per window). It grows
    with every window, which is why §4.2 replaces it by the Residual Task Anchor in the continuation
    context; §4.3 keeps it in the session, where an operator can include it. No window yet: the bare
    prefix.
    """
    by_window: dict[int, list[str]] = {}
    for window, label in covered:
        labels = by_window.setdefault(window, [])
        if label not in labels:
            labels.append(label)
    parts = [f"window {w}: {', '.join(labels)}" for w, labels in sorted(by_window.items())]
    return f"{BACKWARD_SUMMARY_PREFIX}{'; '.join(parts)}"
