"""Splitting a document's text into sentence facts (CONTRACT: ``text`` without ``facts``)."""

from __future__ import annotations

import re

# A sentence ends at . ! ? followed by space and an upper-case letter, digit or quote; common
# abbreviations and decimals ("e.g.", "v1.2", "3.5") do not end one.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREV = re.compile(r"\b(?:e\.g|i\.e|etc|vs|Mr|Mrs|Dr|St|No|Fig|approx|cf)\.$", re.IGNORECASE)
_WS = re.compile(r"\s+")


def split_sentences(text: str, max_chars: int = 2000) -> list[str]:
    """Split ``text`` into trimmed sentences; paragraphs (blank lines) always end a sentence.

    Over-long sentences are cut at ``max_chars`` on a word boundary so one fact never exceeds it.
    """
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = _WS.sub(" ", para).strip()
        if not para:
            continue
        pieces = _BOUNDARY.split(para)
        buf = ""
        for piece in pieces:
            buf = f"{buf} {piece}".strip() if buf else piece.strip()
            if _ABBREV.search(buf):
                continue
            out.extend(_cut(buf, max_chars))
            buf = ""
        if buf:
            out.extend(_cut(buf, max_chars))
    return [s for s in out if s]


def _cut(sentence: str, max_chars: int) -> list[str]:
    parts: list[str] = []
    while len(sentence) > max_chars:
        cut = sentence.rfind(" ", 0, max_chars)
        cut = cut if cut > 0 else max_chars
        parts.append(sentence[:cut].strip())
        sentence = sentence[cut:].strip()
    if sentence:
        parts.append(sentence)
    return parts
