"""Summarise a pytest JUnit XML report; fail on failures, errors, no tests, or forbidden skips.

    python ops/junit_check.py REPORT.xml [--no-skips] [--no-skips-under tests/integration ...]

stdlib only, so it runs before or without the project's venv.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--no-skips", action="store_true", help="any skipped test is a failure")
    ap.add_argument(
        "--no-skips-under",
        nargs="*",
        default=[],
        metavar="DIR",
        help="a skipped test whose module lies under DIR is a failure",
    )
    args = ap.parse_args()
    try:
        root = ET.parse(args.report).getroot()
    except (OSError, ET.ParseError) as exc:
        print(f"junit: cannot read {args.report}: {exc}", file=sys.stderr)
        return 1
    cases = list(root.iter("testcase"))
    failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    prefixes = tuple(p.rstrip("/").replace("/", ".") + "." for p in args.no_skips_under)
    bad_skips = [c for c in skipped if args.no_skips or (prefixes and (c.get("classname") or "").startswith(prefixes))]
    passed = len(cases) - len(failed) - len(skipped)
    for c in bad_skips:
        sk = c.find("skipped")
        msg = (sk.get("message") if sk is not None else "") or ""
        print(f"junit: skipped, not allowed: {c.get('classname')}::{c.get('name')}: {msg}", file=sys.stderr)
    print(f"junit: {passed} passed, {len(failed)} failed, {len(skipped)} skipped")
    if not cases:
        print("junit: no test ran", file=sys.stderr)
        return 1
    return 1 if failed or bad_skips else 0


if __name__ == "__main__":
    sys.exit(main())
