"""The codec's hot path without pydantic: msgspec decoding plus explicit checks, and a direct dump.

``decode_fast`` reads a record of an input topic or of the changelog (``crp.facts``) into the Structs
of ``structs``, checks in Python what they cannot say, and builds the pydantic event without running
its validation (the same ``__dict__``, given-fields set and extras a validated one has). Anything it
does not accept gives None, and the pydantic path decides: its value, or its dead-letter reason. So
every reason is still pydantic's, and a record accepted here is one pydantic accepts with an equal
value (tests/unit/events/test_codec_equivalence.py runs both on a corpus of good and hostile records).

``encode_fast`` writes an event's canonical bytes from its fields with msgspec; None when a value is
not plain JSON or a float is one msgspec writes in another form than Python (the stdlib encoder
then decides, as ``encode`` always did).
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

import msgspec
from msgspec import UNSET, Meta

from crp_stream.core.durations import parse_duration
from crp_stream.core.tenants import TENANT_PATTERN
from crp_stream.events import inputs, outputs, structs
from crp_stream.events.common import VALUE_MAX, Part, format_time, parse_time
from crp_stream.events.common import Event as EventModel

_INT_MAX = 2**63  # ``common.Scalar``'s bound
_TENANT = re.compile(TENANT_PATTERN.removeprefix("^").removesuffix("$"))  # fullmatch: "$" would allow a "\n"


class _Refused(Exception):
    """A value the fast path does not take: the pydantic path decides."""


# --- decoding: a Struct -> the pydantic event -------------------------------------------------------


def _check(tp: Any) -> str | None:
    """The ``extra["check"]`` a field's type carries (``structs.Time`` ...), or "scalar"."""
    origin = get_origin(tp)
    if origin is Annotated:
        meta = next((m for m in get_args(tp)[1:] if isinstance(m, Meta)), None)
        return (meta.extra or {}).get("check") if meta is not None else None
    if origin is Union or origin is types.UnionType:
        args = get_args(tp)
        if str in args and int in args and float in args:
            return "scalar"
        return next((c for c in map(_check, args) if c), None)
    return None


def _nested(tp: Any) -> tuple[str, type[structs.Base]] | None:
    """("part", S) or ("parts", S) when the field holds a Struct or a list of them."""
    if isinstance(tp, type) and issubclass(tp, structs.Base):
        return ("part", tp)
    origin = get_origin(tp)
    if origin is Annotated:
        return _nested(get_args(tp)[0])
    if origin is list:
        inner = _nested(get_args(tp)[0])
        return ("parts", inner[1]) if inner is not None and inner[0] == "part" else None
    if origin is Union or origin is types.UnionType:
        return next((n for n in map(_nested, get_args(tp)) if n), None)
    return None


# (name, kind, nested Struct's plan or None, default, default factory) per model field, in order
_Field = tuple[str, str, "_Plan | None", Any, Callable[[], Any] | None]


class _Plan:
    def __init__(self, struct: type[structs.Base], model: type[Part]) -> None:
        self.model = model
        self.tagged = struct.__struct_config__.tag is not None
        hints = get_type_hints(struct, include_extras=True)
        self.fields: list[_Field] = []
        for name, info in model.model_fields.items():
            factory = info.default_factory
            default = None if info.is_required() or factory is not None else info.default
            if name == "type" and "type" not in hints:  # a tagged Struct: always given
                self.fields.append((name, "tag", None, default, None))
                continue
            tp = hints[name]
            nested = _nested(tp)
            kind = nested[0] if nested else _check(tp) or "plain"
            sub = _Plan(nested[1], _MODELS[nested[1]]) if nested else None
            self.fields.append((name, kind, sub, default, factory))  # type: ignore[arg-type]

    def build(self, s: Any) -> Any:
        """The model instance for the Struct ``s``, as ``model_validate`` builds it."""
        values: dict[str, Any] = {}
        given: set[str] = set()
        for name, kind, sub, default, factory in self.fields:
            if kind == "tag":
                values[name] = default
                given.add(name)
                continue
            v = getattr(s, name)
            if v is UNSET:
                values[name] = factory() if factory is not None else default
                continue
            given.add(name)
            if v is not None and kind != "plain":
                v = _convert(kind, sub, v)
            values[name] = v
        obj = self.model.__new__(self.model)
        object.__setattr__(obj, "__dict__", values)
        object.__setattr__(obj, "__pydantic_fields_set__", given)
        object.__setattr__(obj, "__pydantic_extra__", {})
        object.__setattr__(obj, "__pydantic_private__", None)
        return obj


def _convert(kind: str, sub: _Plan | None, v: Any) -> Any:
    if kind == "time":
        try:
            return parse_time(v)
        except ValueError:
            raise _Refused from None
    if kind == "part":
        return sub.build(v)  # type: ignore[union-attr]
    if kind == "parts":
        return [sub.build(x) for x in v]  # type: ignore[union-attr]
    if kind == "ttl":
        try:
            parse_duration(v)
        except ValueError:
            raise _Refused from None
    elif (kind == "tenant" and _TENANT.fullmatch(v) is None) or (kind == "scalar" and not _scalar_ok(v)):
        raise _Refused
    return v


def _scalar_ok(v: str | int | float) -> bool:
    """``common.Scalar``'s bounds (floats from msgspec are finite)."""
    if type(v) is str:
        return len(v) <= VALUE_MAX
    return type(v) is not int or -_INT_MAX < v < _INT_MAX


_MODELS: dict[type[structs.Base], type[Part]] = {
    structs.FactInput: inputs.FactInput,
    structs.DocumentPublished: inputs.DocumentPublished,
    structs.TelemetryObserved: inputs.TelemetryObserved,
    structs.QuerySpec: inputs.QuerySpec,
    structs.SubQuery: inputs.SubQuery,
    structs.Policy: inputs.Policy,
    structs.WindowRequested: inputs.WindowRequested,
    structs.Addressed: inputs.Addressed,
    structs.WindowReported: inputs.WindowReported,
    structs.OperatorCommand: inputs.OperatorCommand,
    structs.FactRecorded: outputs.FactRecorded,
    structs.FactStatusChanged: outputs.FactStatusChanged,
}
_PLANS: dict[type[structs.Base], _Plan] = {s: _Plan(s, m) for s, m in _MODELS.items()}


# --- the models' rules across fields (inputs.py's validators), as yes or no -------------------------


def _vectors_named(model: str | None, *vectors: object) -> bool:
    return model is not None or all(v is None for v in vectors)


def _document_ok(e: inputs.DocumentPublished, max_facts: int) -> bool:
    facts = e.facts
    if facts is None:
        return e.text is not None and bool(e.text.strip())
    if not 0 < len(facts) <= max_facts or (e.text is not None and not e.text.strip()):
        return False
    return _vectors_named(e.embedding_model, *(f.embedding for f in facts))


def _request_ok(e: inputs.WindowRequested, _max_facts: int) -> bool:
    subs = e.sub_queries or []
    if (e.window == 1 and not subs) or len({sq.id for sq in subs}) != len(subs):
        return False
    return _vectors_named(e.embedding_model, e.query.embedding, *(sq.embedding for sq in subs))


_RULES: dict[type[Any], Callable[[Any, int], bool]] = {
    inputs.DocumentPublished: _document_ok,
    inputs.TelemetryObserved: lambda e, _n: _vectors_named(e.embedding_model, e.embedding),
    inputs.WindowRequested: _request_ok,
    inputs.WindowReported: lambda e, _n: _vectors_named(e.embedding_model, *(a.embedding for a in e.addressed)),
}

_DECODERS: dict[type[EventModel], msgspec.json.Decoder[Any]] = {
    inputs.DocumentPublished: msgspec.json.Decoder(structs.DocumentPublished),
    inputs.TelemetryObserved: msgspec.json.Decoder(structs.TelemetryObserved),
    inputs.WindowRequested: msgspec.json.Decoder(structs.WindowRequested),
    inputs.WindowReported: msgspec.json.Decoder(structs.WindowReported),
    inputs.OperatorCommand: msgspec.json.Decoder(structs.OperatorCommand),
    outputs.FactRecorded: msgspec.json.Decoder(structs.Changelog),  # crp.facts: the tag picks
}


def decode_fast(model: type[EventModel], raw: bytes, max_bytes: int, max_facts: int) -> EventModel | None:
    """The event ``decode_input`` gives for ``raw`` on the topic whose first model is ``model``, or
    None: the pydantic path decides (an unknown field, anything refused here, a topic not covered)."""
    decoder = _DECODERS.get(model)
    if decoder is None or len(raw) > max_bytes:
        return None
    try:
        s = decoder.decode(raw)
        event: EventModel = _PLANS[type(s)].build(s)
    except (msgspec.MsgspecError, ValueError, RecursionError, _Refused):  # ValueError: not UTF-8
        return None
    rule = _RULES.get(type(event))
    return event if rule is None or rule(event, max_facts) else None


# --- encoding ---------------------------------------------------------------------------------------

_ENCODER = msgspec.json.Encoder(order="sorted")
_FLOATS = {float}


def _float_ok(v: float) -> bool:
    """Finite, and written alike by Python and msgspec: magnitude 0 or in [1e-4, 1e16), where both
    write it as a decimal (outside, Python writes "1e+16" and "1e-05", msgspec "1e16" and "0.00001")."""
    return 1e-4 <= abs(v) < 1e16 or v == 0.0  # NaN fails both


def _floats_ok(v: list[float]) -> bool:
    """``_float_ok`` for every item of a list of floats (a vector), in C-level passes."""
    mags = list(map(abs, v))
    return max(mags) < 1e16 and min(filter(None, mags), default=1.0) >= 1e-4 and math.isfinite(sum(mags))


def _json(v: Any) -> Any:
    """A free-form value (extras, an audit record's details, headers) as pydantic dumps it, when that
    is the value itself: plain JSON types only, floats that ``_float_ok``."""
    kind = type(v)
    if kind is str or kind is int or kind is bool or v is None:
        return v
    if kind is float:
        if not _float_ok(v):
            raise _Refused
        return v
    if kind is list:
        if v and type(v[0]) is float and set(map(type, v)) == _FLOATS:
            if not _floats_ok(v):
                raise _Refused
            return v
        return [_json(x) for x in v]
    if kind is dict:
        if not all(type(k) is str for k in v):
            raise _Refused
        return {k: _json(x) for k, x in v.items()}
    raise _Refused  # a tuple, a datetime, an enum ...: pydantic's conversion


def _time_text(v: datetime) -> str:
    """``format_time``; for a UTC datetime, one C call."""
    if v.tzinfo is UTC:
        return v.isoformat(timespec="microseconds")[:-6] + "Z"
    return format_time(v)


_FIELDS: dict[type[Part], tuple[str, ...]] = {}


def _dump(model: Part) -> dict[str, Any]:
    """``model.model_dump(mode="json")`` for a model whose values are plain (``_json``), times and parts."""
    cls = type(model)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(cls.model_fields)
    out: dict[str, Any] = {}
    values = model.__dict__
    for name in names:
        v = values[name]
        kind = type(v)
        if kind is str or kind is int or kind is bool:
            out[name] = v
        elif v is None:
            continue  # declared optionals that are None are omitted (``Part._compact``)
        elif kind is datetime:
            out[name] = _time_text(v)
        elif isinstance(v, Part):
            out[name] = _dump(v)
        elif kind is list and v and isinstance(v[0], Part):
            out[name] = [_dump(x) for x in v]
        else:
            out[name] = _json(v)
    extra = model.__pydantic_extra__
    if extra:
        for name, v in extra.items():
            out[name] = _json(v)
    return out


def encode_fast(event: Part) -> bytes | None:
    """``encode(event)``'s bytes, or None when the stdlib encoder must write them."""
    try:
        return _ENCODER.encode(_dump(event))
    except (_Refused, KeyError, TypeError, msgspec.EncodeError, UnicodeEncodeError):
        return None
