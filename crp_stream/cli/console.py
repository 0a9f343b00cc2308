"""``crp-stream console``: the operator console in the browser (crp_stream/console), on the embedded default.

Write actions need the operator token of ``CRP_CONSOLE_TOKEN``; without it the console is read-only.
``CRP_CONSOLE_TENANT_TOKENS`` = ``tenant=token,...`` adds a token per tenant: each sees and acts on its
own tenant only, and every page then needs a token.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from crp_stream import redaction
from crp_stream.cli.base import CliError, add_common, settings_of
from crp_stream.core.tenants import tenant_tokens

TOKEN_ENV = "CRP_CONSOLE_TOKEN"
TENANT_TOKENS_ENV = "CRP_CONSOLE_TENANT_TOKENS"


def console_tokens() -> tuple[str | None, dict[str, str]]:
    """The operator token and the tenant tokens (token -> tenant) from the environment."""
    token = os.environ.get(TOKEN_ENV) or None
    try:
        tenants = tenant_tokens(os.environ.get(TENANT_TOKENS_ENV, ""))
    except ValueError as exc:
        raise CliError(f"{TENANT_TOKENS_ENV}: {exc}") from None
    redaction.register(tenants)  # each token alone, not only the variable's whole value, is masked in every log line
    if token is not None and token in tenants:
        raise CliError(f"{TENANT_TOKENS_ENV}: a tenant token equals {TOKEN_ENV}")
    if token is None:
        logging.getLogger("crp_stream.console").warning("%s is not set: the console is read-only", TOKEN_ENV)
    return token, tenants


def register(sub: Any) -> None:
    c = sub.add_parser("console", help="serve the operator console (refresh, quarantine, audit, envelopes, fabric)")
    add_common(c)
    c.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    c.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    c.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    import uvicorn

    from crp_stream.console import EmbeddedBackend, create_app

    settings = settings_of(ns)
    token, tenants = console_tokens()
    log = logging.getLogger("crp_stream.console")
    backend = EmbeddedBackend(settings)
    try:
        app = create_app(backend, token=token, tenant_tokens=tenants)
        log.info("console on http://%s:%d/ (data=%s)", ns.host, ns.port, settings.data_dir)
        # log_config=None: uvicorn's lines go through our (redacting) root handler.
        uvicorn.run(app, host=ns.host, port=ns.port, log_config=None, access_log=True)
    finally:
        backend.close()
    return 0
