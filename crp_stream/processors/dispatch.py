"""Edge handling shared by every runtime: decode, validate, dead-letter, deduplicate, then handle.

``apply_record`` runs inside the caller's transaction; the caller commits it with the consumer
offset, so effects and progress land together or not at all.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

from crp_stream import events
from crp_stream.config import Settings
from crp_stream.core.ids import derive_id
from crp_stream.events import topics
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors import tracing
from crp_stream.processors.base import AnyHandler, BatchItem, Emitter, Output, Record, rfc3339
from crp_stream.processors.sealed import open_sealed

log = logging.getLogger(__name__)

DEADLETTER = topics.DEADLETTER
AUDIT = topics.AUDIT
ID_HEADER = "crp-id"
# ``\u0000`` escaped in a JSON string (an odd run of backslashes before it): PostgreSQL cannot store a
# NUL in text, so it is refused at the edge on every backend alike, instead of failing in the database.
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def record_cause(record: Record) -> str:
    """The derived id every output of this record descends from (stable across redelivery).

    Only our own outputs carry their id in a header; on an input topic the header is the producer's,
    and honouring it would let a producer give its record another record's cause (and so make the log
    drop that record's outputs as duplicates)."""
    if record.topic not in events.INPUT_TOPICS:
        for k, v in record.headers:
            if k == ID_HEADER:
                return v.decode("utf-8", "replace")
    return derive_id(record.topic, str(record.partition), str(record.offset))


_ID_FIELDS = ("event_id", "command_id", "request_id")
_DECLARED_IDS: dict[type, tuple[bool, ...]] = {}  # per event class: which of _ID_FIELDS it declares


def idempotency_key(event: events.Event, record: Record, cause: str | None = None) -> str:
    """``cause``: ``record_cause(record)`` if the caller has it."""
    declared = _DECLARED_IDS.get(type(event))
    if declared is None:
        fields = type(event).model_fields
        declared = _DECLARED_IDS[type(event)] = tuple(attr in fields for attr in _ID_FIELDS)
    extra = event.__pydantic_extra__
    if extra or any(declared):
        for attr, field in zip(_ID_FIELDS, declared, strict=True):
            # getattr's answer (a field, else an unknown field kept as extra) without its AttributeError
            value = getattr(event, attr) if field else extra.get(attr) if extra else None
            if isinstance(value, str) and value:
                return f"{attr}:{value}"
    if isinstance(event, events.WindowReported):
        return f"report:{event.session_id}:{event.window}:{event.branch}"
    return f"record:{record_cause(record) if cause is None else cause}"


def _dead(
    out: Emitter,
    record: Record,
    reason: str,
    audit_type: str = "EVENT_REJECTED",
    details: dict[str, Any] | None = None,
    uow: UnitOfWork | None = None,
) -> None:
    at = record.at
    rejected = events.deadletter(record.topic, record.key, record.value, reason, at)
    out.emit(DEADLETTER, record.key or "", events.encode(rejected))
    audit_details = {"topic": record.topic, "offset": record.offset, "reason": reason, **(details or {})}
    audit_id = derive_id(out.cause, "audit", audit_type)
    audit = events.AuditRecorded(event_id=audit_id, audit_type=cast(Any, audit_type), at=at, details=audit_details)
    if uow is not None:  # the audit log projection keeps rejections too
        uow.repo.append_audit(audit_id, audit_type, record.ts_us, record.key or record.topic, audit_details)
    out.emit(AUDIT, record.key or record.topic, events.encode(audit), record_id=audit_id)


class IsolationNeeded(RuntimeError):
    """A handler without its savepoint rejected a record after a write: redo it with the savepoint."""


def apply_record(handler: AnyHandler, record: Record, uow: UnitOfWork, unwritten: bool = False) -> list[Output]:
    """Decode ``record`` and apply it with ``handler``; bad input becomes a dead-letter output.
    ``unwritten``: ``Repository.written_since`` is exact here (the caller wrote nothing in this
    transaction yet, or the store is SQLite), so a handler that rejects only before its first write
    runs without a savepoint (``Handler.rejects_before_writes``); a rejection after a write raises
    ``IsolationNeeded``: the caller rolls back and applies the record again without the flag."""
    return [o for outs in apply_each(handler, [record], uow, unwritten) for o in outs]


def apply_records(
    handler: AnyHandler, records: Sequence[Record], uow: UnitOfWork, unwritten: bool = False
) -> list[Output]:
    """``apply_record`` over a run of records of one handler, in order, in the caller's transaction:
    the same outputs in the same order, with the idempotency ids of the whole run read in one query
    (a document's facts come back to the arbiter as one run of ``crp.facts`` records)."""
    return [o for outs in apply_each(handler, records, uow, unwritten) for o in outs]


def apply_each(
    handler: AnyHandler, records: Sequence[Record], uow: UnitOfWork, unwritten: bool = False
) -> list[list[Output]]:
    """``apply_records``, the outputs of each record apart (a runtime that routes them per record)."""
    outputs: list[list[Output]] = []
    done = 0
    while done < len(records):
        outs, n = apply_prefix(handler, records[done:], uow, unwritten)
        outputs.extend(outs)
        done += n
    return outputs


def apply_prefix(
    handler: AnyHandler, records: Sequence[Record], uow: UnitOfWork, unwritten: bool = False
) -> tuple[list[list[Output]], int]:
    """Apply ``records`` from the first, as far as the handler goes in one micro-batch: (the outputs of
    each record applied, how many). A batch-native handler may stop early, where the records left
    must see what the applied ones cause (the embedded runtime handles that first, then offers the
    rest again); any other handler applies them all."""
    if not records or not tracing.enabled(uow.settings):
        return _apply_prefix(handler, records, uow, unwritten)
    with tracing.batch_span(handler.group, records) as span_id:  # one span per handler batch
        outputs, n = _apply_prefix(handler, records, uow, unwritten)
    return tracing.stamp(outputs, records[:n], span_id), n


def _apply_prefix(
    handler: AnyHandler, records: Sequence[Record], uow: UnitOfWork, unwritten: bool
) -> tuple[list[list[Output]], int]:
    if handler.batch_native:
        return _apply_batch(handler, records, uow)
    decoded = [_decode(handler, record, uow) for record in records]
    keys = [d.key for d in decoded if d.key is not None and d.tracked]
    sessions = [s for d in decoded if d.event is not None for s in handler.session_ids(d.event)]
    if len(keys) > 1 or (keys and sessions):
        uow.repo.prefetch_processed(handler.group, keys, sessions)
    if len(records) > 1:
        handler.prepare([d.event for d in decoded if d.event is not None], uow)
    outputs: list[list[Output]] = []
    for record, (out, event, key, tracked) in zip(records, decoded, strict=True):
        if event is not None and key is not None:
            _apply_decoded(handler, record, uow, out, event, key, tracked, unwritten and len(records) == 1)
        outputs.append(out.outputs)
    return outputs, len(records)


class Decoded(NamedTuple):
    """A record decoded at the edge; no event when it was dead-lettered."""

    out: Emitter
    event: events.Event | None
    key: str | None  # its idempotency key
    tracked: bool  # its key is checked against the records processed before


class _Mark(NamedTuple):
    """What marks a batch item processed once the batch is applied."""

    key: str
    tracked: bool
    content_hash: str


def _apply_batch(handler: AnyHandler, records: Sequence[Record], uow: UnitOfWork) -> tuple[list[list[Output]], int]:
    """The micro-batch path: the records not seen before go to ``handle_batch`` in one call.

    A record dead-lettered here (malformed, or an id reused for other content) ends the batch before
    it unless it comes first, and so does a record whose idempotency id repeats one of the batch's
    (whether the first was applied or rejected decides what the repeat is): every dead letter and its
    audit row then stand where record-by-record processing puts them, after what the records before
    it caused."""
    decoded: list[Decoded] = []
    for i, record in enumerate(records):
        d = _decode(handler, record, uow, write_audit=i == 0)
        if d.event is None and i > 0:
            break
        decoded.append(d)
    keys = [d.key for d in decoded if d.key is not None and d.tracked]
    sessions = [s for d in decoded if d.event is not None for s in handler.session_ids(d.event)]
    if len(keys) > 1 or (keys and sessions):  # a window's session read with the ids, in one statement
        uow.repo.prefetch_processed(handler.group, keys, sessions)
    items: list[BatchItem[events.Event]] = []
    marks: list[_Mark] = []  # per item
    place: list[int] = []  # per item: its record's index
    batch_keys: set[str] = set()
    end = len(decoded)
    for i, (record, (out, event, key, tracked)) in enumerate(zip(records, decoded, strict=False)):
        if event is None or key is None:
            continue
        if key in batch_keys:
            end = i
            break
        content_hash = hashlib.sha256(record.value).hexdigest() if not key.startswith("record:") else ""
        seen = uow.repo.processed_hash(handler.group, key) if tracked else None
        if seen is not None:
            if seen != content_hash:
                if i > 0:
                    end = i
                    break
                _dead(out, record, _reused(key), uow=uow)
            continue
        batch_keys.add(key)
        items.append(BatchItem(event, record, out))
        marks.append(_Mark(key, tracked, content_hash))
        place.append(i)
    applied = handler.handle_batch(items, uow) if items else 0
    if applied < len(items):
        end = place[applied]
    for item, (key, tracked, content_hash) in zip(items[:applied], marks, strict=False):
        if item.rejection is not None:
            item.out.outputs.clear()
            exc = item.rejection
            _dead(item.out, item.record, exc.reason, exc.audit_type, exc.details, uow=uow)
        elif tracked:
            uow.repo.mark_processed(handler.group, key, content_hash, item.record.topic, item.record.offset)
    return [d.out.outputs for d in decoded[:end]], end


def _reused(key: str) -> str:
    name, value = key.split(":", 1)
    return f"{name}: {value!r} was already used for different content; the first record wins"


def _decode(handler: AnyHandler, record: Record, uow: UnitOfWork, write_audit: bool = True) -> Decoded:
    """The record decoded; no event when it was dead-lettered (its audit row written unless
    ``write_audit`` is false: the caller drops such a record's outputs)."""
    audit_to = uow if write_audit else None
    cause = record_cause(record)
    out = Emitter(cause_of=(handler.group, cause))
    # an escape needs a backslash: one memchr, where the five-byte search cost ~3k instructions a record
    value = record.value
    if b"\\" in value and b"u0000" in value and _NUL_ESCAPE.search(value):
        _dead(out, record, "a string holds a NUL character (\\u0000), which the fabric cannot store")
        return Decoded(out, None, None, False)
    try:
        opened = open_sealed(record.topic, value, uow)
        if opened is None:  # sealed under a key ``forget`` destroyed: forgotten, nothing to do
            return Decoded(out, None, None, False)
        event = events.decode_input(
            record.topic,
            opened,
            max_bytes=uow.settings.max_record_bytes,
            max_facts=uow.settings.max_facts_per_document,
        )
    except events.Rejected as exc:
        _dead(out, record, exc.reason, uow=audit_to)
        return Decoded(out, None, None, False)
    key = idempotency_key(event, record, cause)
    # Ids are checked for what producers send, since producers retry; our own changelog (crp.facts)
    # by its derived id alone: on Kafka a restarted worker produces its outbox again, and a copy at a
    # later offset must not run the arbiter again (on a newer fabric, under the copy's id).
    tracked = not key.startswith("record:") or record.topic not in events.INPUT_TOPICS
    return Decoded(out, event, key, tracked)


def _apply_decoded(
    handler: AnyHandler,
    record: Record,
    uow: UnitOfWork,
    out: Emitter,
    event: events.Event,
    key: str,
    tracked: bool,
    unwritten: bool = False,
) -> None:
    by_producer = not key.startswith("record:")
    content_hash = hashlib.sha256(record.value).hexdigest() if by_producer else ""
    seen = uow.repo.processed_hash(handler.group, key) if tracked else None
    if seen is not None:
        if seen != content_hash:
            _dead(out, record, _reused(key), uow=uow)
        return
    try:
        if handler.rejects and handler.rejects_before_writes and unwritten:
            _rejects_unwritten(handler, event, record, uow, out)
        elif handler.rejects:
            with uow.repo.savepoint():
                handler.handle(event, record, uow, out)
        else:
            _unsheltered(handler, event, record, uow, out)
    except events.Rejected as exc:
        out.outputs.clear()
        _dead(out, record, exc.reason, exc.audit_type, exc.details, uow=uow)
        return  # not marked processed: a corrected record may reuse the id
    if tracked:
        uow.repo.mark_processed(handler.group, key, content_hash, record.topic, record.offset)


def _unsheltered(handler: AnyHandler, event: events.Event, record: Record, uow: UnitOfWork, out: Emitter) -> None:
    """A handler declared never to reject runs without a savepoint; should it reject after all, its
    writes cannot be undone alone, so the batch fails (and is redone record by record)."""
    try:
        handler.handle(event, record, uow, out)
    except events.Rejected as exc:
        raise RuntimeError(f"{handler.group} rejected a record but declares rejects = False: {exc.reason}") from exc


def _rejects_unwritten(handler: AnyHandler, event: events.Event, record: Record, uow: UnitOfWork, out: Emitter) -> None:
    """A handler that rejects only before its first write, without a savepoint: a rejection is
    checked to have written nothing (then there is nothing to undo); else the attempt fails."""
    mark = uow.repo.write_mark()
    try:
        handler.handle(event, record, uow, out)
    except events.Rejected:
        if uow.repo.written_since(mark):
            raise IsolationNeeded(f"{handler.group} rejected a record after a write") from None
        raise


def internal_error_output(handler: AnyHandler, record: Record, exc: BaseException, settings: Settings) -> list[Output]:
    """A record that keeps failing for a non-transient reason is dead-lettered, never retried forever.
    With tracing on, its dead letter and audit event carry the record's trace context like any output
    (no span: the handler's failed)."""
    out = Emitter(cause=derive_id(handler.group, record_cause(record)))
    reason = f"internal error in {handler.group}: {type(exc).__name__}: {str(exc)[:200]}"
    _dead(out, record, reason)
    if not tracing.enabled(settings):
        return out.outputs
    return tracing.stamp([out.outputs], [record], None)[0]


__all__ = [
    "IsolationNeeded",
    "apply_each",
    "apply_prefix",
    "apply_record",
    "apply_records",
    "internal_error_output",
    "record_cause",
    "rfc3339",
]
