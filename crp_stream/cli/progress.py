"""Progress bars of long commands (tqdm): records done, rate and time left, on stderr, only on a terminal.

tqdm over rich: one small dependency with no others, and its ``disable`` switch makes a bar a no-op,
so a command piped to a file or run by CI prints nothing extra (not even a carriage return).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO

from tqdm import tqdm

FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}, {rate_fmt}]"


def on_terminal(stream: IO[str] | None = None) -> bool:
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def bar(desc: str, total: int | None = None, unit: str = "records") -> tqdm:
    """A bar on stderr if it is a terminal, else a bar that prints nothing."""
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=not on_terminal(),
        dynamic_ncols=True,
        mininterval=0.1,
        leave=True,
        bar_format=FORMAT if total else None,
    )


def counter(b: tqdm) -> Callable[[int], None]:
    """``step(n)``: n more records done."""

    def step(n: int = 1) -> None:
        b.update(n)

    return step


def position(b: tqdm) -> Callable[[int, int], None]:
    """``report(done, total)``: the runtime's position; the total grows as processing appends records."""

    def report(done: int, total: int) -> None:
        b.total = max(total, done)
        b.bar_format = FORMAT
        b.update(done - b.n)

    return report
