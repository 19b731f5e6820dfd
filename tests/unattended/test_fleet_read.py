"""The fleet reader: bad lines reported with file:line and skipped, bounded memory and
errors, byte ranges and processes that give the same answer, the exporter's fields."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_triage.ops import fleet_read
from gpu_triage.ops.fleet_read import expand, read_fleet
from tests.unattended.fleet_records import finding, gpu, line, record, write


def test_bad_lines_are_reported_with_file_and_line_and_skipped(tmp_path: Path) -> None:
    good = [line(record("n1", h)) for h in range(4)]
    torn = line(record("n1", 9))[:150]  # the writer died mid-line: no newline at the end
    text = (
        good[0]
        + "{not json\n"
        + good[1]
        + line(record("n1", 5)).replace('"temp":60.0', '"temp":NaN')
        + "\n"  # blank lines are no runs and no errors
        + '["a list"]\n'
        + '{"ts": "2026-11-01T00:00:00+00:00"}\n'  # no host
        + line(record("n1", 6, findings="oops"))  # type: ignore[arg-type]
        + line(record("n1", 7, ts="yesterday"))
        + good[2][:80]
        + good[3]  # a torn line with the next run appended to it
        + torn
    )
    path = tmp_path / "n1.jsonl"
    path.write_text(text)
    read = read_fleet([path], workers=1)
    assert read.runs == 2 and read.nodes["n1"].runs == 2
    assert read.errors == [
        f"{path}:2: not JSON",
        f"{path}:4: NaN: not a finite number",
        f"{path}:6: not a run record: not a JSON object",
        f"{path}:7: not a run record: no host",
        f"{path}:8: not a run record: findings is not a list",
        f"{path}:9: not a run record: ts 'yesterday' is not an ISO 8601 time",
        f"{path}:10: not JSON",
        f"{path}:11: torn line (no newline at the end of the file)",
    ]
    assert read.error_count == len(read.errors)


def test_wrong_types_never_crash(tmp_path: Path) -> None:
    recs = [
        record("n", 0, gpus=[{"bus": 5, "temp": "hot", "util": True}, "gpu"]),  # type: ignore[list-item]
        record("n", 1, gpus=[{"bus": None, "temp": 1e999, "util": -3}]),
        record("n", 2, findings=[{"rule": 3}]),
        record("n", 3, findings=[{"rule": "r", "sev": "apocalyptic", "gpu": 7, "xid": "79"}]),
        record("n", 4, xids=["79", None, True, 13]),
        record("n", 5, driver=7),  # type: ignore[arg-type]
    ]
    path = write(tmp_path / "n.jsonl", recs)
    read = read_fleet([path], workers=1)
    assert [e.split(": ", 1)[1] for e in read.errors] == [
        "not a run record: a GPU that is not an object",
        "not a run record: a finding without a rule id",
        "not a run record: driver is not a string",
    ]
    st = read.nodes["n"]
    assert st.runs == 3
    # the overflowed temperature and the impossible utilisation are no samples
    assert st.window["#0"].temp_n == 0 and st.window["#0"].util_n == 0
    assert st.rule_sev == {"r": "info"} and not st.gpu_bad  # unknown severity reads as info
    assert set(st.xids) == {(13, "570.86.15")}


def test_overlong_line_is_skipped_without_being_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet_read, "MAX_LINE_BYTES", 4096)
    huge = record("n", 1, gpus=[gpu(i) for i in range(64)])
    path = write(tmp_path / "n.jsonl", [record("n", 0), huge, record("n", 2)])
    read = read_fleet([path], workers=1)
    assert read.runs == 2 and read.errors == [f"{path}:2: line longer than 4,096 bytes: skipped"]


def test_errors_are_bounded_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_text("garbage\n" * 5000 + line(record("n", 0)))
    read = read_fleet([path], workers=1)
    assert read.error_count == 5000 and len(read.errors) == fleet_read.MAX_ERRORS_KEPT
    assert read.errors[0] == f"{path}:1: not JSON" and read.runs == 1


def test_byte_ranges_and_processes_give_the_same_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One big file (a fleet's history concatenated), split in ranges that cut lines."""
    recs = []
    for h in range(60):
        for n in range(5):
            fs = [finding("xid-79", "critical", xid=79)] if (n + h) % 7 == 0 else []
            gpus = [gpu(i, util=float((h * 7 + i * 13 + n) % 101), host=f"n{n}") for i in range(2)]
            recs.append(record(f"n{n}", h, findings=fs, gpus=gpus))
    path = write(tmp_path / "all.jsonl", recs)
    with path.open("a") as fh:
        fh.write("broken line\n")
    whole = read_fleet([path], workers=1)
    monkeypatch.setattr(fleet_read, "SPLIT_BYTES", 997)  # ranges start mid-line
    split = read_fleet([path], workers=3)
    assert split.runs == whole.runs == 300
    assert split.errors == whole.errors == [f"{path}:301: not JSON"]
    for host, st in whole.nodes.items():
        other = split.nodes[host]
        assert (other.runs, other.first_ts, other.last_ts) == (st.runs, st.first_ts, st.last_ts)
        assert other.rule_runs == st.rule_runs and other.gpu_bad == st.gpu_bad
        assert other.xids == st.xids and other.gpus == st.gpus
        for bus, w in st.window.items():
            o = other.window[bus]
            assert (o.util_n, o.util_at_target, o.temp_n) == (w.util_n, w.util_at_target, w.temp_n)
            assert o.util_sum == pytest.approx(w.util_sum) and o.util_sq == pytest.approx(w.util_sq)


def test_latest_run_by_time_not_by_file_order(tmp_path: Path) -> None:
    # the newer history sorts first by name; a node's other offset converts to UTC
    write(tmp_path / "a-new.jsonl", [record("n", 10, driver="575.51.03")])
    write(
        tmp_path / "b-old.jsonl",
        [record("n", 0), record("n", 1, ts="2026-11-01T09:30:00+05:00")],
    )
    st = read_fleet([tmp_path], workers=2).nodes["n"]
    assert st.driver == "575.51.03" and st.drivers == {"570.86.15", "575.51.03"}
    assert st.first_ts == "2026-11-01T00:00:00+00:00" and st.runs == 3


def test_rule_counted_once_per_run(tmp_path: Path) -> None:
    fs = [finding("ecc", "warning", f"0000:{b}:00.0") for b in ("18", "28")]
    st = read_fleet([write(tmp_path / "n.jsonl", [record("n", 0, findings=fs)])]).nodes["n"]
    assert st.rule_runs["ecc"] == 1 and sum(st.gpu_bad.values()) == 2


def test_fifo_and_planted_links_are_not_read(tmp_path: Path) -> None:
    d = tmp_path / "h"
    d.mkdir()
    write(d / "n.jsonl", [record("n", 0)])
    outside = write(tmp_path / "secret.jsonl", [record("elsewhere", 0)])
    (d / "link.jsonl").symlink_to(outside)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    assert expand([d]) == [d / "n.jsonl"]
    read = read_fleet([d, fifo], workers=1)  # a FIFO named on the command line would block
    assert set(read.nodes) == {"n"}
    assert read.errors == [f"{fifo}: cannot read: not a regular file"]


def test_exporter_writes_utilisation_per_gpu() -> None:
    from gpu_triage.engine.compiler import load_rulebook
    from gpu_triage.engine.evaluate import evaluate
    from gpu_triage.model.snapshot import load_snapshot
    from gpu_triage.ops.exporters import run_record
    from tests.conftest import SNAPSHOTS

    snap = load_snapshot(SNAPSHOTS / "healthy-busy.json")
    rec = run_record(evaluate(snap, load_rulebook(), engine="reference"), snap.facts)
    utils = [g.utilization_gpu_pct for g in snap.facts.gpus]
    assert utils and all(u is not None for u in utils)
    assert [g["util"] for g in rec["gpus"]] == utils


def test_two_records_on_one_line_are_not_one_run(tmp_path: Path) -> None:
    one, two = line(record("n", 0)).strip(), line(record("n", 1)).strip()
    path = tmp_path / "n.jsonl"
    path.write_text(f"{one}{two}\n{one}  \r\n  {two}\n")  # blanks around a record are fine
    read = read_fleet([path], workers=1)
    assert read.errors == [f"{path}:1: not JSON"] and read.runs == 2


def test_bad_documents_are_named_once(tmp_path: Path) -> None:
    nan = tmp_path / "nan.json"
    nan.write_text('{"findings": [],\n "engine": NaN}')
    other = tmp_path / "other.json"
    other.write_text('["not a document"]')
    read = read_fleet([nan, other], workers=1)
    assert read.errors == [
        f"{nan}:2:12: NaN: not a finite number",
        f"{other}: neither a snapshot, a findings document nor a run record",
    ]
