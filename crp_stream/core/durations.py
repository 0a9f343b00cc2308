"""ISO 8601 durations of the event contract (docs/contract.md: "Durations are ISO 8601 (P1Y, P30D, PT6H)
or the string "none" (never expires)").

Pure stdlib. A duration is returned in seconds as a float; ``None`` means never (SPEC-027 §3.5,
``ttl=none``). Calendar units are fixed lengths so the result never depends on a date: a year is
365 days and a month 30 days (so six months is 180 days, not the 182.5 of half a year).

Accepted: ``PnYnMnDTnHnMnS`` with any subset of components (at least one, and at least one after a
``T``), ``PnW`` on its own, integers or a decimal fraction (``.`` or ``,``) on the last component only.
Rejected with ``ValueError``: a negative duration (``-P1D``), anything else that is not this grammar.
"""

from __future__ import annotations

import math
import re

NEVER = "none"
SECONDS_PER_MINUTE = 60.0
SECONDS_PER_HOUR = 3_600.0
SECONDS_PER_DAY = 86_400.0
SECONDS_PER_WEEK = 7 * SECONDS_PER_DAY
SECONDS_PER_MONTH = 30 * SECONDS_PER_DAY
SECONDS_PER_YEAR = 365 * SECONDS_PER_DAY
MAX_DURATION_CHARS = 64

_NUM = r"[0-9]{1,15}(?:[.,][0-9]{1,9})?"
_DURATION = re.compile(
    rf"P(?:(?P<W>{_NUM})W"
    rf"|(?:(?P<Y>{_NUM})Y)?(?:(?P<Mo>{_NUM})M)?(?:(?P<D>{_NUM})D)?"
    rf"(?:T(?:(?P<H>{_NUM})H)?(?:(?P<Mi>{_NUM})M)?(?:(?P<S>{_NUM})S)?)?)"
)
# Component order inside the grammar, and the length of each unit.
_UNITS: tuple[tuple[str, float], ...] = (
    ("W", SECONDS_PER_WEEK),
    ("Y", SECONDS_PER_YEAR),
    ("Mo", SECONDS_PER_MONTH),
    ("D", SECONDS_PER_DAY),
    ("H", SECONDS_PER_HOUR),
    ("Mi", SECONDS_PER_MINUTE),
    ("S", 1.0),
)
_EXAMPLES = 'e.g. P1Y, P30D, PT6H, P1DT2H, or "none"'


def parse_duration(text: str) -> float | None:
    """docs/contract.md durations: ISO 8601 text -> seconds; ``"none"`` -> ``None`` (never expires, SPEC-027 §3.5).

    Years are 365 days and months 30 days. A negative duration raises ``ValueError``, as does any
    text outside the grammar in the module docstring; the message quotes the text (truncated).
    """
    if not isinstance(text, str):
        raise ValueError(f"expected a duration string, got {type(text).__name__}")
    if text == NEVER:
        return None
    shown = _shown(text)
    if len(text) > MAX_DURATION_CHARS:
        raise ValueError(f"duration of {len(text)} characters is over the limit of {MAX_DURATION_CHARS}")
    if text.startswith("-"):
        raise ValueError(f"negative duration {shown} is not allowed")
    match = _DURATION.fullmatch(text)
    if match is None or not _has_components(text, match):
        raise ValueError(f"{shown} is not an ISO 8601 duration ({_EXAMPLES})")
    present = [(name, unit, match.group(name)) for name, unit in _UNITS if match.group(name) is not None]
    if any(_is_fraction(raw) for _, _, raw in present[:-1]):
        raise ValueError(f"{shown}: only the last component of a duration may have a fraction")
    seconds = math.fsum(float(raw.replace(",", ".")) * unit for _, unit, raw in present)
    if not math.isfinite(seconds):
        raise ValueError(f"{shown} is too long a duration")
    return seconds


def format_duration(seconds: float | None) -> str:
    """docs/contract.md durations: seconds -> canonical ISO 8601 text; ``None`` -> ``"none"``.

    Only exact units are written (days, hours, minutes, seconds to the microsecond), never years or
    months, so ``format_duration(parse_duration("P1Y")) == "P365D"`` and ``parse_duration`` of the
    result gives back the input rounded to the microsecond. Zero is ``"PT0S"``.
    """
    if seconds is None:
        return NEVER
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"cannot format {seconds!r} as a duration: must be finite and >= 0")
    micros = round(seconds * 1_000_000)
    days, rest = divmod(micros, 86_400_000_000)
    hours, rest = divmod(rest, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    secs, frac = divmod(rest, 1_000_000)
    out = "P" + (f"{days}D" if days else "")
    clock = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if frac:
        clock += f"{secs}.{frac:06d}".rstrip("0") + "S"
    elif secs:
        clock += f"{secs}S"
    if clock:
        out += "T" + clock
    return out if out != "P" else "PT0S"


def _has_components(text: str, match: re.Match[str]) -> bool:
    """ISO 8601: a duration names at least one component, and a ``T`` is followed by one."""
    if not any(match.group(name) is not None for name, _ in _UNITS):
        return False
    if "T" in text:
        return any(match.group(name) is not None for name in ("H", "Mi", "S"))
    return True


def _is_fraction(raw: str) -> bool:
    return "." in raw or "," in raw


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


__all__ = ["NEVER", "format_duration", "parse_duration"]
