"""Tenants: one deployment serves many teams, and nothing crosses from one to another.

Every input may carry ``tenant`` (docs/contract.md "Tenants"); without it the input belongs to
``default``. The default tenant's ids and keys are the ones a fabric without tenants derives, so
existing data and a replay of existing inputs stay byte-identical; a named tenant's are derived
with the tenant as their first part, so two tenants' identical sentences never share an id.
"""

from __future__ import annotations

import re

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
