"""SPEC-027 §2.2: documents of one numbered series, whose statements name their subject
only in the title."""

from __future__ import annotations

import re

_TITLE_WORD = re.compile(r"\w+")


def _title_template(title: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(words with every number-bearing word replaced by one placeholder, the number-bearing words)."""
    words = _TITLE_WORD.findall(title.casefold())
    numbered = tuple(w for w in words if any(c.isdigit() for c in w))
    return tuple("\x00n" if any(c.isdigit() for c in w) else w for w in words), numbered


def numbered_sibling_titles(title_a: str | None, title_b: str | None) -> bool:
    """SPEC-027 §2.2: are two documents members of one numbered series ("2015–16 Iowa
    State Cyclones men's basketball team" / "2016–17 ..."), i.e. one title template with different
    numbers? Such articles are written from one template, and a statement of each ("The Cyclones were
    coached by X, who was in his second / 1st season") names its subject (the season) only in the
    title: two facts, not a copy with its answer swapped. Untitled documents, equal titles and titles
    that differ in a word are never siblings: a copy keeps its original's title or has none."""
    if not title_a or not title_b:
        return False
    (ta, na), (tb, nb) = _title_template(title_a), _title_template(title_b)
    return bool(na) and ta == tb and na != nb


__all__ = ["numbered_sibling_titles"]
