"""The fabric's typed graph for CDGR (SPEC-025 §2.3, §5.1; the typed graph of SPEC-025 §7 / SPEC-009).

The graph holds similarity edges (SPEC-025 §1.3) and the structure edges ingestion adds (adjacency
between consecutive facts of a document, mention from a fact to the lead fact of a document whose
title it names). CDGR walks every kind (``walk_levels``); bridge values (``core.cdgr``) use the
structure edges only as extra paths.

Facts are ints ``0..n-1`` of a local index that the caller builds, and edges are given in (src, dst)
order, so every result is the same on every replay.

API
---
- ``EDGE_KINDS``: ``similarity``, ``adjacency``, ``mention`` (the ``via`` of an envelope fact).
- ``title_key(title) -> str | None``: the name a text must contain to mention a document.
- ``mention_spans(text, max_words=8) -> list[str]``: every word n-gram of a text (title lookup keys).
- ``names_title(text, key) -> bool``: ``key`` occurs in ``text`` on word boundaries.
- ``title_words(text) -> list[str]``: the words a fact is found by when a title it may name is new;
  ``key_words(key)``: those of a title key.
- ``walk_levels(seeds, src, dst, max_hops) -> (levels, depth)``: BFS level of every reached int
  (-1: not reached) and the depth actually walked (SPEC-025 §5.1).
"""

from __future__ import annotations

import re

import numpy as np
import numpy.ma  # np.unique imports it on first use (numpy 2): here, not in a request's walk
from numpy.typing import ArrayLike, NDArray

from crp_stream.core import graph_kernels

EDGE_KINDS = ("similarity", "adjacency", "mention")
MIN_TITLE_CHARS = 4  # "It", "The": too short to name a document rather than to be a word
MAX_TITLE_WORDS = 8

_PAREN = re.compile(r"\s*\([^()]*\)\s*$")
_WORD = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*", re.UNICODE)


def title_key(title: str | None) -> str | None:
    """Documents keep their structure: the words a text must contain to name a document.

    A trailing disambiguation in parentheses is dropped ("Michael Jackson (writer)" is named as
    "michael jackson"); words are lowercased (queries and titles disagree on case: "I Can'T See
    Myself Leaving You"). None when nothing of at least MIN_TITLE_CHARS characters remains.
    """
    if not title:
        return None
    words = _WORD.findall(_PAREN.sub("", title))
    key = " ".join(words).lower()
    if len(key) < MIN_TITLE_CHARS or len(words) > MAX_TITLE_WORDS:
        return None
    return key


def mention_spans(text: str, max_words: int = MAX_TITLE_WORDS) -> list[str]:
    """Every run of 1..max_words consecutive words of ``text``, lowercased, joined by one space,
    sorted and unique: the keys under which the titles a text names are looked up (``title_key``).
    A one-word span counts only where the text capitalises it: "Bridge" may be a name, "bridge" is
    a word."""
    words = _WORD.findall(text)
    low = [w.lower() for w in words]
    spans = {" ".join(low[i : i + n]) for n in range(2, max_words + 1) for i in range(len(words) - n + 1)}
    spans |= {low[i] for i, w in enumerate(words) if w[:1].isupper() or w[:1].isdigit()}
    return sorted(s for s in spans if len(s) >= MIN_TITLE_CHARS)


def names_title(text: str, key: str) -> bool:
    """True when ``text`` names the title ``key`` (``title_key`` form), as ``mention_spans`` reads it."""
    return key in set(mention_spans(text, max(len(key.split()), 1)))


# words too common to find the facts that may name a title by (a title made of them only is looked for
# by scanning the texts); what they are changes how fast, never what is found
_COMMON_WORDS = frozenset(
    {
        "about",
        "after",
        "also",
        "and",
        "are",
        "been",
        "before",
        "but",
        "for",
        "from",
        "had",
        "has",
        "have",
        "her",
        "his",
        "into",
        "its",
        "not",
        "one",
        "that",
        "the",
        "their",
        "then",
        "there",
        "they",
        "this",
        "was",
        "were",
        "which",
        "who",
        "with",
    }
)
MAX_WORD_CHARS = 64


def title_words(text: str) -> list[str]:
    """SPEC-025 §7 (mention edges, whichever came first): the words under which a fact is found when
    a document titled by words of its text arrives later: its words as ``mention_spans`` reads them
    (lowercased), sorted and unique, but for words under 3 characters, very common ones and words
    over ``MAX_WORD_CHARS``."""
    return _indexed({w.lower() for w in _WORD.findall(text)})


def key_words(key: str) -> list[str]:
    """The words of a title key (``title_key``) that ``title_words`` indexes. A text that
    ``names_title`` the key holds each of them among its own lowercased words, so the facts found under
    any one of them include every fact that names the key. Empty: the key is found by a scan."""
    return _indexed(set(key.split(" ")))


def _indexed(words: set[str]) -> list[str]:
    return sorted(w for w in words if 3 <= len(w) <= MAX_WORD_CHARS and w not in _COMMON_WORDS)


def walk_levels(seeds: ArrayLike, src: ArrayLike, dst: ArrayLike, max_hops: int) -> tuple[NDArray[np.int64], int]:
    """SPEC-025 §2.3/§5.1: breadth-first levels from the seeds over ``src -> dst`` edges, up to
    ``max_hops`` (1-3). Returns the level of every int (0 for seeds, -1 when not reached) and the
    depth actually walked: the deepest level that reached a new fact (0 when none did)."""
    if max_hops < 0:
        raise ValueError("max_hops must be >= 0")
    s, d = np.asarray(src, dtype=np.int64).reshape(-1), np.asarray(dst, dtype=np.int64).reshape(-1)
    a = np.asarray(seeds, dtype=np.int64).reshape(-1)
    size = int(max(s.max(initial=-1), d.max(initial=-1), a.max(initial=-1))) + 1
    return graph_kernels.levels(a, s, d, size, max_hops)  # one pass over the edges per level, compiled


__all__ = ["EDGE_KINDS", "mention_spans", "names_title", "title_key", "walk_levels"]
