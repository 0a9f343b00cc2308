"""Give the C heap's free pages back to the system after a large transient allocation.

Building the ANN cache reads every point of the vector store as one small array each (1.5 KB at 384-d),
and the cache warm-up reads the graph and the facts in batches of Python rows. When they are freed,
glibc keeps the pages: at 100k facts ~180 MiB stayed resident after the ANN cache was built, ~1.8 GiB
at 1M. ``malloc_trim(0)`` returns every whole free page inside the heap (glibc >= 2.8 also releases
pages in the middle of the heap, not only at its top). Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache


@cache
def _trim() -> object:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): no malloc_trim
        return None


def give_back() -> None:
    """Return the heap's free pages to the system (glibc's ``malloc_trim(0)``); a no-op without glibc."""
    trim = _trim()
    if trim is not None:
        trim(0)  # type: ignore[operator]  # a ctypes function


__all__ = ["give_back"]
