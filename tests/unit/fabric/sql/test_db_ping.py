"""``db.make_engine(ping_idle_s)``: a pooled PostgreSQL connection is pinged at checkout only after
being idle longer than that. A connection the server dropped is replaced at checkout when idle; in
use, its statement fails once with a transient error and the pool replaces it for the next try."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from crp_stream.fabric.sql import db
from crp_stream.runtime.transient import is_transient
from tests.support.services import fresh_postgres_url

pytestmark = pytest.mark.postgres


def _drop_server_side(url: str) -> None:
    """Terminate every other backend of the database (a server restart, as the pool sees it)."""
    admin = db.make_engine(url)
    try:
        with admin.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
    finally:
        admin.dispose()


@pytest.mark.parametrize("idle_s", [0.0, 3600.0])
def test_a_dropped_connection_costs_at_most_one_transient_failure(idle_s: float) -> None:
    url = fresh_postgres_url()
    engine = db.make_engine(url, ping_idle_s=idle_s)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
        _drop_server_side(url)
        if idle_s == 0.0:  # idle "too long": pinged at checkout, replaced, the statement succeeds
            with engine.connect() as conn:
                assert conn.execute(text("SELECT 2")).scalar_one() == 2
        else:  # used just now: not pinged; its statement fails once, transiently
            with pytest.raises(OperationalError) as failed, engine.connect() as conn:
                conn.execute(text("SELECT 2"))
            assert is_transient(failed.value)
        with engine.connect() as conn:  # the next attempt gets a new connection
            assert conn.execute(text("SELECT 3")).scalar_one() == 3
    finally:
        engine.dispose()
