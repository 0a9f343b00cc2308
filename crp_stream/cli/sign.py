"""``crp-stream sign --source S --key-env VAR FILE``: sign a producer's replay lines (docs/security.md).

Each line of FILE (replay format; ``-`` reads stdin) on ``crp.documents`` or ``crp.telemetry`` whose
value claims ``source == S`` gets the header ``crp-signature`` = hex HMAC-SHA256 of its value bytes
under S's key, and its value is written as a JSON *string* holding those exact bytes, so that
``crp-stream publish`` and ``crp-stream replay`` carry byte for byte what was signed. Every other line
is printed unchanged. The key is read from the environment variable VAR, never from the command line
(where ``ps`` would show it), and it is never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from crp_stream import redaction
from crp_stream.cli.base import CliError, add_logging
from crp_stream.core.provenance import SIGNATURE_HEADER, sign_value
from crp_stream.events.topics import DOCUMENTS, TELEMETRY
from crp_stream.replay_format import json_lines, raw_value

SIGNED_TOPICS = (DOCUMENTS, TELEMETRY)


def register(sub: Any) -> None:
    sg = sub.add_parser("sign", help="add crp-signature headers to one source's replay lines (key from env)")
    sg.add_argument("file", help="replay-format JSONL file, or - for stdin")
    sg.add_argument("--source", required=True, help="the source whose lines are signed")
    sg.add_argument(
        "--key-env", required=True, metavar="VAR", help="environment variable that holds the source's signing key"
    )
    add_logging(sg)
    sg.set_defaults(handler=run)


def claimed_source(raw: bytes) -> str | None:
    try:
        parsed = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    source = parsed.get("source") if isinstance(parsed, dict) else None
    return source if isinstance(source, str) else None


def sign_line(obj: dict[str, Any], source: str, key: str) -> dict[str, Any] | None:
    """The signed form of one parsed replay line, or None when it is not this source's record."""
    if str(obj.get("topic", "")).split(".", 1)[-1] not in {t.split(".", 1)[1] for t in SIGNED_TOPICS}:
        return None
    raw = raw_value(obj.get("value"))
    if claimed_source(raw) != source:
        return None
    headers = dict(obj.get("headers") or {})
    headers[SIGNATURE_HEADER] = sign_value(key, raw)
    return {**obj, "value": raw.decode("utf-8", "surrogatepass"), "headers": headers}


def run(ns: argparse.Namespace) -> int:

    key = os.environ.get(ns.key_env, "")
    if not key:
        raise CliError(f"sign: the environment variable {ns.key_env} is not set or empty")
    if len(key) < redaction.MIN_SECRET_CHARS:
        raise CliError(f"sign: the key in {ns.key_env} is shorter than {redaction.MIN_SECRET_CHARS} characters")
    redaction.register([key])
    try:
        text = sys.stdin.read() if ns.file == "-" else Path(ns.file).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{ns.file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CliError(f"{ns.file}: not UTF-8 text") from None
    signed = kept = 0
    out = sys.stdout
    lines = list(json_lines(text, ns.file))
    for _where, line, obj in lines:
        result = sign_line(obj, ns.source, key)
        if result is None:
            kept += 1
            out.write(line.rstrip("\n") + "\n")
        else:
            signed += 1
            out.write(json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(
        f"signed {signed} records of source {ns.source!r}; {kept} lines left unchanged (another topic or source)",
        file=sys.stderr,
    )
    return 0


__all__ = ["claimed_source", "raw_value", "register", "run", "sign_line"]
