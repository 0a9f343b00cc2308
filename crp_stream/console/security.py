"""Write protection of the console: an operator token from the environment and CSRF on every form.

- The token (``CRP_CONSOLE_TOKEN``) is compared in constant time and never rendered or logged (the
  CLI registers every ``*TOKEN*`` variable with ``redaction``). A form without it gets 401, a wrong
  one (or a console started without a token: writes are off) 403, and an ``ACCESS_DENIED`` audit event.
- CSRF: double submit. A GET sets an HttpOnly, SameSite=Strict cookie holding a random nonce; each
  form carries HMAC(process secret, nonce). A POST whose field does not match its cookie is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

CSRF_COOKIE = "crp_csrf"
CSRF_FIELD = "csrf"
TOKEN_FIELD = "token"


@dataclass(frozen=True)
class Denied:
    status: int  # 401 | 403
    reason: str  # shown to the operator and written into the audit event; never the token


class Guard:
    def __init__(self, token: str | None) -> None:
        self._token = token or None
        self._secret = secrets.token_bytes(32)  # per process: a restart invalidates open forms

    @property
    def writes_enabled(self) -> bool:
        return self._token is not None

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def csrf_for(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()

    def check_csrf(self, cookie_nonce: str | None, field: str | None) -> Denied | None:
        if not cookie_nonce or not field or not hmac.compare_digest(self.csrf_for(cookie_nonce), field):
            return Denied(403, "CSRF check failed: reload the page and submit the form again")
        return None

    def check_token(self, given: str | None) -> Denied | None:
        if self._token is None:
            return Denied(403, "writes are disabled: the console was started without CRP_CONSOLE_TOKEN")
        if not given:
            return Denied(401, "an operator token is required for this action")
        if not hmac.compare_digest(given.encode(), self._token.encode()):
            return Denied(403, "the operator token is wrong")
        return None
