"""The ``crp-stream`` command: wiring only, one module per command group over ``base``."""

from __future__ import annotations

from crp_stream.cli.main import main

__all__ = ["main"]
