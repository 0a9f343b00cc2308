"""The operator console: refresh requests, quarantine review, audit log, envelopes, fabric.

I/O-edge code: it reads through the fabric's repository and the runtime's log, and writes only by
publishing operator commands, as the CLI does. ``crp-stream console`` serves it.
"""

from crp_stream.console.app import create_app
from crp_stream.console.backend import EmbeddedBackend

__all__ = ["EmbeddedBackend", "create_app"]
