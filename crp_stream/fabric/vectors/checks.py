"""A vector's checks: unit length, finite, of the index's dimension, with the precise reason it fails."""

from __future__ import annotations

import math
from typing import NoReturn

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


def normalise(vector: npt.ArrayLike, dim: int | None = None) -> Vector:
    """Return ``vector`` as a unit-length float32 1-D array; reject NaN/inf, zero norm, wrong dimension."""
    v = np.asarray(vector, dtype=np.float64)
    if v.ndim == 1 and v.size and (dim is None or v.shape[0] == dim):
        # ``np.linalg.norm``'s own arithmetic (``sqrt(v.dot(v))``) without its checks: a finite
        # nonzero sum of squares has every component finite; anything else takes the checks below
        squares = float(v.dot(v))
        if 0.0 < squares < math.inf:
            return (v / math.sqrt(squares)).astype(np.float32)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"vector must be 1-D and non-empty, got shape {v.shape}")
    if dim is not None and v.shape[0] != dim:
        raise ValueError(f"vector has dimension {v.shape[0]}, the index has {dim}")
    if not np.all(np.isfinite(v)):
        raise ValueError("vector contains NaN or inf")
    norm = float(np.linalg.norm(v))
    if norm == 0.0:
        raise ValueError("vector has norm 0")
    return (v / norm).astype(np.float32)


def _reject(fact_id: str, vector: npt.NDArray[np.float64], dim: int) -> NoReturn:
    """Raise the precise reason why ``vector`` of ``fact_id`` cannot be indexed."""
    try:
        normalise(vector, dim)
    except ValueError as exc:
        raise ValueError(f"fact {fact_id!r}: {exc}") from None
    raise ValueError(f"fact {fact_id!r}: vector norm is not finite")
