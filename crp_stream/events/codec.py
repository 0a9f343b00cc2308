"""The edge codec: record bytes -> a typed event (or ``Rejected`` naming the field), events -> canonical bytes."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any, TypeAlias, cast

from pydantic import ValidationError
from pydantic_core import from_json

from crp_stream.events.codec_fast import decode_fast, encode_fast
from crp_stream.events.common import DEFAULT_MAX_FACTS, VALUE_MAX, described, json_kind, shown
from crp_stream.events.common import Event as EventModel
from crp_stream.events.inputs import (
    DocumentPublished,
    OperatorCommand,
    TelemetryObserved,
    WindowReported,
    WindowRequested,
)
from crp_stream.events.outputs import (
    AuditRecorded,
    EnvelopeAssembled,
    EventRejected,
    FactRecorded,
    FactStatusChanged,
    QuarantineCandidate,
    RefreshRequested,
)
from crp_stream.events.reasons import extras_nonfinite, nonfinite_path, one_line, reason_from
from crp_stream.events.rejected import Rejected
from crp_stream.events.topics import DEFAULT_PREFIX, topic_spec

Event: TypeAlias = (
    DocumentPublished
    | TelemetryObserved
    | WindowRequested
    | WindowReported
    | OperatorCommand
    | FactRecorded
    | FactStatusChanged
    | EnvelopeAssembled
    | AuditRecorded
    | RefreshRequested
    | QuarantineCandidate
    | EventRejected
)

MAX_RECORD_BYTES = 1024 * 1024
MAX_DEPTH = 32
BASE64_PREFIX = "base64:"


# --- decoding ---------------------------------------------------------------------------------------

_CONTAINERS = (list, dict)


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Levels of arrays and objects in a parsed JSON value (a scalar is 0); stops once past ``limit``.

    Iterative, and only descends into containers that hold containers, so a list of 4096 floats
    costs one C-level pass.
    """
    if not isinstance(value, _CONTAINERS):
        return 0
    if type(value) is dict:  # most records: one object of scalars
        kinds = set(map(type, value.values()))
        if list not in kinds and dict not in kinds:
            return 1
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
        items = node.values() if type(node) is dict else node
        kinds = set(map(type, items))
        if list in kinds or dict in kinds:
            stack.extend((v, depth + 1) for v in items if type(v) is list or type(v) is dict)
    return deepest


def _too_deep() -> Rejected:
    return Rejected(f"nesting too deep: more than {MAX_DEPTH} levels of arrays and objects")


def parse_json(raw: bytes, max_bytes: int = MAX_RECORD_BYTES) -> Any:
    """Bytes -> a parsed JSON value, or ``Rejected`` for size, UTF-8, syntax, nesting and NaN/inf."""
    if len(raw) > max_bytes:
        raise Rejected(f"record is {len(raw):,} bytes, over the {max_bytes:,}-byte limit")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected(f"invalid UTF-8 at byte {exc.start}") from None
    refused: str | None = None
    try:
        # pydantic-core's parser: several times faster than json.loads on vectors, same floats.
        data = from_json(text, allow_inf_nan=False)
    except ValueError as exc:
        refused = str(exc)
    if refused is not None:
        data = _parse_refused(text, refused)
    if nesting_depth(data) > MAX_DEPTH:
        raise _too_deep()
    return data


def _parse_refused(text: str, fast_error: str) -> Any:
    """The fast parser refused ``text``. Python's json gives the familiar message, and it reads the
    NaN/Infinity literals some producers write, so the reason can name the field that holds one."""
    if "recursion limit" in fast_error:
        raise _too_deep()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Rejected(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:
        if "digits" in str(exc):  # Python refuses integers of more than 4300 digits
            raise Rejected("invalid JSON: an integer has too many digits") from None
        raise Rejected(one_line(f"invalid JSON: {str(exc)[:120]}")) from None
    if nesting_depth(data) > MAX_DEPTH:
        raise _too_deep()
    found = nonfinite_path(data)
    if found:
        raise Rejected(found)
    # Python accepted what the strict parser did not: a lone surrogate escape is the known case.
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise Rejected("invalid JSON: a string holds a lone surrogate escape (\\ud800-\\udfff)") from None
    raise Rejected(one_line(f"invalid JSON: {fast_error[:160]}"))


def validate_value(topic: str, data: Any, *, max_facts: int = DEFAULT_MAX_FACTS, prefix: str = DEFAULT_PREFIX) -> Event:
    """A parsed JSON value of ``topic`` -> its event, or ``Rejected`` naming the field.

    ``data`` is what ``parse_json`` returns (nesting and NaN literals already checked there).
    """
    spec = topic_spec(topic, prefix)
    if spec is None:
        raise Rejected(f"topic: unknown topic {shown(topic)}")
    if not isinstance(data, dict):
        raise Rejected(f"value is a JSON {json_kind(data)}, expected an object")
    declared = data.get("type")
    if declared is None and "type" in data:
        raise Rejected(f"type: expected a string, got null (topic {topic} carries {' or '.join(spec.names)})")
    if declared is None:
        if not spec.is_input:
            raise Rejected(f"type: missing required field (topic {topic} carries {' or '.join(spec.names)})")
        model = spec.models[0]
    elif not isinstance(declared, str):
        raise Rejected(f"type: expected a string, got {described(declared)}")
    elif declared not in spec.names:
        raise Rejected(f"type: {shown(declared)} does not match topic {topic} (expects {' or '.join(spec.names)})")
    else:
        model = spec.models[spec.names.index(declared)]
    try:
        event = model.model_validate(data, context={"max_facts": max_facts})
    except ValidationError as exc:
        raise Rejected(reason_from(exc)) from None
    # Typed fields reject NaN/inf themselves; a number that overflowed (1e999) can still sit in an
    # unknown field, and would make the event unencodable.
    found = extras_nonfinite(event)
    if found:
        raise Rejected(found)
    return cast(Event, event)


def decode_input(
    topic: str,
    raw: bytes,
    max_bytes: int = MAX_RECORD_BYTES,
    *,
    max_facts: int = DEFAULT_MAX_FACTS,
    prefix: str = DEFAULT_PREFIX,
) -> Event:
    """docs/contract.md edge validation: a record's bytes on ``topic`` -> its typed event.

    Raises ``Rejected`` with a one-line reason naming the field and what was wrong; the caller
    dead-letters the record with ``deadletter``. Any topic of ``TOPICS`` decodes (output topics too,
    for tail and replay), under its default name or under ``prefix``. On an input topic ``type``
    may be omitted; on an output topic it is required.
    """
    spec = topic_spec(topic, prefix)
    if spec is not None:
        event = decode_fast(spec.models[0], raw, max_bytes, max_facts)
        if event is not None:
            return cast(Event, event)
    return decode_pydantic(topic, raw, max_bytes, max_facts=max_facts, prefix=prefix)


def decode_pydantic(
    topic: str,
    raw: bytes,
    max_bytes: int = MAX_RECORD_BYTES,
    *,
    max_facts: int = DEFAULT_MAX_FACTS,
    prefix: str = DEFAULT_PREFIX,
) -> Event:
    """``decode_input`` through the pydantic models alone: the reference the fast path is tested
    against, and the path of every record it does not take (so every reason is this one's)."""
    return validate_value(topic, parse_json(raw, max_bytes), max_facts=max_facts, prefix=prefix)


# --- encoding ---------------------------------------------------------------------------------------


def to_json_value(event: EventModel) -> dict[str, Any]:
    """The event as a JSON-ready dict (times as canonical UTC text, unset optionals omitted)."""
    data: dict[str, Any] = event.model_dump(mode="json")
    return data


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode(event: EventModel) -> bytes:
    """Canonical JSON bytes: sorted keys, no spaces, UTF-8, floats as Python repr, unset optionals
    omitted. Equal events give byte-identical output (replay determinism)."""
    raw = encode_fast(event)
    return raw if raw is not None else encode_pydantic(event)


def encode_pydantic(event: EventModel) -> bytes:
    """``encode`` through pydantic's dump and the stdlib encoder: the reference, and the path of
    values ``encode_fast`` leaves (a NaN or a surrogate fails here, as it always did)."""
    return _CANONICAL.encode(to_json_value(event)).encode("utf-8")


# --- dead letters -----------------------------------------------------------------------------------


def raw_text(raw: bytes) -> str:
    """docs/contract.md ``raw``: the original bytes as text, or ``"base64:"`` + base64 when they are not
    UTF-8 (or when the text itself starts with the prefix, so decoding is never ambiguous)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not text.startswith(BASE64_PREFIX):
        return text
    return BASE64_PREFIX + base64.b64encode(raw).decode("ascii")


def raw_bytes(raw: str) -> bytes:
    """Inverse of ``raw_text``: the original bytes of a dead-lettered record."""
    if raw.startswith(BASE64_PREFIX):
        return base64.b64decode(raw[len(BASE64_PREFIX) :], validate=True)
    return raw.encode("utf-8")


def deadletter(topic: str, key: str | None, raw: bytes, reason: str, at: datetime) -> EventRejected:
    """The ``crp.deadletter`` record of a rejected input: nothing of the original is lost."""
    text = one_line(reason)
    return EventRejected(topic=topic, key=key, raw=raw_text(raw), reason=text[:VALUE_MAX], at=at)
