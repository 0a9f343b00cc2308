"""``normalise``'s fast path against the checks it skips: the same float32 bits, the same reasons."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crp_stream.fabric.vectors.checks import normalise


def _reference(vector: list[float], dim: int | None) -> np.ndarray | str:
    """The rule step by step: shape, dimension, finiteness, ``np.linalg.norm``, divide."""
    v = np.asarray(vector, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        return "shape"
    if dim is not None and v.shape[0] != dim:
        return "dimension"
    if not np.all(np.isfinite(v)):
        return "NaN or inf"
    norm = float(np.linalg.norm(v))
    if norm == 0.0:
        return "norm 0"
    return (v / norm).astype(np.float32)


_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e3, 1e3),
    st.floats(-1e-160, 1e-160),  # squares that underflow
    st.sampled_from([0.0, -0.0, 1e200, -1e200, 5e-324]),  # a sum of squares that overflows
)


@given(st.lists(_FLOATS, min_size=0, max_size=12), st.sampled_from([None, 3, 4]))
def test_normalise_is_the_rule_bit_for_bit(vector: list[float], dim: int | None) -> None:
    with np.errstate(over="ignore", invalid="ignore"):  # the rule's own overflow warns as before
        _check(vector, dim)


def _check(vector: list[float], dim: int | None) -> None:
    want = _reference(vector, dim)
    if isinstance(want, str):
        with pytest.raises(ValueError, match=want):
            normalise(vector, dim)
        return
    got = normalise(vector, dim)
    assert got.dtype == np.float32 and got.tobytes() == want.tobytes()


def test_a_sum_of_squares_past_the_float_range_still_normalises_as_the_rule_does() -> None:
    with np.errstate(over="ignore"):
        got = normalise([1e200, 1e200])  # finite parts, an infinite norm: the rule divides by inf
        want = _reference([1e200, 1e200], None)
    assert isinstance(want, np.ndarray) and got.tobytes() == want.tobytes() and not got.any()
