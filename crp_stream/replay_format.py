"""The replay line format: one JSON object a line, ``{"topic", "key", "ts", "value"[, "headers"]}``.

``ts`` is the record's log-append time (RFC 3339); ``value`` is an object (compact JSON bytes) or a
string (those exact bytes); ``headers`` maps names to text values (e.g. ``crp-signature``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeAlias

from crp_stream.processors.base import dt_to_us, rfc3339


class ReplayFormatError(ValueError):
    """A replay line that cannot be read; the message names the file and line."""


Headers: TypeAlias = tuple[tuple[str, bytes], ...]
# (topic, key, ts_us, raw) or, when the line has headers, (topic, key, ts_us, raw, headers)
ReplayRecord: TypeAlias = tuple[str, str | None, int, bytes] | tuple[str, str | None, int, bytes, Headers]


def format_line(topic: str, key: str | None, ts_us: int, value: bytes, headers: Headers = ()) -> str:
    try:
        parsed: Any = json.loads(value.decode("utf-8"))
        if not isinstance(parsed, dict):
            parsed = value.decode("utf-8")
    except (UnicodeDecodeError, json.JSONDecodeError):
        parsed = value.decode("utf-8", "replace")
    line: dict[str, Any] = {"topic": topic, "key": key, "ts": rfc3339(ts_us), "value": parsed}
    if headers:
        line["headers"] = {name: value.decode("utf-8", "replace") for name, value in headers}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def parse_ts(text: Any, where: str) -> int:
    if not isinstance(text, str):
        raise ReplayFormatError(f"{where}: ts is missing or not a string")
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ReplayFormatError(f"{where}: ts {text!r} is not an RFC 3339 time") from None
    if dt.tzinfo is None:
        raise ReplayFormatError(f"{where}: ts {text!r} has no time zone")
    return dt_to_us(dt)


def parse_headers(raw: Any, where: str) -> Headers:
    """A line's optional ``headers`` object: {"name": "text value"} -> Kafka-style (name, bytes) pairs."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise ReplayFormatError(f"{where}: headers must be an object of string values")
    return tuple((str(k), v.encode("utf-8")) for k, v in raw.items())


def raw_value(value: Any) -> bytes:
    """The bytes a replay line's value stands for (a string is the raw text; an object, compact JSON)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def json_lines(text: str, origin: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Each non-blank line of replay-format ``text`` as ``(where, line, object)``; bad lines raise."""
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{origin}:{i}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReplayFormatError(f"{where}: not a JSON line: {exc.msg}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("topic"), str) or "value" not in obj:
            raise ReplayFormatError(f"{where}: expected an object with topic, key, ts and value")
        yield where, line, obj


def read_replay(path: Path) -> list[ReplayRecord]:
    records: list[ReplayRecord] = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReplayFormatError(f"{path}: {exc.strerror}") from None
    for where, _line, obj in json_lines(text, str(path)):
        key = obj.get("key")
        headers = parse_headers(obj.get("headers"), where)
        ts = parse_ts(obj.get("ts"), where)
        head = (obj["topic"], None if key is None else str(key), ts, raw_value(obj["value"]))
        records.append((*head, headers) if headers else head)
    return records
