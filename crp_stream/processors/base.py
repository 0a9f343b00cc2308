"""The handler interface every runtime drives: (record, fabric unit of work) -> output records.

Handlers hold no transport code; the embedded log and the Kafka runtime both call ``dispatch``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from crp_stream.core.ids import derive_id

if TYPE_CHECKING:
    from crp_stream.events import Rejected
    from crp_stream.fabric.fabric import Fabric, UnitOfWork


class Record(NamedTuple):
    """One consumed record. ``topic`` is the contract name (``crp.documents``), prefix removed.

    Records and outputs are NamedTuples: one is built per record, and a frozen dataclass's
    ``__init__`` cost several times more."""

    topic: str
    partition: int
    offset: int
    key: str | None
    value: bytes
    ts_us: int  # the log-append time: the only source of a fact's ingestion epoch
    headers: tuple[tuple[str, bytes], ...] = ()
    # Kafka runtime: set on a window request served before the event-time barrier was met
    fabric_lag_ms: int | None = None

    @property
    def at(self) -> datetime:
        return us_to_dt(self.ts_us)


class Output(NamedTuple):
    topic: str
    key: str
    value: bytes
    record_id: str  # derived; a redelivered input re-emits the same id, so consumers can dedup
    headers: tuple[tuple[str, bytes], ...] = ()  # the trace context of its input (processors/tracing.py)


class Emitter:
    """Collects a handler's outputs with ids derived from the cause, in emission order.

    ``cause_of``: the parts the cause is ``derive_id``'d from, instead of ``cause``; it is derived when
    first read (most of the arbiter's records emit nothing, and their hash was 1-2% of its time)."""

    __slots__ = ("_cause", "_cause_of", "outputs")

    def __init__(self, cause: str | None = None, *, cause_of: tuple[str, ...] = ()) -> None:
        if (cause is None) == (not cause_of):
            raise TypeError("Emitter: give either cause or cause_of")
        self._cause = cause
        self._cause_of = cause_of
        self.outputs: list[Output] = []

    @property
    def cause(self) -> str:
        if self._cause is None:
            self._cause = derive_id(*self._cause_of)
        return self._cause

    def emit(self, topic: str, key: str, value: bytes, record_id: str | None = None) -> str:
        rid = record_id or derive_id(self.cause, str(len(self.outputs)), topic)
        self.outputs.append(Output(topic, key, value, rid))
        return rid


E_contra = TypeVar("E_contra", contravariant=True)
E = TypeVar("E")


class BatchItem(Generic[E]):
    """One decoded record of a micro-batch, with the emitter its outputs go to. A batch-native
    handler rejects a record by ``reject`` (before any write of that record's): the record alone is
    dead-lettered, its neighbours go on."""

    __slots__ = ("event", "out", "record", "rejection")

    def __init__(self, event: E, record: Record, out: Emitter) -> None:
        self.event = event
        self.record = record
        self.out = out
        self.rejection: Rejected | None = None

    def reject(self, exc: Rejected) -> None:
        self.rejection = exc


class Handler(ABC, Generic[E_contra]):
    """A stream's worker; ``E_contra`` is the union of the events of its ``topics``."""

    group: str
    topics: tuple[str, ...]
    # A handler that may raise ``Rejected`` runs in a savepoint, so a rejected record's partial writes
    # are undone while its batch goes on. One that never does skips it: any error it raises fails the
    # whole batch, whose transaction is rolled back anyway (a savepoint per record costs ~0.2 ms).
    rejects: bool = True
    # It raises ``Rejected`` only before its first write: a runtime that says the transaction holds no
    # other write yet (``apply_record(unwritten=True)``) skips the savepoint (two round trips on
    # PostgreSQL); a rejection after a write after all fails the attempt, redone with the savepoint.
    rejects_before_writes: bool = False
    # meta keys its records read: a runtime may read them with the record's offset, in one round trip
    meta_keys: tuple[str, ...] = ()

    # ``handle_batch`` is the handler's own (one call applies a micro-batch), not a loop over ``handle``
    batch_native: bool = False

    @abstractmethod
    def handle(self, event: E_contra, record: Record, uow: UnitOfWork, out: Emitter) -> None:
        """Apply one decoded event. Raise ``Rejected`` for bad input; any other error is retried."""

    def handle_batch(self, items: Sequence[BatchItem[E_contra]], uow: UnitOfWork) -> int:
        """Apply a micro-batch of decoded events (none of them seen before) in the caller's transaction;
        returns how many of them, from the first, were applied: a handler may stop early where the rest
        must see the effects of what the applied ones cause first (the runtime handles those, then
        offers the rest again). Bad input is ``BatchItem.reject``-ed, never raised; any exception fails
        the whole batch (the runtime redoes it record by record). Only for ``batch_native`` handlers."""
        raise NotImplementedError(f"{type(self).__name__} has no batch path")

    def bind(self, fabric: Fabric) -> None:
        """Called once by the runtime before the first record."""

    def lookahead(self, records: Sequence[Record], fabric: Fabric) -> None:
        """Called with input records about to be handled, before any of them, outside any transaction:
        may start slow work whose result does not depend on the fabric (embedding) in the background."""

    def session_ids(self, event: E_contra) -> tuple[str, ...]:
        """The sessions handling ``event`` reads: read ahead with the record's idempotency id, in one
        statement (a window request reads its session right after that id)."""
        return ()

    def prepare(self, events: Sequence[E_contra], uow: UnitOfWork) -> None:
        """Called with the decoded events of a run before any of them is handled, in the same
        transaction: read ahead, in one query per table, what handling them will read (never write)."""

    def read_ahead(self, topic: str, keys: Sequence[str], uow: UnitOfWork) -> None:
        """Called with the keys of records a micro-batch appended to ``topic`` that this handler will
        be offered next, in runs, in the same transaction: read ahead, once for the whole batch, what
        handling them will read (never write). A document's facts, say, all the batch's at once."""


AnyHandler = Handler[Any]  # a runtime's list of handlers: each is offered only its own topics' events


def us_to_dt(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def dt_to_us(dt: datetime) -> int:
    if dt.tzinfo is None:
        raise ValueError("naive datetime")
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def rfc3339(us: int) -> str:
    """Canonical UTC text for a log time: stable bytes for replay."""
    dt = us_to_dt(us)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
