"""``python -m tests.support.faulty_worker N worker ARGS...``: ``crp-stream worker`` that dies (exit 99)
after its N-th fabric commit, before producing that record's outputs. The fault is injected through
``KafkaWorker``'s ``after_commit`` hook; production code reads no test switch."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from crp_stream.cli.main import main as cli_main
from crp_stream.runtime.kafka import launch as worker


def _hook(n: int) -> Any:
    left = [n]

    def after_commit(routed: list[Any]) -> None:
        left[0] -= 1
        if left[0] <= 0:
            logging.getLogger("crp_stream.kafka").error("fault: exiting before producing %d outputs", len(routed))
            os._exit(99)

    return after_commit


def main() -> int:
    n = int(sys.argv[1])
    real = worker.run_worker

    def run_worker(settings: Any, groups: Any = None, after_commit: Any = None) -> int:
        return real(settings, groups, after_commit=_hook(n))

    worker.run_worker = run_worker  # type: ignore[assignment]  # the CLI looks it up at call time
    return cli_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
