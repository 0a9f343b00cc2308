"""What a vector index stores beside each vector (its payload) and the filters searches apply to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from crp_stream.core.tenants import DEFAULT_TENANT
from crp_stream.fabric.vectors.checks import Vector

# Payload field names, shared by the backends (payload indexes are created on the filter fields).
F_FACT_ID: Final = "fact_id"
F_STATUS: Final = "status"
F_EXPIRES_AT: Final = "expires_at"
F_SOURCE: Final = "source"
F_TENANT: Final = "tenant"


@dataclass(frozen=True, slots=True)
class VectorItem:
    """One fact's vector and the payload the filters need."""

    fact_id: str
    vector: npt.ArrayLike
    status: str = "active"
    expires_at: float | None = None  # epoch seconds; None = never expires
    source: str = ""
    tenant: str | None = None  # None: the default tenant


@dataclass(frozen=True, slots=True)
class Constraint:
    """A backend-neutral filter: each backend translates it into its own filter type."""

    exclude_statuses: tuple[str, ...] = ()
    alive_at: float | None = None  # drop points whose expires_at <= alive_at (null never expires)
    exclude_id: str | None = None
    tenant: str | None = None  # the points of this tenant only; None: the default tenant's


def scope(tenant: str | None) -> str | None:
    """The tenant as the payload and filters spell it: None for the default tenant."""
    return None if tenant is None or tenant == DEFAULT_TENANT else tenant


def payload_of(item: VectorItem) -> dict[str, Any]:
    """The payload stored with a point; identical on every backend so results are congruent."""
    payload = {
        F_FACT_ID: item.fact_id,
        F_STATUS: item.status,
        F_EXPIRES_AT: None if item.expires_at is None else float(item.expires_at),
        F_SOURCE: item.source,
    }
    tenant = scope(item.tenant)
    if tenant is not None:
        payload[F_TENANT] = tenant
    return payload


def scanned_point(payload: dict[str, Any] | None, vector: Any) -> tuple[str, Vector, str, float | None] | None:
    """A backend's stored point as ``_scan`` yields it, or None when it is not one of ours."""
    meta = scanned_meta(payload) if isinstance(vector, list) else None
    if meta is None:
        return None
    fact_id, status, expires = meta
    return fact_id, np.asarray(vector, dtype=np.float32), status, expires


def scanned_meta(payload: dict[str, Any] | None) -> tuple[str, str, float | None] | None:
    """``scanned_point`` without the vector: (fact_id, status, expires_at), or None when not one of ours."""
    p = payload or {}
    if F_FACT_ID not in p:
        return None
    exp = p.get(F_EXPIRES_AT)
    return str(p[F_FACT_ID]), str(p[F_STATUS]), None if exp is None else float(exp)
