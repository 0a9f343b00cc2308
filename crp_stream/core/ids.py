"""Derived identifiers: the same inputs always give the same id (replay determinism)."""

from __future__ import annotations

import hashlib

_SEP = "\x1f"


def derive_id(*parts: str) -> str:
    """Return a 32-hex-digit id derived from ``parts``; never random, so replays agree byte for byte."""
    digest = hashlib.sha256(_SEP.join(parts).encode("utf-8")).hexdigest()
    return digest[:32]


def point_id(fact_id: str) -> str:
    """A UUID-shaped id for vector stores that only accept UUIDs or integers, derived from ``fact_id``."""
    h = hashlib.sha256(fact_id.encode("utf-8")).hexdigest()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
