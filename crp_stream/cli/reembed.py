"""``crp-stream reembed --embedder NEW --yes [--from OLD] [--broker]``: change the embedding model.

Builds NEW's vectors and similarity edges beside the active model's, then switches in one
transaction; sessions started before finish on the old model. ``--finish`` drops the vectors of every
model but the active one. How and why: docs/reliability.md ("Changing the embedding model").
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from crp_stream.cli.base import CliError, add_broker, add_common, settings_of


def register(sub: Any) -> None:
    p = sub.add_parser(
        "reembed",
        help="compute the vectors and edges of another embedding model (--embedder) and switch to it",
    )
    add_common(p)
    add_broker(p, "the workers of this deployment follow the switch")
    p.add_argument(
        "--from", dest="old", metavar="SPEC", help="the --embedder the fabric was built with (if not the default)"
    )
    p.add_argument("--yes", action="store_true", help="confirm: the switch (or, with --finish, the drop)")
    p.add_argument("--finish", action="store_true", help="drop the vectors of every model but the active one")
    p.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    if ns.finish:
        from crp_stream.runtime.reembed import finish

        if not ns.yes:
            raise CliError("reembed --finish drops the vectors of every model but the active one; pass --yes")
        retired = finish(settings_of(ns))
        print(f"retired: {', '.join(retired) if retired else 'nothing'}", file=sys.stderr)
        return 0
    if not ns.embedder:
        raise CliError("reembed: --embedder NEW is required (the model to switch to)")
    if not ns.yes:
        raise CliError("reembed switches the fabric's embedding model once the new vectors are built; pass --yes")
    new_spec = ns.embedder
    ns.embedder = None  # the settings (env, file) name the model the fabric was built with
    settings = settings_of(ns)
    from crp_stream.cli import progress
    from crp_stream.runtime.reembed import reembed

    with progress.bar(f"embedding with {new_spec}") as bar:
        r = reembed(settings, new_spec, ns.old, progress.position(bar))
    if r.switched:
        print(
            f"switched from {r.old_model} to {r.new_model}: {r.facts} facts ({r.embedded} embedded by this run), "
            f"{r.edges} similarity edges (threshold {r.edge_threshold:g}, {r.threshold_source})",
            file=sys.stderr,
        )
    else:
        print(f"{r.new_model} is active already; {r.embedded} facts caught up", file=sys.stderr)
    return 0


__all__ = ["register", "run"]
