"""The embedded log keeps Kafka's semantics: dense offsets per topic, monotonic append time, durable."""

from __future__ import annotations

from pathlib import Path

from crp_stream.runtime.embedded.log import Append, EmbeddedLog


def test_offsets_are_dense_per_topic_and_survive_reopen(tmp_path: Path) -> None:
    clock = iter(range(100, 10_000, 10))
    log = EmbeddedLog(tmp_path / "log.sqlite", lambda: next(clock))
    a = log.append([Append("t1", "k", b"a"), Append("t2", "k", b"b"), Append("t1", None, b"c")])
    assert [(r.topic, r.offset) for r in a] == [("t1", 0), ("t2", 0), ("t1", 1)]
    log.close()
    log2 = EmbeddedLog(tmp_path / "log.sqlite", lambda: 5)
    assert log2.end_offsets() == {"t1": 2, "t2": 1}
    assert [r.value for r in log2.iter_topic("t1")] == [b"a", b"c"]


def test_append_time_never_goes_backwards(tmp_path: Path) -> None:
    times = iter([1000, 500, 2000])
    log = EmbeddedLog(tmp_path / "log.sqlite", lambda: next(times))
    recs = [log.append([Append("t", None, b"x")])[0] for _ in range(3)]
    assert [r.ts_us for r in recs] == [1000, 1000, 2000]


def test_duplicate_record_id_is_ignored(tmp_path: Path) -> None:
    log = EmbeddedLog(tmp_path / "log.sqlite", lambda: 1)
    first = log.append([Append("out", "k", b"v", record_id="id-1")])
    again = log.append([Append("out", "k", b"v", record_id="id-1"), Append("out", "k", b"w", record_id="id-2")])
    assert len(first) == 1
    assert [r.record_id for r in again] == ["id-2"]
    assert log.end_offsets() == {"out": 2}


def test_read_after_filters_topics_in_global_order(tmp_path: Path) -> None:
    log = EmbeddedLog(tmp_path / "log.sqlite", lambda: 1)
    log.append([Append("a", None, b"1"), Append("b", None, b"2"), Append("a", None, b"3")])
    assert [r.value for r in log.read_after(0, ["a"])] == [b"1", b"3"]
    assert [r.value for r in log.read_after(1)] == [b"2", b"3"]


def test_append_outputs_of_one_call_are_the_records_read_back(tmp_path: Path) -> None:
    """One call appends many outputs in one statement: the returned records (seq, offset, time, headers)
    must be the ones stored, an id repeated in the call or already stored is returned as stored."""
    log = EmbeddedLog(tmp_path / "log.sqlite", iter(range(10, 1000, 10)).__next__)
    log.append([Append("a", None, b"0", record_id="old")])
    got = log.append_outputs(
        [
            Append("a", "k", b"1", record_id="x", headers=(("h", b"\xff"),)),
            Append("b", None, b"2"),
            Append("a", "k", b"ignored", record_id="x"),
            Append("a", None, b"3", record_id="old"),
            Append("a", None, b"4", ts_us=5),
        ]
    )
    assert [new for _r, new in got] == [True, True, False, False, True]
    assert got[2][0] == got[0][0] and got[3][0].value == b"0"
    stored = {r.seq: r for r in log.read_after(0)}
    assert [stored[r.seq] for r, new in got if new] == [r for r, new in got if new]
    assert [(r.topic, r.offset) for r, new in got if new] == [("a", 1), ("b", 0), ("a", 2)]
    assert sorted(stored) == list(range(1, 5)) and log.end_offsets() == {"a": 3, "b": 1}
