"""Claims: which claim a fact belongs to, and when two values assert the same thing.
``core.drift`` arbitrates the claims these keys and values form."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_WS = re.compile(r"\s+")
_NUMBER = re.compile(r"^([+-]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?)(.*)$", re.DOTALL)
_TRAILING_PUNCT = ".,;:!"
# Aliases only; no conversion between units (250 rpm stays different from 250 rps).
_UNIT_ALIASES: dict[str, tuple[str, ...]] = {
    "rps": (
        "rps",
        "req/s",
        "req/sec",
        "reqs/s",
        "requests/s",
        "requests/sec",
        "request/s",
        "r/s",
        "requests per second",
        "request per second",
        "req per second",
    ),
    "rpm": ("rpm", "req/min", "reqs/min", "requests/min", "requests per minute", "request per minute"),
    "ms": ("ms", "msec", "msecs", "millisecond", "milliseconds"),
    "s": ("s", "sec", "secs", "second", "seconds"),
    "min": ("min", "mins", "minute", "minutes"),
    "h": ("h", "hr", "hrs", "hour", "hours"),
    "d": ("d", "day", "days"),
    "%": ("%", "percent", "pct"),
}
_CANONICAL_UNIT: dict[str, str] = {a: canon for canon, aliases in _UNIT_ALIASES.items() for a in aliases}


def claim_key(subject: str, attribute: str) -> str:
    """Claims: facts asserting a value for the same (subject, attribute) form one claim.

    Both parts are lowercased with whitespace collapsed, then joined by ``|``; ``%`` and ``|`` inside a
    part are percent-escaped so that distinct pairs never share a key.
    """

    def part(text: str) -> str:
        norm = _WS.sub(" ", text).strip().lower()
        return norm.replace("%", "%25").replace("|", "%7C")

    return f"{part(subject)}|{part(attribute)}"


def _canonical_number(text: str) -> str:
    d = Decimal(text.replace(",", ""))
    if abs(d.adjusted()) > 30:  # keep huge/tiny exponents symbolic rather than expanding them
        return str(d.normalize())
    if d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


def _canonical_unit(text: str) -> str:
    unit = _WS.sub(" ", text).strip().lower().rstrip(_TRAILING_PUNCT).strip()
    unit = re.sub(r"\s*/\s*", "/", unit)
    return _CANONICAL_UNIT.get(unit, unit)


def normalise_value(value: str, unit: str | None = None) -> str:
    """Claims: values compare equal when they assert the same thing.

    A value starting with a number becomes ``"<number> <unit>"``: thousands separators dropped, the
    number in plain canonical form ("1,000.0" -> "1000"), a ``k`` suffix multiplied out ("1k" ->
    "1000"), and the unit mapped to its canonical alias ("req/s" -> "rps"). The value's own unit wins
    over ``unit``; ``unit`` applies when the value has none. Anything else is lowercased, whitespace
    collapsed and trailing punctuation stripped; ``unit`` is then ignored.
    """
    text = _WS.sub(" ", value).strip()
    match = _NUMBER.match(text)
    if match is None:
        return text.lower().rstrip(_TRAILING_PUNCT).strip()
    number, rest = match.group(1), match.group(2).strip()
    try:
        amount = Decimal(number.replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the regex only admits valid decimals
        return text.lower()
    if rest[:1].lower() == "k" and (len(rest) == 1 or rest[1] == " "):
        amount *= 1000
        rest = rest[1:].strip()
    canon_unit = _canonical_unit(rest) if rest else (_canonical_unit(unit) if unit else "")
    canon_number = _canonical_number(str(amount))
    return f"{canon_number} {canon_unit}" if canon_unit else canon_number


__all__ = ["claim_key", "normalise_value"]
