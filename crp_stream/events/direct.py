"""Two output events written straight to their canonical bytes, without a model.

The arbiter emits an ``AuditRecorded`` and ``FactStatusChanged`` records for every changed verdict;
building the model, dumping it and encoding the dump was most of their cost. ``audit_bytes`` and
``status_changed_bytes`` give exactly ``codec.encode`` of the model built from the same values
(property-tested in tests/unit/events/test_events_direct.py), for values the model accepts as they are:
``*_direct`` says which (anything else: the caller builds the model, which refuses or converts).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, get_args

from crp_stream.events.codec import _CANONICAL
from crp_stream.events.common import ID_MAX, VALUE_MAX, AuditType, FactStatus, format_time

_AUDIT_TYPES = frozenset(get_args(AuditType))
_STATUSES = frozenset(get_args(FactStatus))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: object, limit: int) -> bool:
    """A ``str`` field's value the model keeps: a str, at most ``limit`` characters, no lone
    surrogate (a strict str field refuses one)."""
    return type(value) is str and len(value) <= limit and (value.isascii() or _SURROGATE.search(value) is None)


def _id(value: object) -> bool:
    return _text(value, ID_MAX) and len(value) > 0  # type: ignore[arg-type]


def audit_direct(event_id: object, audit_type: object, details: object) -> bool:
    """True: ``AuditRecorded(event_id=..., audit_type=..., at=<an aware datetime>, details=...)``
    validates and keeps these values as they are (a dict with ``str`` keys)."""
    return (
        _id(event_id)
        and type(audit_type) is str
        and audit_type in _AUDIT_TYPES
        and type(details) is dict
        and all(type(k) is str for k in details)
    )


def audit_bytes(event_id: str, audit_type: str, at: datetime, details: dict[str, Any]) -> bytes:
    """``encode(AuditRecorded(...))`` when ``audit_direct`` holds. Keys in sorted order; ``details``
    through the same encoder as ``encode``, so tuples are arrays and NaN is refused as there."""
    return (
        f'{{"at":"{format_time(at)}","audit_type":"{audit_type}","details":{_CANONICAL.encode(details)},'
        f'"event_id":{_CANONICAL.encode(event_id)},"type":"AuditRecorded"}}'
    ).encode()


def status_changed_direct(fact_id: object, status: object, reason: object, cause_id: object) -> bool:
    """True: ``FactStatusChanged`` validates and keeps these values as they are."""
    return (
        _id(fact_id)
        and type(status) is str
        and status in _STATUSES
        and _text(reason, VALUE_MAX)
        and (cause_id is None or _id(cause_id))
    )


def status_changed_bytes(fact_id: str, status: str, reason: str, at: datetime, cause_id: str | None) -> bytes:
    """``encode(FactStatusChanged(...))`` when ``status_changed_direct`` holds (no ``cause_id``: omitted)."""
    cause = "" if cause_id is None else f',"cause_id":{_CANONICAL.encode(cause_id)}'
    return (
        f'{{"at":"{format_time(at)}"{cause},"fact_id":{_CANONICAL.encode(fact_id)},'
        f'"reason":{_CANONICAL.encode(reason)},"status":"{status}","type":"FactStatusChanged"}}'
    ).encode()
