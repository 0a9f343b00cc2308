"""``python -m crp_stream`` is ``crp-stream``."""

import sys

from crp_stream.cli import main

sys.exit(main())
