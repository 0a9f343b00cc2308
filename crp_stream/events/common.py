"""Field types and the base model shared by every event (docs/contract.md).

Every model is strict (a JSON string never becomes a number), keeps unknown fields (they round-trip),
and rejects NaN and infinities. Times are RFC 3339 with a zone, held as UTC ``datetime`` and written as
``YYYY-MM-DDTHH:MM:SS.ffffffZ``. Limits below bound what a hostile record can make us hold.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    model_serializer,
)

from crp_stream.core.durations import MAX_DURATION_CHARS, parse_duration
from crp_stream.core.tenants import TENANT_PATTERN

ID_MAX = 256  # ids, sources, actors, model ids
TEXT_MAX = 65_536  # a fact's or a query's text, in characters
LABEL_MAX = 1_024  # subject, attribute, unit, label, a word
VALUE_MAX = 4_096  # a fact's value, a reason, a note
OUTPUT_TEXT_MAX = 262_144  # a generator's window output
VECTOR_MAX = 4_096  # embedding dimensions
LIST_MAX = 1_000  # any other list
DEFAULT_MAX_FACTS = 1_000  # facts in one record; configurable per decode
MAX_SUB_QUERIES = 256

SourceType = Literal[
    "regulatory", "official", "version_specific", "news", "community", "unverified", "user", "telemetry"
]
FactStatus = Literal["active", "stale", "quarantined", "superseded", "expired"]
EnvelopeStatus = Literal["in-progress", "task-complete", "limit-reached", "ckf-exhausted", "safety-budget-depleted"]
AuditType = Literal[
    "CONTRADICTION_RESOLVED",
    "CONTRADICTION_UNRESOLVED",
    "STALE_HIGH_TRUST",
    "POISONING_CANDIDATE",
    "DRIFT_UNDETERMINED",
    "FACT_QUARANTINED",
    "QUARANTINE_RELEASED",
    "REFRESH_REQUESTED",
    "REFRESH_RESOLVED",
    "REFRESH_ACKNOWLEDGED",
    "REFRESH_REJECTED",
    "COVERAGE_UPDATE_REJECTED",
    "EVENT_REJECTED",
    "SAFETY_BUDGET_DEPLETED",
    "ACCESS_DENIED",
    "FACTS_FORGOTTEN",
]
Command = Literal[
    "resolve_refresh", "acknowledge_refresh", "reject_refresh", "confirm_quarantine", "release_quarantine", "forget"
]
Role = Literal["anchor", "connector"]
Via = Literal["similarity", "adjacency", "mention"]
OnOff = Literal["on", "off"]


class FieldError(ValueError):
    """A cross-field rule failed; ``field`` is the path (relative to the model) the reason names."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def json_kind(value: object) -> str:
    """The JSON name of a value's type, for reasons ("got string 'high'")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def shown(value: object, limit: int = 60) -> str:
    """A short one-line repr of an input value; never more than ``limit`` characters of it."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def described(value: object) -> str:
    """The JSON kind of a value with a short view of it: "string 'high'", "array of 3 items"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, list | tuple):
        return f"array of {len(value)} items"
    if isinstance(value, dict):
        return f"object with {len(value)} keys"
    return f"{json_kind(value)} {shown(value)}"


def nonfinite(value: float) -> str:
    return "value is NaN" if math.isnan(value) else "value is infinite"


# --- times ------------------------------------------------------------------------------------------

_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(?P<frac>\.[0-9]{1,9})?(?P<zone>[Zz]|[+-][0-9]{2}:[0-9]{2})?"
)
RFC3339_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)
_TIME_EXAMPLE = "e.g. 2025-01-31T12:00:00Z"


# ``format_time``'s form, which every output carries (a changelog record's times): read in one C call.
# Anything else, and an out-of-range date in this form, takes the full path (the same value, and the
# same reason when it is refused).
_CANONICAL_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")


# The canonical times read last, by their text: a fact's ``modified_at`` mostly repeats its ``epoch``
# (datetimes are immutable, so one object serves both). Bounded: cleared when full.
_RECENT: dict[str, datetime] = {}
_RECENT_MAX = 64


def parse_time(value: object) -> datetime:
    """docs/contract.md: times are RFC 3339 with a zone; a naive time is rejected. Returns UTC."""
    if type(value) is str and len(value) == 27:
        hit = _RECENT.get(value)
        if hit is not None:
            return hit
        if _CANONICAL_TIME.fullmatch(value) is not None:
            try:
                parsed = datetime.fromisoformat(value[:26] + "+00:00")
            except ValueError:
                return parse_time_full(value)  # e.g. a 31st of February: the full path gives the reason
            if len(_RECENT) >= _RECENT_MAX:
                _RECENT.clear()
            _RECENT[value] = parsed
            return parsed
    return parse_time_full(value)


def parse_time_full(value: object) -> datetime:
    """``parse_time`` without its fast path for the canonical form."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"time has no zone ({_TIME_EXAMPLE})")
        return value.astimezone(UTC)
    if not isinstance(value, str):
        raise ValueError(f"expected an RFC 3339 time string, got {described(value)}")
    m = _RFC3339.fullmatch(value)
    if m is None:
        raise ValueError(f"{shown(value)} is not an RFC 3339 time ({_TIME_EXAMPLE})")
    if m.group("zone") is None:
        raise ValueError(f"{shown(value)} has no zone; add Z or an offset ({_TIME_EXAMPLE})")
    text = value[:10] + "T" + value[11:]
    frac = m.group("frac")
    if frac and len(frac) > 7:  # keep microseconds; RFC 3339 allows any precision
        text = text.replace(frac, frac[:7], 1)
    text = text[:-1] + "+00:00" if text[-1] in "Zz" else text
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"{shown(value)} is not a valid time ({_TIME_EXAMPLE})") from None


def format_time(value: datetime) -> str:
    """Canonical UTC text, always with microseconds, so equal instants give equal bytes."""
    v = value.astimezone(UTC)
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}.{v.microsecond:06d}Z"


Time = Annotated[
    datetime,
    BeforeValidator(parse_time),
    PlainSerializer(format_time, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": RFC3339_PATTERN, "maxLength": 64}),
]

# --- durations --------------------------------------------------------------------------------------

DURATION_PATTERN = (
    r"^(none|P([0-9]+([.,][0-9]+)?W|(?=[0-9])([0-9]+([.,][0-9]+)?Y)?([0-9]+([.,][0-9]+)?M)?"
    r"([0-9]+([.,][0-9]+)?D)?(T(?=[0-9])([0-9]+([.,][0-9]+)?H)?([0-9]+([.,][0-9]+)?M)?([0-9]+([.,][0-9]+)?S)?)?"
    r"|T(?=[0-9])([0-9]+([.,][0-9]+)?H)?([0-9]+([.,][0-9]+)?M)?([0-9]+([.,][0-9]+)?S)?))$"
)


def _check_duration(value: str) -> str:
    parse_duration(value)  # raises ValueError with the reason
    return value


Ttl = Annotated[
    str,
    Field(max_length=MAX_DURATION_CHARS),
    AfterValidator(_check_duration),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": DURATION_PATTERN,
            "maxLength": MAX_DURATION_CHARS,
            "description": 'ISO 8601 duration (P1Y, P30D, PT6H, P1DT2H) or "none"; never negative',
        }
    ),
]

# --- strings, numbers, vectors ----------------------------------------------------------------------

Id = Annotated[str, Field(min_length=1, max_length=ID_MAX)]
Text = Annotated[str, Field(min_length=1, max_length=TEXT_MAX)]
Label = Annotated[str, Field(min_length=1, max_length=LABEL_MAX)]
Reason = Annotated[str, Field(max_length=VALUE_MAX)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
Vector = Annotated[list[float], Field(min_length=1, max_length=VECTOR_MAX)]
Ids = Annotated[list[Id], Field(max_length=LIST_MAX)]
Tenant = Annotated[
    str,
    Field(
        pattern=TENANT_PATTERN,
        description='the tenant the record belongs to (default "default"); nothing crosses tenants',
    ),
]


def _scalar(value: object) -> str | int | float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a string or a number, got {described(value)}")
    if isinstance(value, str) and len(value) > VALUE_MAX:
        raise ValueError(f"string of {len(value):,} characters is over the limit of {VALUE_MAX:,}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(nonfinite(value))
    if isinstance(value, int) and abs(value) >= 2**63:
        raise ValueError("integer does not fit in 64 bits")
    return value


Scalar = Annotated[
    str | int | float,
    PlainValidator(_scalar),
    WithJsonSchema({"anyOf": [{"type": "string", "maxLength": VALUE_MAX}, {"type": "number"}]}),
]

# --- base models ------------------------------------------------------------------------------------


class Part(BaseModel):
    """A nested object of an event: strict, keeps unknown fields, drops unset optionals when written."""

    # ser_json_inf_nan="constants": a NaN built in Python reaches json.dumps, which refuses it, rather
    # than silently becoming null.
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False, ser_json_inf_nan="constants")

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        # Declared fields that are None are omitted (compact, stable bytes); unknown fields are kept
        # as they came, nulls included, so they round-trip.
        return {k: v for k, v in data.items() if v is not None or k not in type(self).model_fields}


class Event(Part):
    """Base of every event; subclasses set ``type`` to their name."""

    type: str

    @classmethod
    def event_name(cls) -> str:
        return cls.__name__


def require_type(schema: dict[str, Any]) -> None:
    """Output topics: docs/contract.md says every value carries ``type``; only inputs may omit it."""
    required = list(schema.get("required", []))
    if "type" not in required:
        schema["required"] = ["type", *required]


def first_vector(fields: dict[str, list[float] | None]) -> str | None:
    """The path of the first vector given, for the "embedding_model required" rule."""
    return next((path for path, vec in fields.items() if vec is not None), None)
