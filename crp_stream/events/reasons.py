"""One-line, deterministic rejection reasons from pydantic errors: "<field path>: <what was wrong>".

Reasons never quote more than a short excerpt of the input (see ``common.shown``).
"""

from __future__ import annotations

import math
import types
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import ValidationError

from crp_stream.events.common import FieldError, Part, described, nonfinite, shown

MAX_REASON_CHARS = 500

_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "a boolean",
    "list_type": "an array",
    "tuple_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "datetime_type": "an RFC 3339 time string",
}
_BOUNDS = {
    "greater_than_equal": ("ge", "is below the minimum {}"),
    "less_than_equal": ("le", "is above the maximum {}"),
    "greater_than": ("gt", "must be greater than {}"),
    "less_than": ("lt", "must be less than {}"),
}


def field_path(loc: Sequence[str | int], extra: str | None = None) -> str:
    """``("facts", 2, "embedding", 5)`` -> ``"facts[2].embedding[5]"``; ``extra`` is appended."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            out += " (key)"
        else:
            name = part if len(part) <= 64 else part[:61] + "..."
            out += f".{name}" if out else name
    if extra:
        out = f"{out}{'' if extra.startswith('[') or not out else '.'}{extra}"
    return out


def reason_from(error: ValidationError) -> str:
    """The reason for the first error (pydantic's order is deterministic), with a count of the rest."""
    errors = error.errors(include_url=False)
    if not errors:
        return "invalid record"
    text = error_reason(errors[0])
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return one_line(text)


def error_reason(err: Any) -> str:
    kind: str = err["type"]
    value = err.get("input")
    ctx: dict[str, Any] = err.get("ctx") or {}
    path = field_path(err["loc"])
    if kind in ("value_error", "assertion_error"):
        exc = ctx.get("error")
        if isinstance(exc, FieldError):
            path, msg = field_path(err["loc"], exc.field), exc.message
        else:
            msg = str(exc) if exc is not None else str(err["msg"]).removeprefix("Value error, ")
    elif kind == "missing":
        msg = "missing required field"
    elif kind in _EXPECTED:
        msg = f"expected {_EXPECTED[kind]}, got {described(value)}"
    elif kind == "finite_number":
        finite = isinstance(value, float)
        msg = nonfinite(value) if finite else f"expected a finite number, got {described(value)}"
    elif kind == "literal_error":
        choices = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        msg = f"{shown(value)} is not one of {choices}"
    elif kind in _BOUNDS:
        key, template = _BOUNDS[kind]
        msg = f"{shown(value)} {template.format(ctx.get(key))}"
    elif kind == "string_too_long":
        size = len(value) if isinstance(value, str) else "?"
        msg = f"string of {size:,} characters is over the limit of {ctx.get('max_length', 0):,}"
    elif kind == "string_too_short":
        least = ctx.get("min_length")
        msg = "must not be empty" if least == 1 else f"shorter than {least} characters"
    elif kind == "too_short":
        n, least = _length(value), ctx.get("min_length")
        msg = f"{'array is empty' if n == 0 else f'{n} items'}, expected at least {least}"
    elif kind == "too_long":
        actual = ctx.get("actual_length") or _length(value)
        msg = f"{actual:,} items, over the limit of {ctx.get('max_length', 0):,}"
    else:
        msg = f"{err['msg']} (got {described(value)})"
    return f"{path}: {msg}" if path else msg


def _length(value: object) -> int:
    return len(value) if isinstance(value, list | tuple | dict | str) else 0


def one_line(text: str) -> str:
    """Reasons are one line and bounded."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_REASON_CHARS else flat[: MAX_REASON_CHARS - 3] + "..."


def nonfinite_path(value: Any, path: str = "") -> str | None:
    """The reason for the first NaN or infinity in a parsed JSON value (document order), or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path or 'value'}: {nonfinite(value)}"
    if isinstance(value, dict):
        for k, v in value.items():
            found = nonfinite_path(v, field_path([k]) if not path else f"{path}.{field_path([k])}")
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = nonfinite_path(v, f"{path}[{i}]")
            if found:
                return found
    return None


# a field whose type admits only these never holds a part, an object or an array (models are strict)
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None), datetime})
_CONTAINER_FIELDS: dict[type, tuple[str, ...]] = {}


def _scalar_only(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin is Literal:
        return all(type(v) in _SCALAR_TYPES for v in get_args(annotation))
    if origin is Annotated:
        return _scalar_only(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return all(_scalar_only(a) for a in get_args(annotation))
    return annotation in _SCALAR_TYPES


def container_fields(cls: type[Part]) -> tuple[str, ...]:
    """The fields of ``cls`` whose type may hold a part, an object or an array, in declaration order
    (the others are scalars, whose types reject NaN themselves)."""
    found = _CONTAINER_FIELDS.get(cls)
    if found is None:
        found = tuple(n for n, f in cls.model_fields.items() if not _scalar_only(f.annotation))
        _CONTAINER_FIELDS[cls] = found
    return found


def extras_nonfinite(model: Part, path: str = "") -> str | None:
    """The reason for the first NaN or infinity among the unknown fields of ``model`` and its parts."""
    for name, value in (model.__pydantic_extra__ or {}).items():
        found = nonfinite_path(value, f"{path}.{name}" if path else name)
        if found:
            return found
    values = model.__dict__  # the fields' values (getattr per field cost more than the check)
    for name in container_fields(type(model)):
        value = values[name] if name in values else getattr(model, name)
        if isinstance(value, Part):
            found = extras_nonfinite(value, f"{path}.{name}" if path else name)
        elif isinstance(value, dict):  # free-form objects such as an audit record's details
            found = nonfinite_path(value, f"{path}.{name}" if path else name)
        elif isinstance(value, list) and value and isinstance(value[0], Part):
            here = f"{path}.{name}" if path else name
            found = next((f for i, item in enumerate(value) if (f := extras_nonfinite(item, f"{here}[{i}]"))), None)
        else:
            continue  # a scalar: typed fields reject NaN themselves
        if found:
            return found
    return None
