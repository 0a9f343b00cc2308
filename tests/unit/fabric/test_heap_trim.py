"""give_back: the heap's free pages go back to the system (crp_stream/fabric/heap_trim.py)."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest

from crp_stream.fabric import heap_trim


def _anon_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_freed_small_arrays_leave_the_resident_set() -> None:
    """The ANN cache's scan in miniature: 60,000 small arrays (90 MB) freed, all but every 1,000th,
    leave the heap fragmented; glibc keeps those pages resident until ``give_back``."""
    arrays = [np.ones(384, dtype=np.float32) for _ in range(60_000)]
    kept = arrays[::1000]  # a few live blocks scattered through the heap: it cannot just shrink at the top
    del arrays
    before = _anon_kib()
    heap_trim.give_back()
    after = _anon_kib()
    assert kept and before - after > 40_000, (before, after)  # KiB: most of the 90 MB came back
