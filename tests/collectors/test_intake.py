"""Intake of pasted and saved outputs with no kind named: recognition, sessions, merging."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpu_triage.collectors.from_text import (
    EMPTY,
    FAILED,
    PARSED,
    UNRECOGNISED,
    TextInput,
    from_text_arguments,
    intake_paste,
    intake_texts,
)
from gpu_triage.collectors.parsers.registry import PARSERS
from gpu_triage.collectors.paste import clean_lines, prompt_command, split_blocks
from gpu_triage.collectors.recognise import DETECTORS, kind_for_command

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = DATA / "real-outputs"
HAND = DATA / "hand-written"

# answer-key kinds (expected.yaml) -> the parser that reads them
PARSER_FOR_KIND = {
    "kernel_log": "kernel-log",
    "kernel_log_oom": "kernel-log",
    "ibstat": "ibstat",
    "iostat": "iostat",
    "kubectl_describe_node": "kubectl-describe-node",
    "kubectl_events": "kubectl-events",
    "lspci_vv": "lspci",
    "mpstat": "mpstat",
    "nvidia_smi_table": "nvidia-smi",
    "nvidia_smi_q": "nvidia-smi-q",
    "nvidia_smi_nvlink_s": "nvidia-smi-nvlink",
    "nvidia_smi_topo_m": "nvidia-smi-topo",
    "proc_meminfo": "meminfo",
    "proc_pressure": "proc-pressure",
    "dcgmi_diag": "dcgmi-diag",
}
ANSWERS = yaml.safe_load((REAL / "expected.yaml").read_text())["samples"]


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def _parsers(intake) -> list[str | None]:
    return [p.parser for p in intake.pieces]


def test_every_detector_names_a_registered_parser() -> None:
    assert {d.parser for d in DETECTORS} <= set(PARSERS)


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_real_output_is_recognised_without_a_kind(name: str) -> None:
    want = PARSER_FOR_KIND[ANSWERS[name]["kind"]]
    intake = intake_paste(_read(REAL / name), name)
    if want not in PARSERS:  # a format no parser reads yet must be reported, not dropped
        assert [p.state for p in intake.pieces] == [UNRECOGNISED], intake.pieces
        return
    assert _parsers(intake) == [want], [p.describe() for p in intake.pieces]
    assert intake.pieces[0].state == PARSED, intake.pieces[0].describe()


SESSION_PARTS = [
    (
        "root@gpu-node-7:~# nvidia-smi",
        "nvidia-smi/table-v100s-450-truncated-name-fragment-dp243.txt",
    ),
    (
        "[user@gpu-node-7 ~]$ dmesg -T | grep -i xid",
        "xid/xid-13-b200-mmu-fault-dmesg-T-trtllm15610.log",
    ),
    ("$ sudo ibstat", "ib/ibstat-mlx4-2port-ibwarn-debug-interleaved-rdmacore847.txt"),
    (
        "(base) me@box:~$ cat /proc/pressure/memory",
        "proc/pressure-memory-high-some-full-procfs40.txt",
    ),
    (
        "PS C:\\Users\\me> nvidia-smi -q -d PERFORMANCE",
        "nvidia-smi-q/v100-sxm2-32gb-hw-power-brake-active-dell-c4130-l4rz.txt",
    ),
    ("root@gpu-node-7:/# mpstat -P ALL", "mpstat/mpstat-P-ALL-4cpu-idle-el9uek-pcp1922.txt"),
    (
        "root@gpu-node-7:~# nvidia-smi topo -m",
        "topo/topo-m-8gpu-mlx4-2017-no-numa-column-fragment-k8s53497.txt",
    ),
    (
        "bash-5.1# kubectl describe node gpu-node-7",
        "k8s/describe-node-no-nvidia-gpu-in-capacity-dp285.txt",
    ),
    (
        "$ lspci -vv | grep -E 'LnkCap|LnkSta'",
        "lspci/rtx4090-riser-lnksta-2.5gt-downgraded-width-ok-janhq183.txt",
    ),
    ("node01:~ # cat /proc/meminfo", "proc/meminfo-openwrt-no-memavailable-sysinfo164.txt"),
]


def _session(parts=SESSION_PARTS, eol: str = "\n", trailing: str = "root@gpu-node-7:~# ") -> str:
    out: list[str] = []
    for prompt, name in parts:
        out.append(prompt)
        out.extend(_read(REAL / name).rstrip("\n").split("\n"))
    out.append(trailing)
    return eol.join(out) + eol


def _expected_session_parsers() -> list[str]:
    return [PARSER_FOR_KIND[ANSWERS[name]["kind"]] for _, name in SESSION_PARTS]


def _check_session(intake) -> None:
    assert _parsers(intake) == _expected_session_parsers(), [p.describe() for p in intake.pieces]
    assert all(p.state == PARSED for p in intake.pieces), [p.describe() for p in intake.pieces]
    f = intake.facts
    assert any(g.pci_bus_id == "0000:00:07.0" for g in f.gpus)  # the table
    assert any(g.throttle_hw_power_brake_slowdown for g in f.gpus)  # the -q fragment
    assert len(f.xids) == 8 and {x.code for x in f.xids} == {13}
    assert {(p.ca_name, p.port) for p in f.ib_ports} == {("mlx4_0", 1), ("mlx4_0", 2)}
    assert f.host.psi_memory_full_avg10 == 57.59
    assert f.host.cpu_idle_pct == 99.67 and f.host.mem_total_mib is not None
    assert f.scheduler.k8s_node_gpu_capacity == 0
    assert any(t.connection == "PIX" for t in f.topology)
    assert any(link.speed_gts == 2.5 for link in f.pcie_links)


def test_pasted_session_is_split_at_prompts_and_each_block_parsed() -> None:
    intake = intake_paste(_session(), "session.txt")
    _check_session(intake)
    # line numbers are the paste's: the Xid block starts right after its prompt
    dmesg = next(p for p in intake.pieces if p.parser == "kernel-log")
    text = _session().split("\n")
    assert (
        text[dmesg.first - 2].endswith("grep -i xid") and dmesg.command == "dmesg -T | grep -i xid"
    )
    assert intake.facts.xids[0].line == dmesg.first


def test_session_with_crlf_and_colours_and_trailing_prompt() -> None:
    colour = _session(eol="\r\n").replace("root@gpu-node-7", "\x1b[01;32mroot@gpu-node-7\x1b[00m")
    colour = colour.replace("NVRM: Xid", "\x1b[01;31m\x1b[KNVRM: Xid\x1b[m\x1b[K")
    _check_session(intake_paste(colour, "colour.txt"))


def test_outputs_concatenated_without_prompts_are_cut_by_content() -> None:
    text = "\n".join(_read(REAL / name).rstrip("\n") + "\n" for _, name in SESSION_PARTS)
    intake = intake_paste(text, "cat-all.txt")
    assert _parsers(intake) == _expected_session_parsers(), [p.describe() for p in intake.pieces]
    # two PSI lines with no command or label do not say whose they are: that is said
    psi = next(p for p in intake.pieces if p.parser == "proc-pressure")
    assert psi.state == FAILED and "cpu, io or memory" in psi.message
    ok = [p for p in intake.pieces if p is not psi]
    assert all(p.state == PARSED for p in ok), [p.describe() for p in ok]
    assert intake.facts.xids and intake.facts.ib_ports and intake.facts.scheduler


def test_grep_n_prefixes_are_read_through() -> None:
    log = _read(REAL / "xid/xid-38-109-polish-locale-ogkm1045.log").splitlines()
    numbered = "\n".join(f"{100 + i}:{line}" for i, line in enumerate(log))
    intake = intake_paste(f"$ journalctl -k | grep -n Xid\n{numbered}\n", "grep.txt")
    assert _parsers(intake) == ["kernel-log"]
    assert [x.code for x in intake.facts.xids] == [38, 109, 109, 109, 109, 109]


def test_truncated_table_and_stray_text_are_reported_with_line_ranges() -> None:
    table = _read(REAL / "nvidia-smi/table-8x-h100-sxm-565-new-format-thamada-nvsim.txt")
    cut = "\n".join(table.splitlines()[:14])  # stops inside the GPU 1 block
    text = f"here is what I see on the node:\n\n{cut}\n\nany idea what is wrong?\n"
    intake = intake_paste(text, "issue.txt")
    states = [(p.parser, p.state, p.first, p.last) for p in intake.pieces]
    assert states == [
        (None, UNRECOGNISED, 1, 1),
        ("nvidia-smi", PARSED, 3, 16),
        (None, UNRECOGNISED, 18, 18),
    ], states
    assert len(intake.facts.gpus) == 2
    assert "issue.txt:1" in intake.pieces[0].describe()


def test_nothing_recognised_is_said_and_is_not_a_healthy_read(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("the job hangs forever after 10 minutes\nNCCL_P2P_DISABLE=1 fixes it\n")
    out = tmp_path / "s.json"
    r = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "collect", "--from-text", str(f), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 3, r.stderr
    assert f"{f}:1-2" in r.stderr and "not recognised" in r.stderr


def test_processes_block_alone_parses_as_processes() -> None:
    table = _read(HAND / "nvidia-smi/table-418-processes-no-gi-err-gpu.txt").splitlines()
    start = next(i for i, s in enumerate(table) if "Processes" in s) - 1
    intake = intake_paste("\n".join(table[start:]) + "\n", "procs.txt")
    assert _parsers(intake) == ["nvidia-smi"] and intake.pieces[0].state == PARSED
    assert intake.facts.processes and all(p.pid for p in intake.facts.processes)
    empty = (
        "+-----------------------------------------------------------------------------+\n"
        "| Processes:                                                                  |\n"
        "|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |\n"
        "|=============================================================================|\n"
        "|  No running processes found                                                 |\n"
        "+-----------------------------------------------------------------------------+\n"
    )
    piece = intake_paste(empty, "none.txt").pieces[0]
    assert piece.state == PARSED and "process" in piece.kinds  # zero processes is a reading


def test_ibv_devinfo_fed_to_ibstat_is_a_clear_error() -> None:
    text = _read(HAND / "ib/ibv_devinfo-v-ndr-active-and-polling.txt")
    forced = intake_texts([TextInput(text, "ib.txt", "ibstat")])
    assert forced.pieces[0].state == FAILED
    assert "ibv_devinfo" in forced.pieces[0].message and "ib.txt" in forced.pieces[0].message
    recognised = intake_paste(text, "ib.txt")
    assert _parsers(recognised) == ["ibv-devinfo"]
    assert {(p.ca_name, p.state) for p in recognised.facts.ib_ports} == {
        ("mlx5_0", "active"),
        ("mlx5_1", "down"),
    }


def test_a_forced_kind_that_reads_nothing_says_so() -> None:
    intake = intake_texts([TextInput("GPU 0: NVIDIA H100\n", "x.txt", "iperf3")])
    assert intake.pieces[0].state in (EMPTY, FAILED) and intake.pieces[0].message
    assert not intake.anything_read


def _kernel(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def test_two_kernel_logs_merge_interleaved_by_time_never_last_wins() -> None:
    a = _kernel(
        [
            "[Sun Apr 26 23:12:26 2026] NVRM: Xid (PCI:0000:18:00): 13, Graphics Exception: A",
            "[Sun Apr 26 23:14:00 2026] NVRM: Xid (PCI:0000:18:00): 31, pid=1, MMU Fault",
        ]
    )
    b = _kernel(
        [
            "[Sun Apr 26 23:13:00 2026] NVRM: Xid (PCI:0000:2a:00): 79, GPU has fallen off",
            "[Sun Apr 26 23:12:26 2026] NVRM: Xid (PCI:0000:18:00): 13, Graphics Exception: A",
        ]
    )
    intake = intake_texts([TextInput(a, "node-dmesg.txt"), TextInput(b, "journal.txt")])
    assert [x.code for x in intake.facts.xids] == [13, 79, 31]  # the repeated line counted once
    assert {p.source for p in intake.pieces} == {"node-dmesg.txt", "journal.txt"}


def test_gpus_of_several_files_merge_by_bus_id_and_index() -> None:
    table = TextInput(
        _read(REAL / "nvidia-smi/table-8x-h100-sxm-565-new-format-thamada-nvsim.txt"), "t"
    )
    full = TextInput(
        _read(next((REAL / "nvidia-smi-q").glob("h100-sxm-565-full-q-*"))),
        "q",
    )
    f = intake_texts([table, full]).facts
    assert len(f.gpus) == 8
    gpu0 = next(g for g in f.gpus if g.pci_bus_id == "0000:18:00.0")
    assert gpu0.index == 0 and gpu0.uuid  # table gave the index, -q the UUID


def test_prompt_forms() -> None:
    cases = {
        "root@node:~# dmesg | grep -i xid": "dmesg | grep -i xid",
        "[user@host ~]$ nvidia-smi": "nvidia-smi",
        "user@host ~ % nvidia-smi -L": "nvidia-smi -L",
        "$ nvidia-smi": "nvidia-smi",
        "PS C:\\> nvidia-smi.exe": "nvidia-smi.exe",
        "PS /root> nvidia-smi": "nvidia-smi",
        "# nvidia-smi topo -m": "nvidia-smi topo -m",
        "bash-4.2$ ibstat": "ibstat",
        "(venv) me@box:/work$ python train.py": "python train.py",
    }
    for line, cmd in cases.items():
        assert prompt_command(line) == (True, cmd), line
    for line in [
        "# this is a comment about the GPU",
        "> quoted reply text",
        "Apr 19 13:16:41 Kyrios kernel: NVRM: Xid (PCI:0000:02:00): 120",
        "NVRM: GPU at PCI:0000:07:00: GPU-fb51809b",
        "john@example.com: thanks for the help",
        "10:38:38 AM  all    0.19",
    ]:
        assert prompt_command(line)[0] is False, line
    assert prompt_command("root@node:~# ") == (True, None)  # an empty trailing prompt


def test_commands_name_their_parser() -> None:
    assert kind_for_command("sudo nvidia-smi -q -d TEMPERATURE") == "nvidia-smi-q"
    assert kind_for_command("nvidia-smi") == "nvidia-smi"
    assert kind_for_command("nvidia-smi topo -p2p r") == "nvidia-smi-topo-p2p"
    assert kind_for_command("dmesg -T | grep -i xid") == "kernel-log"
    assert kind_for_command("grep -H . /proc/pressure/*") == "proc-pressure"
    assert kind_for_command("ls -la") is None


def test_command_decides_when_content_is_ambiguous() -> None:
    """p2p output does not say which capability: the command does."""
    p2p = _read(HAND / "topo/topo-p2p-4gpu-two-pcie-switches-cns.txt")
    f = intake_paste(f"$ nvidia-smi topo -p2p w\n{p2p}", "p2p.txt").facts
    pair = next(t for t in f.topology if (t.a, t.b) == ("GPU0", "GPU2"))
    assert pair.p2p_write == "CNS" and pair.p2p_status is None


def test_clean_lines_keeps_numbering() -> None:
    text = "a\r\nb\x0cstill b\r\n\x1b[31mc\x1b[0m\rC\n"
    assert clean_lines(text) == ["a", "b still b", "C"]
    blocks = split_blocks(["intro", "$ nvidia-smi", "x", "$ ", "y"])
    assert [(b.first, b.end, b.command) for b in blocks] == [
        (0, 1, None),
        (2, 3, "nvidia-smi"),
        (4, 5, None),
    ]


def test_old_two_value_form_still_reads_and_says_the_new_one() -> None:
    specs, notes = from_text_arguments([["kernel-log", "a.log"], ["b.txt"], ["ibstat:c.txt"]])
    assert specs == ["kernel-log:a.log", "b.txt", "ibstat:c.txt"]
    assert notes and "kernel-log:a.log" in notes[0]


def test_cli_reads_stdin_and_forced_kinds(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    log = REAL / "xid/xid-79-rtx5090-gsp-ogkm1151.log"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_triage",
            "collect",
            "--from-text",
            "-",
            f"nvidia-smi-nvlink:{REAL / 'nvlink/nvlink-s-b200-all-inactive-gpud1085.txt'}",
            "--from-text",
            "kernel-log",
            str(log),
            "--out",
            str(out),
        ],
        input=_session(),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "old form" in r.stderr
    from gpu_triage.model.snapshot import load_snapshot

    snap = load_snapshot(out)
    names = [c.name for c in snap.collectors]
    assert "text:kernel-log:xid-79-rtx5090-gsp-ogkm1151.log" in names
    assert any(n.startswith("text:ibstat:<stdin>:") for n in names)
    assert any(x.code == 79 for x in snap.facts.xids) and any(x.code == 13 for x in snap.facts.xids)
    bad = subprocess.run(
        [sys.executable, "-m", "gpu_triage", "collect", "--from-text", f"bogus-kind:{log}"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 64 and "unknown kind 'bogus-kind'" in bad.stderr
