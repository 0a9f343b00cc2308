"""Tenants: one deployment serves many teams, and nothing crosses from one to another.

Every input may carry ``tenant`` (docs/contract.md "Tenants"); without it the input belongs to
``default``. The default tenant's ids and keys are the ones a fabric without tenants derives, so
existing data and a replay of existing inputs stay byte-identical; a named tenant's are derived
with the tenant as their first part, so two tenants' identical sentences never share an id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

DEFAULT_TENANT = "default"
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_TENANT = re.compile(TENANT_PATTERN)
_SEP = "\x1f"  # cannot occur in a tenant name, so a scoped key never equals a default one's form


def tenant_name(tenant: str | None) -> str:
    """CONTRACT "Tenants": an input without ``tenant`` belongs to the default tenant."""
    return DEFAULT_TENANT if tenant is None else tenant


def is_tenant_name(tenant: str) -> bool:
    """CONTRACT "Tenants": a tenant is a short name of letters, digits, ``.``, ``_`` and ``-``."""
    return bool(_TENANT.match(tenant))


def scoped_id_parts(tenant: str | None, *parts: str) -> tuple[str, ...]:
    """CONTRACT "Tenants": the parts an id is derived from; a named tenant's start with it, the
    default tenant's are unchanged (its ids stay what a fabric without tenants derived)."""
    t = tenant_name(tenant)
    return parts if t == DEFAULT_TENANT else (t, *parts)


def scoped_claim_key(tenant: str | None, key: str) -> str:
    """CONTRACT "Tenants": no claim spans tenants. A claim key is ``subject|attribute`` with ``|``
    escaped inside the parts; a named tenant's gets the tenant as a third part in front, so it
    never equals another tenant's (nor the default one's, which has one unescaped ``|``)."""
    t = tenant_name(tenant)
    return key if t == DEFAULT_TENANT else f"{t}|{key}"


def scoped_key(tenant: str | None, key: str) -> str:
    """CONTRACT "Tenants": a stored key of a named tenant (a document id, a title key) is prefixed
    with the tenant and a unit separator, so documents and titles of two tenants never meet."""
    t = tenant_name(tenant)
    return key if t == DEFAULT_TENANT else f"{t}{_SEP}{key}"


def unscoped_key(key: str) -> tuple[str, str]:
    """The ``(tenant, key)`` a ``scoped_key`` was made of."""
    t, sep, rest = key.partition(_SEP)
    return (t, rest) if sep and is_tenant_name(t) else (DEFAULT_TENANT, key)


ALL_TENANTS = "*"  # the console scope of the operator token: every tenant


def tenant_tokens(spec: str) -> dict[str, str]:
    """CONTRACT "Tenants", the console: ``CRP_CONSOLE_TENANT_TOKENS`` = ``tenant=token,...`` -> token
    to tenant. ValueError names the entry that is wrong (never the token itself)."""
    out: dict[str, str] = {}
    for n, item in enumerate((x.strip() for x in spec.split(",")), 1):
        if not item:
            continue
        tenant, sep, token = item.partition("=")
        tenant, token = tenant.strip(), token.strip()
        if not sep or not is_tenant_name(tenant):
            raise ValueError(f"entry {n}: expected TENANT=TOKEN with a tenant name (letters, digits, '.', '_', '-')")
        if len(token) < 16:
            raise ValueError(f"entry {n} ({tenant}): the token must have at least 16 characters")
        if token in out:
            raise ValueError(f"entry {n} ({tenant}): the same token is given to two tenants")
        out[token] = tenant
    return out


def view_tenant(scope: str, asked: str | None) -> str | None:
    """CONTRACT "Tenants", the console: the tenant a page shows for a reader of ``scope`` (a tenant, or
    ``ALL_TENANTS``) who asked for ``asked`` (``?tenant=``); None: every tenant. A tenant's reader
    sees only its own; asking for another is a PermissionError."""
    if asked is not None and asked != "" and not is_tenant_name(asked):
        raise ValueError(f"tenant: {asked!r} is not a tenant name")
    if scope == ALL_TENANTS:
        return asked or None
    if asked and asked != scope:
        raise PermissionError("this token reads only its own tenant")
    return scope


def audit_tenant(details: Mapping[str, object], owners: Mapping[str, str]) -> str | None:
    """CONTRACT "Tenants", the console: the tenant an audit event is about: its ``tenant`` detail, else
    the tenant owning the claim or session it names (``owners``: claim keys and session ids to
    tenants); None when it names none (only the operator token's reader sees it)."""
    t = details.get("tenant")
    if isinstance(t, str) and is_tenant_name(t):
        return t
    for field in ("claim", "claim_key", "session_id"):
        v = details.get(field)
        if isinstance(v, str) and v in owners:
            return owners[v]
    return None


def partition_trust(
    tenant: str | None,
    source: str,
    by_tenant: Mapping[tuple[str, str], float],
    by_source: Mapping[str, float],
) -> float | None:
    """Partition trust (the drift-vs-poisoning seed, "What Was Observed") per tenant (CONTRACT
    "Tenants"): the trust configured for the ``(tenant, source)`` pair, else the source's own, else
    None (the source type's default applies)."""
    pair = (tenant_name(tenant), source)
    if pair in by_tenant:
        return by_tenant[pair]
    return by_source.get(source)


def command_reaches(command_tenant: str | None, owner: str | None) -> bool:
    """CONTRACT "Tenants": an operator command acts only on its own tenant's data. ``owner`` is the
    tenant of the target (a refresh request's or a candidate's claim, a fact); a target whose owner
    is unknown (no fact left) belongs to the default tenant."""
    return tenant_name(command_tenant) == tenant_name(owner)
