"""page_out: the pages of a store's mapped files leave the resident set (crp_stream/fabric/mapped_pages.py)."""

from __future__ import annotations

import mmap
import platform
from pathlib import Path

import pytest

from crp_stream.fabric import mapped_pages

SIZE = 64 << 20


def _file_kib() -> int:
    """Resident pages of mapped files, on a disk or on tmpfs."""
    out = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("RssFile:", "RssShmem:")):
            out += int(line.split()[1])
    return out


def test_the_mappings_under_a_directory_and_no_other() -> None:
    maps = "\n".join(
        [
            "7f0000000000-7f0000100000 rw-s 00000000 fd:01 11 /data/vectors/edge-shard/segments/a/vectors.dat",
            "7f0000200000-7f0000300000 r--p 00000000 fd:01 12 /data/vectors/edge-shard/payload_index/page_0.dat",
            "7f0000400000-7f0000500000 rw-s 00000000 fd:01 13 /data/vectors-other/x.dat",  # a sibling
            "7f0000600000-7f0000700000 rw-p 00000000 00:00 0 ",  # anonymous
            "7f0000800000-7f0000900000 r-xp 00000000 fd:01 14 /usr/lib/libc.so.6",
        ]
    )
    got = mapped_pages.file_mappings("/data/vectors", maps)
    assert got == [(0x7F0000000000, 0x7F0000100000), (0x7F0000200000, 0x7F0000300000)]


@pytest.mark.skipif(platform.system() != "Linux", reason="MADV_PAGEOUT is Linux's")
@pytest.mark.parametrize("access", [mmap.ACCESS_WRITE, mmap.ACCESS_READ])
def test_a_mapped_file_read_in_full_leaves_the_resident_set_and_reads_the_same(tmp_path: Path, access: int) -> None:
    """qdrant-edge's files in miniature: mapped, read in full, then paged out; what they hold is unchanged."""
    store = tmp_path / "store"
    store.mkdir()
    path = store / "segment.dat"
    pattern = bytes(range(256)) * (SIZE // 256)
    path.write_bytes(pattern)
    with path.open("r+b") as f, mmap.mmap(f.fileno(), SIZE, access=access) as m:
        assert sum(m[i] for i in range(0, SIZE, 4096)) >= 0  # every page touched: resident
        before = _file_kib()
        advised = mapped_pages.page_out(store)
        after = _file_kib()
        assert advised >= SIZE
        assert before - after > (SIZE >> 10) * 3 // 4, (before, after)
        assert m[:] == pattern  # read again from the file, as it was
        if access == mmap.ACCESS_WRITE:
            m[0:4] = b"edit"  # a write after the advice lands as any write does
            m.flush()
    if access == mmap.ACCESS_WRITE:
        assert path.read_bytes()[:4] == b"edit"
