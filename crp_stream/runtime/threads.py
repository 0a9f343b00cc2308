"""numpy's BLAS thread pool in a long-running process (``crp-stream run``, the Kafka worker), set once at
start-up by ``blas_threads``.

Every product on the serving path is a few hundred rows by the embedding's width (a request's
candidate screen, its CDR signals). OpenBLAS splits such a product over every core, and its other
threads then busy-wait for the next one: at 20k facts a request took 17-18 ms of CPU for 8-9 ms of
wall time, with a second thread spinning beside it; on one thread, 8-10 ms of CPU and no slower
(``ops.bench.worker_gap``). On a host shared with the broker and the database, that spinning core
is theirs. ``threadpoolctl`` reaches every BLAS library loaded in the process (numpy's and faiss's),
at run time, after they were imported.
"""

from __future__ import annotations

from threadpoolctl import threadpool_info, threadpool_limits


def limit_blas(threads: int) -> None:
    """At most ``threads`` BLAS threads from now on, for the rest of the process (0: the library's
    own choice, unchanged)."""
    if threads < 0:
        raise ValueError(f"blas_threads must be >= 0, got {threads}")
    if threads:
        threadpool_limits(limits=threads, user_api="blas")  # not undone: the process keeps it


def blas_threads() -> list[int]:
    """The thread count of each BLAS library loaded (what ``limit_blas`` set)."""
    return [int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "blas"]


__all__ = ["blas_threads", "limit_blas"]
