"""An envelope written straight to its canonical bytes, without the model.

Building ``EnvelopeAssembled`` from the assembled dict, dumping it and encoding the dump cost about
as much as scoring a window's candidates. ``direct_bytes`` gives exactly ``codec.encode`` of the model
built from the same dict when every value is one the model keeps as it is (checked here, field by
field); otherwise None, and ``envelope_bytes`` builds the model, which converts or refuses.
Property-tested against the model in tests/unit/events/test_envelope_bytes.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, get_args

import msgspec

from crp_stream.core import memo
from crp_stream.events.codec import _CANONICAL, encode
from crp_stream.events.codec_fast import _floats_ok
from crp_stream.events.common import (
    ID_MAX,
    LIST_MAX,
    TEXT_MAX,
    VALUE_MAX,
    EnvelopeStatus,
    Role,
    SourceType,
    Via,
    format_time,
)
from crp_stream.events.direct import _text
from crp_stream.events.outputs import EnvelopeAssembled

_ROLES = frozenset(get_args(Role))
_SOURCE_TYPES = frozenset(get_args(SourceType))
_VIAS = frozenset(get_args(Via))
_STATUSES = frozenset(get_args(EnvelopeStatus))
_INT_MAX = 2**63  # pydantic's int range; a larger one is left to the model
_FACT_REQUIRED = frozenset(
    (
        "fact_id",
        "text",
        "role",
        "score",
        "relevance",
        "novelty",
        "recency",
        "authority",
        "source",
        "source_type",
        "epoch",
        "modified_at",
        "support",
    )
)
_FACT_FIELDS = _FACT_REQUIRED | {"bridges", "via", "rank"}
_FACT_FLOATS = ("score", "relevance", "novelty", "recency", "authority")
_FLOATS_OF = itemgetter(*_FACT_FLOATS)
# sorted keys as ``_CANONICAL`` sorts them (code points); strings escaped alike (every code point
# checked); floats alike where ``codec_fast._floats_ok`` holds, else ``_CANONICAL`` writes them
_ENCODER = msgspec.json.Encoder(order="sorted")
_ENV_REQUIRED = frozenset(("request_id", "session_id", "window", "status", "facts", "residual_anchor", "headers"))
_ENV_FIELDS = _ENV_REQUIRED | {"branch", "partition", "notes", "closing"}


def _id(value: object) -> bool:
    return _text(value, ID_MAX) and len(value) > 0  # type: ignore[arg-type]


def _int(value: object, low: int) -> bool:
    return type(value) is int and low <= value < _INT_MAX


def _ids(value: object) -> bool:
    return type(value) is list and len(value) <= LIST_MAX and all(map(_id, value))


def _time(value: object) -> bool:
    return type(value) is datetime and value.utcoffset() is not None


def _via(value: object) -> bool:
    return type(value) is str and value in _VIAS


def _rank(value: object) -> bool:
    return _int(value, 1)


_ABSENT = object()
_FACT_OPTIONAL = (("bridges", _ids), ("via", _via), ("rank", _rank))


def _scalar(value: object) -> bool:
    """``common.Scalar`` keeps a str of at most VALUE_MAX, an int of 64 bits, a finite float."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind is int:
        return -_INT_MAX < value < _INT_MAX  # type: ignore[operator]
    return kind is str and _text(value, VALUE_MAX)


@memo.text_memo(0.2)
def _utc_iso(value: datetime) -> str:
    """``format_time`` of a UTC datetime from one C call, remembered: an envelope writes two times a
    fact, and a session's facts (and a document's, which share their times) come back window after
    window. Only UTC datetimes are keys, and two equal ones are the same instant: the same text."""
    return value.isoformat(timespec="microseconds")[:-6] + "Z"


def _utc_text(value: datetime) -> str:
    """``format_time``: for a UTC datetime, ``_utc_iso``."""
    if value.tzinfo is UTC:
        return _utc_iso(value)
    return format_time(value)


def _fact(f: object) -> dict[str, Any] | None:
    """The JSON-ready dict ``EnvelopeFact`` dumps for ``f``, or None: the model decides."""
    if type(f) is not dict or not f.keys() <= _FACT_FIELDS:
        return None
    try:
        fact_id, text, role, source, source_type = f["fact_id"], f["text"], f["role"], f["source"], f["source_type"]
        score, relevance, novelty, recency, authority = (f[k] for k in _FACT_FLOATS)
        epoch, modified, support = f["epoch"], f["modified_at"], f["support"]
    except KeyError:
        return None
    if not (
        type(score) is float
        and type(relevance) is float
        and type(novelty) is float
        and type(recency) is float
        and type(authority) is float
        # each, not their sum: large finite values may sum to inf, and the model keeps them
        and math.isfinite(score)
        and math.isfinite(relevance)
        and math.isfinite(novelty)
        and math.isfinite(recency)
        and math.isfinite(authority)
        and _id(fact_id)
        and _text(text, TEXT_MAX)
        and text
        and _id(source)
        and type(role) is str
        and role in _ROLES
        and type(source_type) is str
        and source_type in _SOURCE_TYPES
        and _time(epoch)
        and _time(modified)
        and _int(support, 1)
    ):
        return None
    out = dict(f)
    for key, ok in _FACT_OPTIONAL:
        value = out.get(key, _ABSENT)
        if value is None:
            del out[key]  # a declared optional that is None is omitted
        elif value is not _ABSENT and not ok(value):
            return None
    out["epoch"], out["modified_at"] = _utc_text(epoch), _utc_text(modified)
    return out


def direct_bytes(env: Mapping[str, Any]) -> bytes | None:
    """``encode(EnvelopeAssembled(**env))`` when the model would keep every value as it is; else None."""
    if not env.keys() >= _ENV_REQUIRED or not env.keys() <= _ENV_FIELDS:
        return None  # an unknown field (a fanned-out branch's assignments) or a missing one
    status, headers, notes = env["status"], env["headers"], env.get("notes", [])
    branch, partition, closing = env.get("branch"), env.get("partition"), env.get("closing")
    if not (
        _id(env["request_id"])
        and _id(env["session_id"])
        and _int(env["window"], 1)
        and type(status) is str
        and status in _STATUSES
        and _text(env["residual_anchor"], TEXT_MAX)
        and type(headers) is dict
        and all(type(k) is str and _text(k, len(k)) and _scalar(v) for k, v in headers.items())
        and type(notes) is list
        and len(notes) <= LIST_MAX
        and all(_text(n, VALUE_MAX) for n in notes)
        and (branch is None or _int(branch, 0))
        and (partition is None or _ids(partition))
        and (closing is None or type(closing) is bool)
        and type(env["facts"]) is list
        and len(env["facts"]) <= LIST_MAX
    ):
        return None
    facts = []
    for f in env["facts"]:
        dumped = _fact(f)
        if dumped is None:
            return None
        facts.append(dumped)
    out = {k: v for k, v in env.items() if v is not None}
    out["facts"], out["notes"], out["type"] = facts, notes, "EnvelopeAssembled"
    floats = [v for f in facts for v in _FLOATS_OF(f)]
    floats += [v for v in headers.values() if type(v) is float]
    if not floats or _floats_ok(floats):
        return _ENCODER.encode(out)
    return _CANONICAL.encode(out).encode("utf-8")


def envelope_bytes(env: Mapping[str, Any]) -> bytes:
    """The canonical bytes of the envelope ``env`` (``EnvelopeAssembled``'s fields), as the model gives them."""
    raw = direct_bytes(env)
    return raw if raw is not None else encode(EnvelopeAssembled(**env))
