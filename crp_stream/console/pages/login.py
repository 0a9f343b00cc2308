"""Signing in with a token: with tenant tokens configured every page needs one. ``POST /login`` checks
it and sets a session cookie holding the reader's scope (a tenant, or every tenant for the operator
token), signed with the process secret; the token itself is never stored in the cookie."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from crp_stream.console.app import Console, root
from crp_stream.console.security import CSRF_COOKIE, CSRF_FIELD, SESSION_COOKIE, TOKEN_FIELD


def _next(raw: object) -> str:
    """Only a path of this console: never an open redirect."""
    path = raw if isinstance(raw, str) else ""
    return path if path.startswith("/") and not path.startswith("//") else "/fabric"


def routes(console: Console) -> list[Route]:
    async def form(request: Request) -> Response:
        return console.page(request, "login.html", next=_next(request.query_params.get("next")))

    async def login(request: Request) -> Response:
        data = await request.form()
        field, given = data.get(CSRF_FIELD), data.get(TOKEN_FIELD)
        denied = console.guard.check_csrf(request.cookies.get(CSRF_COOKIE), field if isinstance(field, str) else None)
        scope = console.guard.scope_of(given if isinstance(given, str) else None)
        if denied is None and scope is None:
            denied = console.guard.check_token(given if isinstance(given, str) else None)
        if denied is not None or scope is None:
            reason = denied.reason if denied is not None else "the token is wrong"
            return console.page(request, "login.html", http_status=401, next=_next(data.get("next")), failed=reason)
        resp = RedirectResponse(f"{root(request)}{_next(data.get('next'))}", status_code=303)
        resp.set_cookie(SESSION_COOKIE, console.guard.session_for(scope), httponly=True, samesite="strict", path="/")
        return resp

    async def logout(request: Request) -> Response:
        resp = RedirectResponse(f"{root(request)}/login", status_code=303)
        resp.delete_cookie(SESSION_COOKIE, path="/")
        return resp

    return [Route("/login", form), Route("/login", login, methods=["POST"]), Route("/logout", logout, methods=["POST"])]
