"""Bounded memos of the pure text functions, sized by one setting.

The screens and the arbiter tokenise the same texts again and again (a fact meets ~20 neighbours,
each met again by later facts), so their pure functions keep recent results. Each memo is an LRU
(``functools.lru_cache``, in C: a wrapper in Python would double the cost of a hit) of ``weight ×
CRP_CACHE_TEXTS`` entries. ``configure`` swaps in LRUs of a new size under the same module names,
so a memoised function is called through its module (``substitution._token_set``), never bound
by ``from … import`` elsewhere. A memo never changes a result: the functions are pure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_TEXTS = 50_000  # entries of a memo of weight 1 (``Settings.cache_texts``)


@dataclass(frozen=True)
class _Memo:
    module: str
    name: str
    fn: Callable[..., Any]
    weight: float
    typed: bool

    def build(self, texts: int) -> Any:
        return lru_cache(maxsize=max(1, int(texts * self.weight)), typed=self.typed)(self.fn)


_MEMOS: list[_Memo] = []
_size = [DEFAULT_TEXTS]


def text_memo(weight: float = 1.0, *, typed: bool = False) -> Callable[[F], F]:
    """Decorate a pure module-level function of texts: results kept in an LRU of ``weight ×
    cache_texts`` entries (``typed``: 1 and 1.0 are different keys)."""

    def decorate(fn: F) -> F:
        memo = _Memo(fn.__module__, fn.__name__, fn, weight, typed)
        _MEMOS.append(memo)
        cached: F = memo.build(_size[0])
        return cached

    return decorate


def configure(texts: int) -> None:
    """Bound every text memo by ``texts`` entries per unit of weight (emptied when the size changes)."""
    if texts < 1:
        raise ValueError(f"cache_texts must be >= 1, got {texts}")
    if texts == _size[0]:
        return
    _size[0] = texts
    for memo in _MEMOS:
        setattr(sys.modules[memo.module], memo.name, memo.build(texts))


def stats() -> dict[str, tuple[int, int]]:
    """``{module.function: (entries held, bound)}`` of every text memo."""
    out: dict[str, tuple[int, int]] = {}
    for memo in _MEMOS:
        info = getattr(sys.modules[memo.module], memo.name).cache_info()
        out[f"{memo.module}.{memo.name}"] = (info.currsize, info.maxsize or 0)
    return out


__all__ = ["DEFAULT_TEXTS", "configure", "stats", "text_memo"]
