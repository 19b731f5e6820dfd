"""/proc/self/mountstats: the parser on real layouts (NFSv4.1 over TCP with the errors
column, NFSv3 over RDMA without it), the host collector's window figures, its bounded and
root-safe read, and the rules on network-filesystem latency, metadata storms and
retransmissions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.from_text import TextInput, intake_texts
from gpu_triage.collectors.host import HostCollector, read_capped
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.mountstats import mount_facts, parse_mountstats
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import Status
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts, GpuFacts

try:
    from tests.collectors.fakeroot import FakeRoot, build_fake_root
except ImportError:  # tests/ is not a package: pytest put this folder on sys.path
    from fakeroot import FakeRoot, build_fake_root  # type: ignore[no-redef]

SAMPLE = (
    Path(__file__).resolve().parents[1]
    / "data/hand-written/proc/mountstats-nfs4-slow-reads-getattr-storm-k5.15.txt"
)
TEXT = SAMPLE.read_text()


def test_only_nfs_mounts_are_kept_with_their_operations() -> None:
    mounts = parse_mountstats(TEXT)
    assert [(m.device, m.mountpoint, m.fstype) for m in mounts] == [
        ("storage01.example:/export/datasets", "/mnt/datasets", "nfs4"),
        ("storage02.example:/export/home", "/home", "nfs"),
    ]
    data, home = mounts
    assert data.age_s == 86400
    read = data.ops["READ"]
    assert (read.ops, read.transmissions, read.rtt_ms, read.execute_ms) == (
        2517210,
        2517218,
        57897830,
        59533017,
    )
    # the NFSv3/RDMA block prints eight numbers per operation (no errors column)
    assert home.ops["READ"].ops == 2048 and "WRITE" in home.ops


def test_facts_since_the_mount() -> None:
    data, home = (mount_facts(m) for m in parse_mountstats(TEXT))
    assert data.server == "storage01.example" and data.interval_s is None
    assert (data.read_ops, data.read_rtt_ms, data.read_exe_ms) == (2517210, 23.001, 23.65)
    assert data.read_kib_per_op == pytest.approx(64.13, abs=0.01)
    assert (data.read_retransmissions, data.read_major_timeouts) == (8, 0)
    assert data.read_ops_s == pytest.approx(2517210 / 86400, abs=0.01)
    # GETATTR + LOOKUP + ACCESS + OPEN + CLOSE + READDIR
    assert data.metadata_ops == 1250133 + 3215 + 2110 + 1290 + 1288 + 27
    assert data.metadata_exe_ms == pytest.approx(19.2, abs=0.01)
    assert home.read_exe_ms == pytest.approx(0.391, abs=0.001)


def test_a_mount_with_no_reads_has_no_averages() -> None:
    text = (
        "device s:/e mounted on /m with fstype nfs4 statvers=1.1\n"
        "\tage:\t10\n\tper-op statistics\n\t        READ: 0 0 0 0 0 0 0 0 0\n"
    )
    (f,) = (mount_facts(m) for m in parse_mountstats(text))
    assert f.read_ops == 0 and f.read_exe_ms is None
    assert f.unavailable["read_exe_ms"].detail == "no READ operations counted"


@pytest.mark.parametrize(
    "text",
    [
        "device proc mounted on /proc with fstype proc\n"
        "device /dev/sda1 mounted on / with fstype ext4\n",
        "device s:/e mounted on /m with fstype nfs4\n\tper-op statistics\n",  # no ops yet
    ],
)
def test_non_nfs_or_empty_blocks_give_no_readings(text: str) -> None:
    facts = [mount_facts(m) for m in parse_mountstats(text)]
    assert all(f.read_ops is None for f in facts)


def test_not_mountstats_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="mounted on"):
        parse_mountstats("READ: 1 2 3 4 5 6 7 8\n")


def test_wrapped_or_junk_op_lines_are_skipped_not_misread() -> None:
    text = TEXT.replace(
        "        READ: 2517210 2517218 0 402753600 165305219200 1132744 57897830 59533017 0",
        "        READ: 2517210 2517218 0 402753600\n165305219200 1132744 57897830 59533017 0",
    )
    data = parse_mountstats(text)[0]
    assert "READ" not in data.ops and "GETATTR" in data.ops


def test_pasted_mountstats_is_recognised() -> None:
    intake = intake_texts([TextInput("$ cat /proc/self/mountstats\n" + TEXT, "paste")])
    assert [p.parser for p in intake.pieces] == ["mountstats"]
    assert [m.mountpoint for m in intake.facts.mounts] == ["/mnt/datasets", "/home"]


# --------------------------------------------------------------------------- host collector


def _two_readings(fake: FakeRoot, reads_in_window: int, exe_ms_in_window: int) -> None:
    first = TEXT
    read_line = "        READ: 2517210 2517218 0 402753600 165305219200 1132744 57897830 59533017 0"
    ops = 2517210 + reads_in_window
    second_line = (
        f"        READ: {ops} {ops + 8} 0 402753600 {165305219200 + reads_in_window * 65536} "
        f"1132744 {57897830 + exe_ms_in_window} {59533017 + exe_ms_in_window} 0"
    )
    fake.write("proc/self/mountstats", first)
    fake.second["proc/self/mountstats"] = first.replace(read_line, second_line)


def test_host_collector_reports_the_window(tmp_path: Path) -> None:
    fake = build_fake_root(tmp_path)
    _two_readings(fake, reads_in_window=500, exe_ms_in_window=500 * 40)
    facts = Facts()
    HostCollector(sleep=fake.sleep).collect(CollectContext(root=fake.root, window_s=1.0), facts)
    data = next(m for m in facts.mounts if m.mountpoint == "/mnt/datasets")
    assert data.interval_s is not None and data.interval_s >= 1.0
    assert (data.read_ops, data.read_exe_ms, data.read_kib_per_op) == (500, 40.0, 64.0)
    assert data.read_retransmissions == 0  # the 8 retransmissions were before the window
    home = next(m for m in facts.mounts if m.mountpoint == "/home")
    assert home.read_ops == 0 and home.read_exe_ms is None  # idle in the window


def test_host_collector_without_mountstats_has_no_mounts(tmp_path: Path) -> None:
    fake = build_fake_root(tmp_path)
    facts = Facts()
    HostCollector(sleep=fake.sleep).collect(CollectContext(root=fake.root, window_s=1.0), facts)
    assert facts.mounts == [] and facts.host is not None


def test_read_capped_refuses_a_planted_fifo_and_device(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    text, why = read_capped(fifo, 1024)  # must not block waiting for a writer
    assert text is None and why is not None and "not a regular file" in why.detail
    link = tmp_path / "mountstats"
    link.symlink_to(fifo)
    text, why = read_capped(link, 1024)
    assert text is None and why is not None


def test_read_capped_cuts_a_huge_file_at_a_line(tmp_path: Path) -> None:
    big = tmp_path / "mountstats"
    big.write_text("device s:/e mounted on /m with fstype nfs4\n" + "\tx: 1\n" * 100_000)
    text, why = read_capped(big, 4096)
    assert why is None and text is not None
    assert len(text) <= 4096 and text.endswith("1")  # the partial last line is dropped


def test_read_capped_missing_file_says_why(tmp_path: Path) -> None:
    text, why = read_capped(tmp_path / "nope", 1024)
    assert text is None and why is not None and why.reason.value == "not_supported"


# --------------------------------------------------------------------------- rules


def _with_gpus(facts: Facts, *utils: float) -> Facts:
    facts.gpus = [GpuFacts(index=i, utilization_gpu_pct=u) for i, u in enumerate(utils)]
    return facts


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_slow_nfs_dataset_with_starved_gpus(builtin_book: Rulebook, engine: str) -> None:
    facts = _with_gpus(intake_texts([TextInput(TEXT, "mountstats")]).facts, 21.0, 30.0)
    doc = evaluate(EvalInput(facts), builtin_book, engine=engine)
    got = {(f.rule_id, f.subject_key) for f in doc.findings if f.status is Status.FIRED}
    nfs = {(r, k) for r, k in got if r.startswith("nfs-")}
    assert {r for r, _ in nfs} == {"nfs-read-latency-high", "nfs-metadata-storm"}
    assert all("/mnt/datasets" in k for _, k in nfs)  # never the fast /home over RDMA
    # 8 retransmissions in 2.5 million reads is a clean path
    assert "nfs-retransmissions" not in {r for r, _ in got}


def test_lossy_nfs_path_is_jitter(builtin_book: Rulebook) -> None:
    text = TEXT.replace(
        "READ: 2517210 2517218 0", "READ: 2517210 2521802 37"
    )  # 4592 retransmissions, 37 major timeouts
    facts = _with_gpus(intake_texts([TextInput(text, "mountstats")]).facts, 95.0)
    doc = evaluate(EvalInput(facts), builtin_book)
    fired = {f.rule_id for f in doc.findings if f.status is Status.FIRED}
    assert "nfs-retransmissions" in fired
    # busy GPUs: the latency rules do not claim starvation
    assert not fired & {"nfs-read-latency-high", "nfs-metadata-storm"}
