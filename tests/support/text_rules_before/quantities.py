"""Quantities in text (SPEC-027 §2.2, NUMBER_CHANGED; SPEC-005 §3b): numbers in canonical units, so
"120 ms" and "0.12 s" are one value and "1 krps" is 1000 rps."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

Num = tuple[float, str | None]

_UNIT_TABLE: dict[str, dict[str, float]] = {
    "rps": {
        "rps": 1.0,
        "req/s": 1.0,
        "req/sec": 1.0,
        "reqs/s": 1.0,
        "requests/s": 1.0,
        "requests/sec": 1.0,
        "requests per second": 1.0,
        "qps": 1.0,
        "krps": 1e3,
    },
    "s": {
        "ns": 1e-9,
        "us": 1e-6,
        "µs": 1e-6,
        "μs": 1e-6,
        "ms": 1e-3,
        "msec": 1e-3,
        "millisecond": 1e-3,
        "milliseconds": 1e-3,
        "s": 1.0,
        "sec": 1.0,
        "secs": 1.0,
        "second": 1.0,
        "seconds": 1.0,
        "min": 60.0,
        "mins": 60.0,
        "minute": 60.0,
        "minutes": 60.0,
        "h": 3600.0,
        "hr": 3600.0,
        "hrs": 3600.0,
        "hour": 3600.0,
        "hours": 3600.0,
        "d": 86400.0,
        "day": 86400.0,
        "days": 86400.0,
    },
    "B": {
        "byte": 1.0,
        "bytes": 1.0,
        "kb": 1e3,
        "mb": 1e6,
        "gb": 1e9,
        "tb": 1e12,
        "ki": 2.0**10,
        "kib": 2.0**10,
        "mi": 2.0**20,
        "mib": 2.0**20,
        "gi": 2.0**30,
        "gib": 2.0**30,
        "ti": 2.0**40,
        "tib": 2.0**40,
    },
    "%": {"%": 1.0, "percent": 1.0, "pct": 1.0},
}
_UNITS = {unit: (family, f) for family, table in _UNIT_TABLE.items() for unit, f in table.items()}

_UNIT_ALT = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
NUM_RE = re.compile(
    r"(?<![\w./-])(?P<num>-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)(?P<k>[kK])?"
    rf"(?:\s*(?P<unit>{_UNIT_ALT}))?(?!\w)",
    re.IGNORECASE,
)


def canonical_unit(unit: str | None) -> tuple[str | None, float]:
    """A unit's family and the factor to its canonical unit ("ms" -> ("s", 0.001)); unknown: itself, 1."""
    u = (unit or "").strip().lower()
    return _UNITS.get(u, (u, 1.0)) if u else (None, 1.0)


def extract_numbers(text: str) -> list[Num]:
    """SPEC-027 §2.2 (NUMBER_CHANGED, SPEC-005 §3b): the numbers of a text, in canonical units.

    Families: rps (req/s, qps, krps = 1000 rps), s (ns..days), B (KB=1e3, KiB/Ki=1024, ... TiB), %.
    A bare ``k`` suffix multiplies by 1000. Numbers glued to letters ("v3.5", "us-east-1") are names.
    """
    out: list[Num] = []
    for m in NUM_RE.finditer(text.replace("’", "'")):
        value = float(m.group("num").replace(",", "")) * (1e3 if m.group("k") else 1.0)
        family, factor = canonical_unit(m.group("unit"))
        out.append((value * factor, family))
    return out


def same_numbers(a: Sequence[Num], b: Sequence[Num]) -> bool:
    """The same numbers in the same order and units (a float tolerance for unit conversion)."""
    if len(a) != len(b):
        return False
    return all(ua == ub and math.isclose(x, y, rel_tol=1e-9) for (x, ua), (y, ub) in zip(a, b, strict=True))
