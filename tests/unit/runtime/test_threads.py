"""runtime/threads.limit_blas: numpy's BLAS on the threads ``blas_threads`` gives."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from crp_stream.runtime import threads


def test_limit_blas_sets_every_blas_library_and_zero_leaves_them() -> None:
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS is loaded
    with threadpool_limits(limits=2, user_api="blas"):  # restored on exit: the test leaves no limit behind
        assert threads.blas_threads() and set(threads.blas_threads()) == {2}
        threads.limit_blas(0)
        assert set(threads.blas_threads()) == {2}
        threads.limit_blas(1)
        assert set(threads.blas_threads()) == {1}
        a = np.arange(400 * 384, dtype=np.float32).reshape(400, 384) / 1e5
        assert np.allclose(a @ a.T, np.einsum("ik,jk->ij", a, a), rtol=1e-4)  # the same products


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(ValueError, match="blas_threads"):
        threads.limit_blas(-1)
