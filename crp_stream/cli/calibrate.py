"""``crp-stream calibrate``: similarity thresholds from a fabric's own similarity distribution.

The seeds' thresholds (min relevance 0.55, edges 0.60, contradiction pairs 0.85) were set for a large
embedding model; other models give other cosines. This command samples the fabric's vectors (the
first N fact ids in id order: ids are hashes, so the sample is deterministic and unbiased), computes
their pairwise cosines, optionally the cosines of probe queries (``--query``) against the same
sample, and runs ``core.calibration.calibrate_thresholds``. It prints the result beside the values in
force (table, or ``--json``); ``--store`` saves it in the fabric's meta table under
``thresholds:<model>``, where ``Fabric.thresholds`` picks it up ahead of the shipped calibration.
Explicit settings (``CRP_MIN_RELEVANCE`` ...) still win over stored values.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from crp_stream.cli import progress
from crp_stream.cli.base import CliError, add_common, settings_of
from crp_stream.core.calibration import Thresholds, background_similarity, calibrate_thresholds
from crp_stream.runtime.embedded import open_fabric

VECTOR_CHUNK = 1000  # vectors read per call: the bar moves, memory stays bounded
DEFAULT_SAMPLE = 2000
MAX_SAMPLE = 5000  # the pairwise matrix is sample² float32: 100 MB at the cap
EXCLUDED = ("quarantined", "expired", "superseded")  # what retrieval never sees
STORED = ("min_relevance", "edge_threshold", "contradiction_threshold", "min_connector_relevance")
SETTING_OF = {
    "min_relevance": "min_relevance",
    "edge_threshold": "edge_threshold",
    "contradiction_threshold": "contradiction_threshold",
}


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "calibrate", help="derive similarity thresholds from the fabric's own similarity distribution"
    )
    add_common(p)
    p.add_argument(
        "--sample",
        type=int,
        default=DEFAULT_SAMPLE,
        help=f"facts to sample (2..{MAX_SAMPLE}, default {DEFAULT_SAMPLE})",
    )
    p.add_argument(
        "--query",
        action="append",
        default=[],
        metavar="TEXT",
        help="a representative query (repeatable); its cosines to the sample set min_relevance",
    )
    p.add_argument(
        "--store",
        action="store_true",
        help="save the result in the fabric (meta thresholds:<model>) for the workers to use",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    settings = settings_of(ns)

    if not 2 <= ns.sample <= MAX_SAMPLE:
        raise CliError(f"calibrate: --sample must be within 2..{MAX_SAMPLE}, got {ns.sample}")
    fabric = open_fabric(settings)
    try:
        result = calibrate_fabric(fabric, ns.sample, ns.query, store=ns.store)
    except ValueError as exc:
        raise CliError(f"calibrate: {exc}") from None
    finally:
        fabric.close()
    if ns.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        sys.stdout.write(format_table(result))
    return 0


def calibrate_fabric(fabric: Any, sample: int, queries: Sequence[str] = (), *, store: bool = False) -> dict[str, Any]:
    """Sample the fabric, calibrate, optionally store; returns the report ``--json`` prints.

    Raises ``ValueError`` (one line) when the fabric is empty or the queries cannot be embedded.
    """
    from crp_stream.fabric.embedders.port import CALIBRATED_THRESHOLDS
    from crp_stream.fabric.fabric import MODEL_KEY, thresholds_key

    with fabric.unit_of_work() as uow:
        model = uow.repo.get_meta(MODEL_KEY)
        if model is None:
            raise ValueError("the fabric holds no facts yet (publish documents first)")
        if fabric.embedder.model_id != model:
            raise ValueError(
                f"the fabric's vectors are of model {model!r}, the embedder is "
                f"{fabric.embedder.model_id!r}; pass --embedder for {model!r} "
                f"(precomputed:{model} reads the vectors without loading a model)"
            )
        total = len(uow.repo.fact_ids(EXCLUDED))
        ids = uow.repo.fact_ids(EXCLUDED, limit=sample)
        found: dict[str, Any] = {}
        with progress.bar("reading the sample's vectors", total=len(ids)) as bar:
            for i in range(0, len(ids), VECTOR_CHUNK):
                part = ids[i : i + VECTOR_CHUNK]
                found.update(fabric.vectors.get_vectors(part))
                bar.update(len(part))
        ids = [i for i in ids if i in found]
        if len(ids) < 2:
            raise ValueError(f"need at least 2 facts with vectors to calibrate, the fabric has {len(ids)}")
        vecs = np.stack([found[i] for i in ids]).astype(np.float32)
        qvecs = _query_vectors(fabric, queries)
        pairwise = vecs @ vecs.T
        query_rel = (qvecs @ vecs.T).reshape(-1) if qvecs.shape[0] else None
        calibrated = calibrate_thresholds(pairwise, query_rel)
        key = thresholds_key(model)
        values = {k: round(float(getattr(calibrated, k)), 4) for k in STORED}
        if store:
            uow.repo.set_meta(key, json.dumps(values, sort_keys=True))
        stored = fabric.stored_thresholds(model, uow.repo, refresh=True)
        current = fabric.thresholds(uow.repo)
        edges = uow.repo.edge_count()
    shipped = CALIBRATED_THRESHOLDS.get(model, {})
    s = fabric.settings
    sources = {}
    for name in (*STORED, "edge_k"):
        explicit = getattr(s, SETTING_OF[name]) if name in SETTING_OF else None
        sources[name] = (
            "setting"
            if explicit is not None or name == "edge_k"
            else "stored"
            if name in stored
            else "shipped calibration"
            if name in shipped
            else "seed default"
        )
    n = len(ids)
    return {
        "model": model,
        "meta_key": key,
        "sample": {
            "facts": n,
            "facts_total": total,
            "pairs": n * (n - 1) // 2,
            "background": round(background_similarity(pairwise), 4),
            "queries": int(qvecs.shape[0]),
            "query_background": None if query_rel is None else round(background_similarity(query_rel), 4),
        },
        "seed": asdict(Thresholds()),
        "current": asdict(current),
        "sources": sources,
        "calibrated": {**values, "edge_k": calibrated.edge_k},
        "stored": store,
        "similarity_edges": edges,
    }


def _query_vectors(fabric: Any, queries: Sequence[str]) -> np.ndarray:
    texts = [q for q in queries if q.strip()]
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    if fabric.embedder.requires_vectors:
        raise ValueError(
            f"--query needs an embedder that embeds text; {fabric.embedder.model_id!r} is "
            "precomputed (calibrate without --query, or pass the model's embedder)"
        )
    return np.asarray(fabric.embedder.embed(texts), dtype=np.float32)


def format_table(r: dict[str, Any]) -> str:
    """The report as a table a person can scan."""
    s = r["sample"]
    lines = [
        f"calibration of the fabric's model {r['model']}: {s['facts']:,} of {s['facts_total']:,} facts sampled, "
        f"{s['pairs']:,} pairs",
        f"background (median fact-fact cosine): {s['background']:.4f}",
    ]
    if s["queries"]:
        lines.append(
            f"query background (median cosine of {s['queries']} queries to the sample): {s['query_background']:.4f}"
        )
    lines.append(f"{'threshold':<25} {'seed':>6} {'in force':>9}  {'from':<20} {'calibrated':>10}")
    for name in (*STORED, "edge_k"):
        lines.append(
            f"{name:<25} {_num(r['seed'][name]):>6} {_num(r['current'][name]):>9}  "
            f"{r['sources'][name]:<20} {_num(r['calibrated'][name]):>10}"
        )
    if r["stored"]:
        lines.append(
            f"stored as meta {r['meta_key']}; running workers use it once restarted "
            "(settings such as CRP_MIN_RELEVANCE still win)"
        )
        lines.append(
            f"the {r['similarity_edges']:,} similarity edges were built at ingestion with the old "
            "edge_threshold; replay the inputs to rebuild them"
        )
    else:
        lines.append(f"not stored (--store saves it as meta {r['meta_key']})")
    return "\n".join(lines) + "\n"


def _num(x: Any) -> str:
    return str(x) if isinstance(x, int) else f"{float(x):.4f}"
