"""Driver-state evidence outside pasted error text: NVRM lines of a kernel log (pasted and
live, streamed files included) and processes the driver lists but cannot describe."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.from_text import intake_paste
from gpu_triage.collectors.kernel_log import KernelLogCollector
from gpu_triage.collectors.nvml import NvmlCollector
from gpu_triage.collectors.parsers.error_text import KernelLineSieve, scan_kernel_log_errors
from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.model.facts import Facts, UnavailableReason
from gpu_triage.model.snapshot import Snapshot

HAND = Path(__file__).resolve().parents[1] / "data" / "hand-written"
RELOADED = HAND / "kernel-log/dmesg-T-api-mismatch-then-reload.txt"
UNKNOWN_TABLE = HAND / "nvidia-smi/table-550-processes-unknown-error-after-xid.txt"

MISMATCH = [
    "NVRM: API mismatch: the client has the version 550.90.07, but",
    "NVRM: this kernel module has the version 550.54.15.  Please",
    "NVRM: make sure that this kernel module and all NVIDIA driver",
    "NVRM: components have the same version.",
]


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


def top(facts: Facts) -> str | None:
    doc = evaluate(Snapshot(facts=facts), book(), engine="reference")
    return doc.findings[0].rule_id if doc.findings else None


def _fake() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "fakes" / "fake_nvml.py"
    spec = importlib.util.spec_from_file_location("gpu_triage_tests_fake_nvml", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- kernel log


@pytest.mark.parametrize(
    "prefix",
    [
        "[ 8812.102233] ",  # dmesg
        "[Tue Mar 12 06:41:09 2024] ",  # dmesg -T
        "2024-03-12T06:41:09.123456+00:00 node7 kernel: ",  # journalctl -k -o short-iso
        "Mar 12 06:41:09 node7 kernel: [ 8812.102233] ",  # /var/log/kern.log
    ],
    ids=["dmesg", "dmesg-T", "journal-iso", "syslog"],
)
def test_api_mismatch_in_a_pasted_kernel_log(prefix: str) -> None:
    lines = [
        f"{prefix}nvidia-uvm: Loaded the UVM driver, major device number 235.",
        *[prefix + m for m in MISMATCH],
        f"{prefix}NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python3, Graphics Exception",
    ]
    facts = get_parser("kernel-log")("\n".join(lines) + "\n", "dmesg.txt")
    assert facts.xids  # the parser's own events are still there
    found = [e for e in facts.errors if e.signature == "nvrm-api-mismatch"]
    assert found and found[0].line == 2
    assert facts.driver is not None
    assert (facts.driver.library_version, facts.driver.kernel_module_version) == (
        "550.90.07",
        "550.54.15",
    )
    assert top(facts) == "driver-library-version-mismatch"


def test_a_kernel_log_recognised_inside_a_session_keeps_the_mismatch() -> None:
    paste = (
        "root@gpu-a17:~# dmesg -T | tail -n 20\n"
        + RELOADED.read_text().split("[Tue Mar 12 07:15:33")[0]
        + "root@gpu-a17:~# uptime\n 07:20:01 up 1 day, 23:18,  1 user,  load average: 0.1\n"
    )
    intake = intake_paste(paste, "session.txt")
    assert [e.signature for e in intake.facts.errors].count("nvrm-api-mismatch") == 1
    event = next(e for e in intake.facts.errors if e.signature == "nvrm-api-mismatch")
    assert event.count == 2 and event.line == 5  # file line, prompt included
    assert top(intake.facts) == "driver-library-version-mismatch"


def test_a_module_loaded_after_the_mismatch_makes_it_history() -> None:
    events, driver = scan_kernel_log_errors(RELOADED.read_text(), "dmesg")
    assert not [e for e in events if e.cause == "driver_library_mismatch"]
    assert driver is not None and driver.kernel_module_version == "535.171.04"
    assert driver.library_version is None


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        ("NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x26:0x56:1474)", "gpu_init_failed"),
        ("NVRM: The NVIDIA probe routine failed for 1 device(s).", "gpu_init_failed"),
        ("nvidia: Unknown symbol drm_gem_prime_fd_to_handle (err -2)", "driver_not_loaded"),
        ("nvidia 0000:3b:00.0: Failed to enable MSI-X", "nouveau_bound"),
        (
            "mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient "
            "power on the PCIe slot (27W).",
            "nic_slot_power",
        ),
    ],
)
def test_other_nvrm_and_nic_lines_are_error_facts(line: str, cause: str) -> None:
    facts = get_parser("kernel-log")(f"[   12.345678] {line}\n", "dmesg.txt")
    assert [e.cause for e in facts.errors] == [cause]


def test_lines_the_parser_reads_itself_are_not_doubled() -> None:
    text = "[ 100.0] NVRM: Xid (PCI:0000:10:00): 79, pid=0, GPU has fallen off the bus.\n"
    facts = get_parser("kernel-log")(text, "dmesg.txt")
    assert facts.xids and not facts.errors


def test_live_kernel_log_file_gives_the_driver_lines(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    body = "".join(f"Mar 12 06:41:0{i} node7 kernel: {m}\n" for i, m in enumerate(MISMATCH))
    filler = "Mar 12 06:40:00 node7 kernel: usb 1-1: new high-speed USB device number 2\n"
    log.write_text(filler * 20000 + body + filler * 10)
    ctx = CollectContext(root=tmp_path, kernel_log_file=log)
    facts = Facts()
    KernelLogCollector().collect(ctx, facts)
    assert [e.signature for e in facts.errors] == ["nvrm-api-mismatch"]
    assert facts.driver is not None and facts.driver.kernel_module_version == "550.54.15"


def test_the_sieve_keeps_lines_split_across_chunks() -> None:
    text = "x" * 100 + "\n" + "\n".join(MISMATCH) + "\nother line\n"
    sieve = KernelLineSieve()
    for i in range(0, len(text), 7):  # chunks that cut every line
        sieve.feed(text[i : i + 7])
    assert sieve.text() == "\n".join(MISMATCH)


def test_the_sieve_is_linear_on_a_line_of_hits() -> None:
    sieve = KernelLineSieve()
    sieve.feed("nvidia " * 200_000 + "\n")
    assert len(sieve.text()) == len("nvidia " * 200_000)


# --------------------------------------------------------------------------- processes


def test_unknown_error_processes_in_the_table() -> None:
    facts = get_parser("nvidia-smi")(UNKNOWN_TABLE.read_text(), "smi.txt")
    named, sized = facts.processes
    assert named.name is None and named.query_error is True
    assert named.unavailable["name"].reason is UnavailableReason.ERROR
    assert named.used_memory_mib == 40466
    assert sized.name == "python3" and sized.used_memory_mib is None and sized.query_error
    (event,) = facts.errors
    assert event.cause == "gpu_processes_unreadable" and event.count == 2
    assert event.gpu_index == 0 and "21337" in (event.message or "")
    assert top(facts) == "gpu-processes-unreadable"


def test_unknown_error_in_the_compute_apps_csv() -> None:
    csv = (
        "pid, process_name, used_gpu_memory [MiB]\n"
        "21337, [Unknown Error], 40466 MiB\n"
        "21340, /usr/bin/python3, [Unknown Error]\n"
    )
    facts = get_parser("nvidia-smi-compute-apps")(csv, "apps.csv")
    assert [p.query_error for p in facts.processes] == [True, True]
    assert facts.errors[0].count == 2
    assert top(facts) == "gpu-processes-unreadable"


def test_na_is_not_an_error() -> None:
    # MIG without privileges, WDDM, another PID namespace: N/A is benign
    csv = "pid, process_name, used_gpu_memory [MiB]\n4242, python3, [N/A]\n"
    facts = get_parser("nvidia-smi-compute-apps")(csv, "apps.csv")
    assert facts.processes[0].query_error is None and not facts.errors
    table = UNKNOWN_TABLE.read_text().replace("[Unknown Error]", "[N/A]          ")
    facts = get_parser("nvidia-smi")(table, "smi.txt")
    assert not facts.errors and not any(p.query_error for p in facts.processes)


def test_unknown_error_in_nvidia_smi_q_processes() -> None:
    text = (
        "GPU 00000000:07:00.0\n    Processes\n        GPU instance ID                   : N/A\n"
        "        Compute instance ID               : N/A\n"
        "        Process ID                        : 21337\n"
        "            Type                          : C\n"
        "            Name                          : [Unknown Error]\n"
        "            Used GPU Memory               : 40466 MiB\n"
    )
    facts = get_parser("nvidia-smi-q")(text, "q.txt")
    assert facts.processes[0].query_error is True
    assert [e.cause for e in facts.errors] == ["gpu_processes_unreadable"]


def test_nvml_process_query_failing_is_the_same_evidence() -> None:
    fk = _fake()
    gpu = fk.h100_sxm()
    gpu.errors["nvmlDeviceGetComputeRunningProcesses_v3"] = fk.pynvml.NVML_ERROR_UNKNOWN
    facts = Facts()
    ctx = CollectContext(root=Path("/nonexistent-root"), window_s=0.05)
    NvmlCollector(fk.FakeNvml([gpu])).collect(ctx, facts)
    assert [e.signature for e in facts.errors] == ["nvml-process-query-failed"]
    assert facts.errors[0].gpu_index == 0
    not_supported = fk.h100_sxm()
    not_supported.errors["nvmlDeviceGetComputeRunningProcesses_v3"] = fk.NOT_SUPPORTED
    facts = Facts()
    NvmlCollector(fk.FakeNvml([not_supported])).collect(ctx, facts)
    assert not facts.errors  # not supported is not an error


# --------------------------------------------------------------------------- MIG pending


def test_mig_pending_from_a_grep_fragment_and_nvml() -> None:
    text = (
        "$ nvidia-smi -q -i 0 | grep -A2 'MIG Mode'\n    MIG Mode\n"
        "        Current                           : Disabled\n"
        "        Pending                           : Enabled\n"
    )
    intake = intake_paste(text, "mig.txt")
    g = intake.facts.gpus[0]
    assert (g.mig_mode, g.mig_mode_pending) == (False, True)
    assert top(intake.facts) == "mig-mode-change-pending"
    fk = _fake()
    gpu = fk.a100_mig()
    gpu.mig_mode = (1, 0)  # enabled now, disabled after the next reset
    facts = Facts()
    ctx = CollectContext(root=Path("/nonexistent-root"), window_s=0.05)
    NvmlCollector(fk.FakeNvml([gpu])).collect(ctx, facts)
    assert (facts.gpus[0].mig_mode, facts.gpus[0].mig_mode_pending) == (True, False)


def test_a_pasted_journal_gives_the_daemons_errors_too() -> None:
    text = (
        "Jan 09 08:01:12 gpu-07 systemd[1]: Starting NVIDIA Persistence Daemon...\n"
        "Jan 09 08:01:12 gpu-07 nvidia-persistenced[1193]: nvidia-persistenced failed to "
        "initialize. Check syslog for more details.\n"
        "Jan 09 08:01:12 gpu-07 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen "
        "off the bus.\n"
    )
    facts = get_parser("kernel-log")(text, "journal.txt")
    assert [e.cause for e in facts.errors] == ["persistenced_failed"]  # Xid 79: the parser's
    assert facts.xids or facts.bus_losses
