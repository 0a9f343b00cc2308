"""Write the CI regression fixture of tests/integration/test_quality_regression.py.

    .venv/bin/python ops/bench/quality_fixture.py          # tests/data/hotpotqa_ci10.{json,npz}

The first 10 HotpotQA dev questions (the tuning set): their paragraphs, supporting facts and the
default embedder's vectors of the question and of each "title: sentence" (what ingest embeds for a
titled document), quantised to int8 (x 127; the test renormalises them).
"""

from __future__ import annotations

import json

import numpy as np

from crp_stream.processors.doc_graph import embedding_text
from ops.bench._common import DEFAULT_DATASETS, REPO, EmbeddingCache

QUESTIONS = 10


def main() -> None:
    src = DEFAULT_DATASETS / "hotpotqa" / "hotpotqa_dev_distractor_hard_100.jsonl"
    rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()][:QUESTIONS]
    cache = EmbeddingCache("hotpotqa")
    out, vecs = [], []
    for row in rows:
        paras = [[title, [s.strip() for s in sents]] for title, sents in row["context"]]
        texts = [embedding_text(t, s) for t, ss in paras for s in ss if s]
        v = cache.embed([row["question"], *texts])
        vecs.append(np.round(v * 127).astype(np.int8))
        out.append(
            {
                "id": row["_id"],
                "question": row["question"],
                "paragraphs": paras,
                "supporting_facts": [[t, k] for t, ks, *_ in row["supporting_facts"] for k in ks],
            }
        )
    data = REPO / "tests" / "data"
    (data / "hotpotqa_ci10.json").write_text(json.dumps(out, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    np.savez_compressed(data / "hotpotqa_ci10.npz", **{f"q{i}": v for i, v in enumerate(vecs)})
    print(f"wrote {len(out)} questions, {sum(len(v) for v in vecs)} vectors to {data}")


if __name__ == "__main__":
    main()
