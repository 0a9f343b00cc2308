"""Write the JSON Schema of every event to ``schemas/v1/<EventName>.json``, docs/contract.md and docs/asyncapi.yaml.

    python -m crp_stream.schemas_gen            # (re)write the files
    python -m crp_stream.schemas_gen --check    # exit 1 if a checked-in file differs

The files are generated, never edited by hand; tests/unit/test_schemas.py proves they match.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from crp_stream import asyncapi_doc, contract_doc
from crp_stream.events import EVENT_MODELS

SCHEMA_VERSION = "v1"
ID_BASE = f"https://crp-stream/schemas/{SCHEMA_VERSION}/"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "schemas" / SCHEMA_VERSION
CONTRACT_DOC = Path(__file__).resolve().parent.parent / "docs" / "contract.md"
ASYNCAPI_DOC = Path(__file__).resolve().parent.parent / "docs" / "asyncapi.yaml"


def schema_for(name: str) -> dict[str, Any]:
    """The JSON Schema (validation mode) of the event ``name``, with its ``$id``."""
    schema = EVENT_MODELS[name].model_json_schema(mode="validation")
    schema["$id"] = f"{ID_BASE}{name}.json"
    schema["$schema"] = DRAFT
    return schema


def render(name: str) -> str:
    """The exact file text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(schema_for(name), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generate(out_dir: Path = DEFAULT_DIR) -> list[Path]:
    """Write every schema under ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in sorted(EVENT_MODELS):
        path = out_dir / f"{name}.json"
        path.write_text(render(name), encoding="utf-8")
        written.append(path)
    if out_dir == DEFAULT_DIR:
        CONTRACT_DOC.write_text(contract_doc.render(), encoding="utf-8")
        written.append(CONTRACT_DOC)
        ASYNCAPI_DOC.write_text(asyncapi_doc.render(), encoding="utf-8")
        written.append(ASYNCAPI_DOC)
    return written


def stale(out_dir: Path = DEFAULT_DIR) -> list[str]:
    """Names whose checked-in file is missing or differs from the models."""
    out = []
    for name in sorted(EVENT_MODELS):
        path = out_dir / f"{name}.json"
        if not path.exists() or path.read_text(encoding="utf-8") != render(name):
            out.append(name)
    if out_dir == DEFAULT_DIR and (
        not CONTRACT_DOC.exists() or CONTRACT_DOC.read_text(encoding="utf-8") != contract_doc.render()
    ):
        out.append("docs/contract.md")
    if out_dir == DEFAULT_DIR and (
        not ASYNCAPI_DOC.exists() or ASYNCAPI_DOC.read_text(encoding="utf-8") != asyncapi_doc.render()
    ):
        out.append("docs/asyncapi.yaml")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m crp_stream.schemas_gen", description="Write schemas/v1/*.json from the models."
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_DIR, help="output directory (default schemas/v1)")
    parser.add_argument("--check", action="store_true", help="only check that the files are up to date")
    args = parser.parse_args(argv)
    if args.check:
        names = stale(args.out)
        if names:
            print(f"stale schemas in {args.out}: {', '.join(names)}; run python -m crp_stream.schemas_gen")
            return 1
        print(f"{len(EVENT_MODELS)} schemas up to date in {args.out}")
        return 0
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
