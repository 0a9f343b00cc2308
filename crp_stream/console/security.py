"""Write protection of the console: an operator token from the environment and CSRF on every form.

- The token (``CRP_CONSOLE_TOKEN``) is compared in constant time and never rendered or logged (the
  CLI registers every ``*TOKEN*`` variable with ``redaction``). A form without it gets 401, a wrong
  one (or a console started without a token: writes are off) 403, and an ``ACCESS_DENIED`` audit event.
- Tenant tokens (``CRP_CONSOLE_TENANT_TOKENS`` = ``tenant=token,...``): a reader or an operator of
  one tenant. With any configured, every page needs a token (``Authorization: Bearer``, or the
  session cookie that ``/login`` sets, signed with the process secret) and shows only that tenant;
  the operator token sees every tenant and may filter (``?tenant=``). A tenant token's write is
  accepted only for its own tenant's targets.
- CSRF: double submit. A GET sets an HttpOnly, SameSite=Strict cookie holding a random nonce; each
  form carries HMAC(process secret, nonce). A POST whose field does not match its cookie is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from crp_stream.core.tenants import ALL_TENANTS

CSRF_COOKIE = "crp_csrf"
CSRF_FIELD = "csrf"
TOKEN_FIELD = "token"
SESSION_COOKIE = "crp_session"


@dataclass(frozen=True)
class Denied:
    status: int  # 401 | 403
    reason: str  # shown to the operator and written into the audit event; never the token


class Guard:
    def __init__(self, token: str | None, tenant_tokens: Mapping[str, str] | None = None) -> None:
        self._token = token or None
        self._tenants = dict(tenant_tokens or {})  # token -> tenant
        self._secret = secrets.token_bytes(32)  # per process: a restart invalidates open forms and sessions

    @property
    def writes_enabled(self) -> bool:
        return self._token is not None or bool(self._tenants)

    @property
    def scoped(self) -> bool:
        """Tenant tokens are configured: every read needs a token."""
        return bool(self._tenants)

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def csrf_for(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()

    def check_csrf(self, cookie_nonce: str | None, field: str | None) -> Denied | None:
        if not cookie_nonce or not field or not hmac.compare_digest(self.csrf_for(cookie_nonce), field):
            return Denied(403, "CSRF check failed: reload the page and submit the form again")
        return None

    def scope_of(self, given: str | None) -> str | None:
        """``ALL_TENANTS`` for the operator token, the tenant of a tenant token, None otherwise (every
        configured token is compared, in constant time)."""
        if not given:
            return None
        found = None
        if self._token is not None and hmac.compare_digest(given.encode(), self._token.encode()):
            found = ALL_TENANTS
        for token, tenant in self._tenants.items():
            if hmac.compare_digest(given.encode(), token.encode()):
                found = tenant
        return found

    def session_for(self, scope: str) -> str:
        """The session cookie of a signed-in reader: its scope, signed."""
        mac = hmac.new(self._secret, f"session\x1f{scope}".encode(), hashlib.sha256).hexdigest()
        return f"{scope}.{mac}"

    def scope_of_session(self, cookie: str | None) -> str | None:
        if not cookie or "." not in cookie:
            return None
        scope = cookie.rsplit(".", 1)[0]
        return scope if hmac.compare_digest(self.session_for(scope), cookie) else None

    def check_token(self, given: str | None, tenant: str | None = None) -> Denied | None:
        """A write's token: the operator token for any target; a tenant token for ``tenant``'s only."""
        if not self.writes_enabled:
            return Denied(403, "writes are disabled: the console was started without CRP_CONSOLE_TOKEN")
        if not given:
            return Denied(401, "an operator token is required for this action")
        scope = self.scope_of(given)
        if scope is None:
            return Denied(403, "the operator token is wrong")
        if scope != ALL_TENANTS and scope != tenant:
            return Denied(403, f"this token acts for tenant {scope} only")
        return None
