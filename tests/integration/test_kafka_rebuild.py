"""``crp-stream rebuild`` on Kafka: the projections are dropped and rebuilt by replaying the
topics from offset 0; the rebuilt state equals the live state, nothing is produced again, and a worker
started afterwards has nothing to redo. The live run is the crash scenario through one worker, one
input at a time (``tests/support/kafka_pipelines.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crp_stream import cli
from tests.support.crash import MODEL, build_scenario
from tests.support.kafka import Kafka, broker, unique_prefix
from tests.support.kafka_pipelines import GROUP_OF, Clock, Pacer, Pipeline, compare

pytestmark = [pytest.mark.kafka, pytest.mark.postgres, pytest.mark.heavy]

SEED = 4
TAIL = 3  # inputs published after the rebuild


def test_kafka_rebuild_replays_the_topics_and_equals_the_live_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = Kafka(unique_prefix("in"))
    live = Pipeline("live", tmp_path, feed.prefix)
    pacer = Pacer(feed, [live])
    try:
        live.create_topics()
        live.worker.start()
        scenario = build_scenario(SEED, pacer.discover(live))
        pacer.feed_all(scenario[len(pacer.stamps) : -TAIL])
        monkeypatch.setenv("CRP_TOPIC_PREFIX", live.prefix)
        monkeypatch.setenv("CRP_INPUT_TOPIC_PREFIX", feed.prefix)
        args = [
            "rebuild",
            "--yes",
            "--verify",
            "--broker",
            broker(),
            "--database",
            live.db,
            "--qdrant",
            live.worker.qdrant,
            "--embedder",
            f"precomputed:{MODEL}",
            "--data",
            str(tmp_path / "rebuild"),
        ]
        capsys.readouterr()
        assert cli.main(args) == 2
        assert "stop the workers first" in capsys.readouterr().err
        assert live.worker.stop() == 0

        clock = Clock(pacer.stamps)
        before, ends = live.snapshot(clock), live.kafka.ends()
        assert before["audit_log"] and before["sessions"] and before["edges"] and before["vectors"]["count"]
        assert cli.main(args) == 0
        err = capsys.readouterr().err
        assert "verified: rebuilt projections equal the dropped ones" in err and "records produced: 0" in err
        assert compare(before, live.snapshot(clock)) == []  # the same check, independent of the command's
        assert live.kafka.ends() == ends  # every output was derived again, none produced twice

        live.worker.start()  # a worker after the rebuild redoes nothing and goes on
        tail = scenario[-TAIL:]
        pacer.feed_all(tail)
        for group in ("ingest", "retrieval", "operator"):
            new = sum(1 for topic, *_ in tail if GROUP_OF[topic] == group)
            assert live.worker.metric("crp_records_processed_total", group=group) == new, group
    finally:
        pacer.stopping.set()
        live.close()
        feed.close()
