"""The console's app factory: Starlette + Jinja2 templates (autoescaped) + vendored htmx, no CDN.

Pages live one group per module in ``crp_stream.console.pages``; each exposes ``routes(console)``.
``Console`` holds what they share: the backend, the templates, the write guard and the write path.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

from crp_stream.console.security import CSRF_COOKIE, CSRF_FIELD, SESSION_COOKIE, TOKEN_FIELD, Denied, Guard
from crp_stream.core.tenants import ALL_TENANTS, DEFAULT_TENANT, view_tenant
from crp_stream.events import Command
from crp_stream.events.topics import OPERATOR_COMMANDS
from crp_stream.processors.base import rfc3339
from crp_stream.runtime.console_port import CommandResult, ConsoleBackend

log = logging.getLogger("crp_stream.console")
# a write's target once checked: the command's key, and the tenant whose data it touches
Target = tuple[str, str]
Problem = tuple[int, str, str]
STATIC = Path(__file__).resolve().parent / "static"
CONTENT_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
NAV = (
    ("/refresh", "Refresh requests"),
    ("/quarantine", "Quarantine"),
    ("/audit", "Audit log"),
    ("/envelopes", "Envelopes"),
    ("/fabric", "Fabric"),
)


def root(request: Request) -> str:
    """The prefix the console is mounted under ("" when served alone, "/console" on a worker's port)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def when(us: int | None) -> str:
    return "" if us is None else rfc3339(us)[:19].replace("T", " ") + "Z"


class Console:
    def __init__(self, backend: ConsoleBackend, token: str | None, tenant_tokens: dict[str, str] | None = None) -> None:
        self.backend = backend
        self.guard = Guard(token, tenant_tokens)
        env = Environment(
            loader=PackageLoader("crp_stream.console", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )
        env.filters["when"] = when
        env.filters["short"] = lambda s: str(s or "")[:12]
        self.templates = Jinja2Templates(env=env)

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Backend calls block (SQLite, the embedded runtime): run them off the event loop."""
        return await run_in_threadpool(fn, *args, **kwargs)

    def scope(self, request: Request) -> str | None:
        """Who reads: ``ALL_TENANTS`` (the operator token, or anyone when no tenant token is
        configured), a tenant, or None (a token is needed: ``Authorization: Bearer`` or ``/login``)."""
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return self.guard.scope_of(auth[7:].strip())
        signed_in = self.guard.scope_of_session(request.cookies.get(SESSION_COOKIE))
        if signed_in is not None:
            return signed_in
        return None if self.guard.scoped else ALL_TENANTS

    def viewing(self, request: Request) -> tuple[str | None, Response | None]:
        """``(tenant, None)``: the tenant this page shows (None: every tenant); or ``(None, the
        response)`` when the reader may not see it."""
        scope = self.scope(request)
        if scope is None:
            return None, self.page(
                request, "login.html", http_status=401, next=request.url.path.removeprefix(root(request))
            )
        try:
            tenant = view_tenant(scope, request.query_params.get("tenant"))
        except PermissionError as exc:
            return None, self.error(request, 403, "Not allowed", str(exc))
        except ValueError as exc:
            return None, self.error(request, 400, "Bad filter", str(exc))
        request.state.scope, request.state.tenant = scope, tenant
        return tenant, None

    def page(self, request: Request, name: str, http_status: int = 200, **context: Any) -> Response:
        nonce = request.cookies.get(CSRF_COOKIE) or self.guard.new_nonce()
        prefix = root(request)
        context.update(
            nav=NAV,
            root=prefix,
            path=request.url.path.removeprefix(prefix),
            csrf=self.guard.csrf_for(nonce),
            writes_enabled=self.guard.writes_enabled,
            scope=getattr(request.state, "scope", None),
            tenant=getattr(request.state, "tenant", None),
            all_tenants=ALL_TENANTS,
        )
        resp = self.templates.TemplateResponse(request, name, context, status_code=http_status)
        if request.cookies.get(CSRF_COOKIE) != nonce:
            resp.set_cookie(CSRF_COOKIE, nonce, httponly=True, samesite="strict", path="/")
        return resp

    def error(self, request: Request, status: int, title: str, message: str) -> Response:
        return self.page(request, "error.html", http_status=status, title=title, message=message)

    async def act(
        self,
        request: Request,
        *,
        action: str,
        target_id: str,
        check: Callable[[str | None], Awaitable[tuple[Target | None, Problem | None]]],
        command: Command,
        done_url: str,
    ) -> Response:
        """The one write path: CSRF, token, actor, target known, open and of the token's tenant, then
        publish the command (with the target's tenant).

        ``check(tenant)`` returns ``((key, tenant), None)`` when the command applies to a target of
        ``tenant`` (None: any tenant), ``(None, (status, title, message))`` otherwise; a target of
        another tenant is not found. Nothing is published unless every check passed."""
        form = await request.form()
        field = form.get(CSRF_FIELD)
        raw = form.get(TOKEN_FIELD)
        given = raw if isinstance(raw, str) else None
        actor = str(form.get("actor") or "").strip()
        denied = self.guard.check_csrf(request.cookies.get(CSRF_COOKIE), field if isinstance(field, str) else None)
        scope = self.guard.scope_of(given)
        if denied is None and scope is None:
            denied = self.guard.check_token(given)
        if denied is not None:
            return await self._refused(request, action, target_id, actor, denied)
        if not actor:
            return self.error(
                request,
                400,
                "Actor required",
                "Say who decides: the actor is written into the audit event. Nothing was published.",
            )
        found, problem = await check(None if scope == ALL_TENANTS else scope)
        if problem is not None and problem[0] == 403:  # another tenant's target: audited like a bad token
            return await self._refused(request, action, target_id, actor, Denied(403, problem[2]))
        if problem is not None or found is None:
            return self.error(request, *(problem or (404, "Not found", "Nothing was published.")))
        key, tenant = found
        denied = self.guard.check_token(given, tenant)
        if denied is not None:
            return await self._refused(request, action, target_id, actor, denied)
        reason = str(form.get("reason") or "").strip() or None
        result: CommandResult = await self.call(
            self.backend.publish_command,
            command,
            target_id,
            key,
            actor,
            reason,
            tenant=None if tenant == DEFAULT_TENANT else tenant,
        )
        if result.rejected:
            return self.error(request, 409, "Command rejected", f"{command} {target_id}: {result.rejected}")
        if result.pending:
            return self.error(
                request,
                202,
                "Published, not applied yet",
                f"{command} {target_id} is on {OPERATOR_COMMANDS} (command {result.command_id}) "
                "but no operator worker has applied it yet; reload the page later.",
            )
        log.info("console: %s %s by %s (command %s)", command, target_id, actor, result.command_id)
        return RedirectResponse(f"{root(request)}{done_url}?done={command}", status_code=303)

    async def _refused(self, request: Request, action: str, target_id: str, actor: str, denied: Denied) -> Response:
        details = {
            "action": action,
            "target_id": target_id,
            "status": denied.status,
            "reason": denied.reason,
            "actor": actor or None,
            "client": request.client.host if request.client else None,
        }
        await self.call(self.backend.record_denied, details)
        log.warning("console: refused %s %s: %s", action, target_id, denied.reason)
        return self.error(request, denied.status, "Not allowed", denied.reason)


def create_app(backend: ConsoleBackend, *, token: str | None, tenant_tokens: dict[str, str] | None = None) -> Starlette:
    """``tenant_tokens``: token -> tenant (``core.tenants.tenant_tokens`` of CRP_CONSOLE_TENANT_TOKENS)."""
    from crp_stream.console.pages import audit, envelopes, fabric, login, quarantine, refresh

    console = Console(backend, token, tenant_tokens)

    async def home(request: Request) -> Response:
        return RedirectResponse(f"{root(request)}/refresh", status_code=307)

    # The few static files are read once and served whole: no file streaming, which the ASGI bridge of
    # the Kafka worker's aiohttp server does not pass through (runtime/kafka/console.py).
    assets = {p.name: p.read_bytes() for p in STATIC.iterdir() if p.suffix in CONTENT_TYPES}

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in assets:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(
            assets[name], media_type=CONTENT_TYPES[Path(name).suffix], headers={"Cache-Control": "max-age=3600"}
        )

    routes: list[BaseRoute] = [Route("/", home), Route("/static/{name}", static)]
    for module in (login, refresh, quarantine, audit, envelopes, fabric):
        routes += module.routes(console)
    app = Starlette(routes=routes)
    app.state.console = console
    return app
