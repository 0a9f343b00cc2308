"""The audit log: filters by type, key and time, and a live tail (htmx polls for rows after the last)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, get_args

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from crp_stream.console.app import Console
from crp_stream.core.tenants import audit_tenant
from crp_stream.events import AuditType
from crp_stream.events.common import parse_time
from crp_stream.processors.base import dt_to_us

AUDIT_TYPES: tuple[str, ...] = get_args(AuditType)
PAGE = 200
TENANT_SCAN = 5  # pages of rows read to fill one page of a tenant's events


class FilterError(ValueError):
    pass


def _time(raw: str, name: str) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    if len(raw) == 10:  # a date: midnight UTC
        raw += "T00:00:00Z"
    elif len(raw) == 16:  # <input type=datetime-local>: minutes, read as UTC
        raw += ":00Z"
    elif raw[-1] not in "Zz" and "+" not in raw[10:] and "-" not in raw[10:]:
        raw += "Z"
    try:
        return dt_to_us(parse_time(raw))
    except ValueError as exc:
        raise FilterError(f"{name}: {exc}") from None


def filters(request: Request) -> dict[str, Any]:
    q = request.query_params
    kind = q.get("type", "").strip()
    if kind and kind not in AUDIT_TYPES:
        raise FilterError(f"type: {kind!r} is not an audit type")
    return {
        "audit_type": kind or None,
        "key": q.get("key", "").strip() or None,
        "since_us": _time(q.get("since", ""), "since"),
        "until_us": _time(q.get("until", ""), "until"),
    }


def routes(console: Console) -> list[Route]:
    backend = console.backend

    def load(f: dict[str, Any], after: int, tenant: str | None) -> list[dict[str, Any]]:
        with backend.repo() as repo:
            if tenant is None:
                return [dict(a) for a in repo.audit_query(**f, after_seq=after, limit=PAGE)]
            owners = repo.tenant_owners()
            rows = repo.audit_query(**f, after_seq=after, limit=PAGE * TENANT_SCAN)
        # a tenant's reader sees only the events about its own data (``core.tenants.audit_tenant``)
        return [dict(a) for a in rows if audit_tenant(a["details"], owners) == tenant][:PAGE]

    async def index(request: Request) -> Response:
        tenant, stop = console.viewing(request)
        if stop is not None:
            return stop
        try:
            f = filters(request)
        except FilterError as exc:
            return console.error(request, 400, "Bad filter", str(exc))
        rows = await console.call(load, f, 0, tenant)
        last = rows[-1]["seq"] if rows else 0
        return console.page(
            request,
            "audit.html",
            rows=rows,
            types=AUDIT_TYPES,
            q=request.query_params,
            last=last,
            tail_query=_tail_query(request, last),
            now=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
        )

    async def tail(request: Request) -> Response:
        tenant, stop = console.viewing(request)
        if stop is not None:
            return stop
        try:
            f = filters(request)
            after = int(request.query_params.get("after", "0"))
        except (FilterError, ValueError) as exc:
            return console.error(request, 400, "Bad filter", str(exc))
        rows = await console.call(load, f, after, tenant)
        last = rows[-1]["seq"] if rows else after
        return console.page(request, "audit_rows.html", rows=rows, tail_query=_tail_query(request, last))

    return [Route("/audit", index), Route("/audit/tail", tail)]


def _tail_query(request: Request, last: int) -> str:
    from urllib.parse import urlencode

    keep = {k: v for k, v in request.query_params.items() if k in ("type", "key", "since", "until", "tenant") and v}
    return urlencode({**keep, "after": last})
