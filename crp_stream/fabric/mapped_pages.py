"""Page out the files a store maps into this process, once the process no longer reads them.

qdrant-edge maps its segment and WAL files and reads them in full when the shard opens: 1.7 GiB of
resident pages at 1M facts. Once the ANN cache holds every vector, a window request reads none of
them. ``MADV_PAGEOUT`` (Linux >= 5.4) asks the kernel to reclaim the pages of a range: it never changes
what a later read sees (a page read again is faulted back in from the file, or from the page cache),
so unlike ``MADV_DONTNEED`` it is harmless on any mapping, even one that changed since the map was read.
Elsewhere than Linux, or where the kernel refuses the advice, it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from functools import cache
from pathlib import Path
from typing import Any

MADV_PAGEOUT = 21


@cache
def _madvise() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def file_mappings(directory: str | os.PathLike[str], maps: str | None = None) -> list[tuple[int, int]]:
    """The (start, end) of every mapping of a file under ``directory`` in this process's
    ``/proc/self/maps`` (or the text ``maps``)."""
    root = str(Path(directory).resolve()).rstrip("/") + "/"
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            return []
    out: list[tuple[int, int]] = []
    for line in maps.splitlines():
        parts = line.split(maxsplit=5)
        # address perms offset dev inode path
        if len(parts) < 6 or not parts[5].startswith(root):
            continue
        lo, _, hi = parts[0].partition("-")
        out.append((int(lo, 16), int(hi, 16)))
    return out


def page_out(directory: str | os.PathLike[str]) -> int:
    """Advise the kernel to reclaim the pages of every file under ``directory`` mapped into this
    process (shared or private: the advice never changes their contents); returns the bytes of address
    space advised (0 where the advice is not available)."""
    madvise = _madvise()
    if madvise is None:
        return 0
    advised = 0
    for lo, hi in file_mappings(directory):
        if madvise(lo, hi - lo, MADV_PAGEOUT) == 0:
            advised += hi - lo
        elif ctypes.get_errno() == 22:  # EINVAL: a kernel before 5.4 knows no MADV_PAGEOUT
            return advised
    return advised


__all__ = ["file_mappings", "page_out"]
