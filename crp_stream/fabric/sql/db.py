"""Database engines and migrations. PostgreSQL for deployment, SQLite for the embedded default."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError

from crp_stream.config import ConfigError

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parents[3] / "migrations"


def normalise_url(url: str) -> str:
    """Accept the plain ``postgresql://`` spelling and route it to psycopg 3."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str, ping_idle_s: float | None = None) -> Engine:
    """``ping_idle_s`` (PostgreSQL): ping a pooled connection at checkout only when it was idle longer
    than that, not at every checkout (a round trip per transaction). A connection broken while in use
    (a server restart) then fails its statement: a transient error the caller retries."""
    url = normalise_url(url)
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"database URL {url!r} is not a valid SQLAlchemy URL") from exc
    kwargs: dict[str, Any] = {"future": True}
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database or ""
        if db and db != ":memory:":
            Path(db).parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"timeout": 30}
    elif parsed.get_backend_name() == "postgresql":
        kwargs["pool_pre_ping"] = ping_idle_s is None
    else:
        raise ConfigError(f"database backend {parsed.get_backend_name()!r} is not supported (postgresql or sqlite)")
    engine = create_engine(parsed, **kwargs)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    elif ping_idle_s is not None:
        event.listen(engine.pool, "checkout", _ping_if_idle(ping_idle_s))
        event.listen(engine.pool, "checkin", _last_used)
    return engine


_LAST_USED = "crp_last_used"


def _last_used(_dbapi_conn: Any, record: Any) -> None:
    if record is not None:
        record.info[_LAST_USED] = time.monotonic()


def _ping_if_idle(idle_s: float) -> Any:
    def checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        last = record.info.get(_LAST_USED)
        if last is None or time.monotonic() - last <= idle_s:
            return  # new, or used just now
        try:
            dbapi_conn.execute("SELECT 1")
            dbapi_conn.rollback()
        except Exception as exc:
            # the pool drops this connection and checks out another (SQLAlchemy's pessimistic recipe)
            raise DisconnectionError(f"connection idle {time.monotonic() - last:.1f}s failed its ping") from exc

    return checkout


def _sqlite_begin(conn: Any) -> None:
    # pysqlite opens a transaction only before INSERT/UPDATE/DELETE: a SAVEPOINT issued before any of
    # them (``begin_nested`` around each handler) would start one of its own, and its RELEASE would
    # COMMIT a handler's effects before the batch (and its consumer offsets) commits. So the driver's
    # transaction handling is off (``isolation_level = None``) and every SQLAlchemy transaction
    # starts with an explicit BEGIN (SQLAlchemy's documented pysqlite recipe).
    conn.exec_driver_sql("BEGIN")


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    # WAL + synchronous=FULL: a committed effect survives kill -9 and power loss.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA foreign_keys=ON")
    # SQLite's default page cache is 2 MB: past ~10k facts the edges' B-trees no longer fit, and every
    # batch's thousands of random-key edge writes went to the OS page by page.
    cur.execute("PRAGMA cache_size=-262144")  # KiB: up to 256 MiB, allocated only as pages are read
    cur.execute("PRAGMA temp_store=MEMORY")
    # a deleted row's bytes are overwritten, not left in a free page: ``forget`` must leave no text
    cur.execute("PRAGMA secure_delete=ON")
    cur.close()


def release_page_cache(engine: Engine) -> None:
    """On SQLite: free the pages a one-off scan left in the pooled connection's page cache (the cache
    warm-up reads the graph of 500k facts at 1M: ~240 MiB), so they are not held idle until evicted.
    The cache refills with what requests read, up to ``cache_size``."""
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA shrink_memory")


def scrub(engine: Engine) -> None:
    """After ``forget`` on SQLite: fold the write-ahead log into the file and empty it, so no old page
    image with forgotten text stays in ``-wal`` (the deleted rows were zeroed: ``secure_delete``)."""
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


# What ``forget`` deletes from or updates: erase_facts' tables, the destroyed sealing keys, the
# generation counters and (Kafka) the outboxes in ``meta``
FORGET_TABLES = (
    "facts",
    "fact_vectors",
    "fact_words",
    "edges",
    "documents",
    "claims",
    "refresh_requests",
    "quarantine_candidates",
    "sources",
    "sealing_keys",
    "meta",
)


class VacuumError(Exception):
    """``vacuum_full`` could not rewrite a table; the message names it."""


def vacuum_full(url: str, tables: tuple[str, ...] = FORGET_TABLES) -> list[str]:
    """After ``forget`` on PostgreSQL: ``VACUUM FULL`` each table (its TOAST table and indexes with it),
    so the dead row versions that still hold forgotten text leave the files; the tables vacuumed.
    Each holds an ACCESS EXCLUSIVE lock while it is rewritten. SQLite needs none of it
    (``secure_delete`` overwrites a row as it is deleted, ``scrub`` empties the WAL): []."""
    engine = make_engine(url)
    done: list[str] = []
    try:
        if engine.dialect.name != "postgresql":
            return done
        present = set(inspect(engine).get_table_names())
        # VACUUM cannot run inside a transaction block
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for name in tables:
                if name in present:
                    try:
                        conn.exec_driver_sql(f'VACUUM (FULL) "{name}"')  # our own table names, never input
                    except DBAPIError as exc:  # not the owner, a lock or statement timeout: say which table
                        first = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
                        raise VacuumError(f"VACUUM FULL {name}: {first}") from None
                    done.append(name)
        return done
    finally:
        engine.dispose()


def alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    return cfg


MIGRATION_LOCK = 0x637270  # pg advisory lock: processes starting together on one database migrate in turn


def upgrade(engine: Engine, revision: str = "head") -> None:
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":  # held until this transaction ends
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def is_migrated(engine: Engine) -> bool:
    return "facts" in inspect(engine).get_table_names()
