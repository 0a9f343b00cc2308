"""The numeric libraries' thread defaults ``crp_stream`` sets before they load: one thread in any
thread of the process (OpenMP's default is per thread: a thread that never set it gets the start-up
value), and an explicit environment setting wins."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = """
import threading
import crp_stream  # before faiss, as every entry point imports it
import faiss
got = []
t = threading.Thread(target=lambda: got.append(faiss.omp_get_max_threads()))
t.start(); t.join()
print(got[0], faiss.omp_get_max_threads())
"""


def _probe(env: dict[str, str]) -> list[int]:
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.split()]


def test_openmp_runs_one_thread_in_a_new_thread_unless_the_environment_says_otherwise() -> None:
    if (os.cpu_count() or 1) < 2:
        pytest.fail("this check needs 2 cores: OpenMP's own default would be 1 anyway")
    base = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    assert _probe(base) == [1, 1]
    assert _probe({**base, "OMP_NUM_THREADS": "2"}) == [2, 2]
