"""Which failures a runtime retries (with backoff, forever) and which it isolates and dead-letters.

Transient: the database or the vector index is unreachable or busy (``OperationalError``: connection
lost, server restarting, "database is locked", serialization failure; ``InterfaceError``; a DBAPI error
that invalidated the connection; ``ConnectionError`` and ``TimeoutError``, which include
``vector_guard.VectorUnavailable``). Retrying them loses nothing: the batch is rolled back and redone.

Not transient: any other DBAPI error (``DataError``, ``IntegrityError``, ``ProgrammingError``) is about
the record, e.g. a text with a NUL character that PostgreSQL refuses. Retrying it forever would stop
the stream, so it is isolated and dead-lettered with the reason.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

TRANSIENT_TYPES = (OperationalError, InterfaceError, ConnectionError, TimeoutError)


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, TRANSIENT_TYPES):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


__all__ = ["TRANSIENT_TYPES", "is_transient"]
