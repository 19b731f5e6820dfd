"""Every entry of the signature catalogue (real-world-signatures.md; its headings are
copied to tests/data/signature-catalogue-headings.txt) is recognised: the error texts by
the error-text table (tests/errors/test_signatures.py feeds each one alone and inside a
paste), the outputs that are not error text by the parser that reads them, here, alone
and inside a pasted session, with the fact it sets and the finding ranked on top when it
is the only fault. What no paste or single reading can show is listed, with why."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gpu_triage.collectors.from_text import intake_paste
from gpu_triage.collectors.parsers.error_signatures import SIGNATURES
from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import Snapshot

DATA = Path(__file__).resolve().parents[1] / "data"
HEADINGS = DATA / "signature-catalogue-headings.txt"
REAL = DATA / "real-outputs"
HAND = DATA / "hand-written"


def catalogue_ids() -> list[str]:
    out = []
    for line in HEADINGS.read_text().splitlines():
        m = re.match(r"### (\d+\.\d+)\s", line)
        if m:
            out.append(m.group(1))
    return out


def by_error_text() -> set[str]:
    return {ref for s in SIGNATURES for ref in s.ref.split()}


def read(path: Path, first: int = 0, last: int | None = None) -> str:
    lines = path.read_text().splitlines()
    return "\n".join(lines[first:last]) + "\n"


def _node_without_gpu_capacity() -> str:
    node = read(
        DATA / "incidents/008-k8s-gpu-zero-default-runtime-not-nvidia/kubectl-describe-node.txt"
    )
    smi = read(REAL / "nvidia-smi/table-8x-h100-sxm-565-new-format-thamada-nvsim.txt")
    return node + "\n$ nvidia-smi\n" + smi


def _dcgm_with(row: str) -> str:
    text = read(REAL / "dcgm/dcgmi-diag-r3-deployment-all-pass-fragment-dcgm55.txt")
    pattern = re.compile(rf"(\|\s*{re.escape(row)}\s*\|\s*)Pass(\s*)")
    out, n = pattern.subn(lambda m: m.group(1) + "Fail" + m.group(2), text, count=1)
    assert n == 1, row
    return out


IB_PORT = """CA 'mlx5_{n}'
	CA type: MT4129
	Number of ports: 1
	Firmware version: 28.39.1002
	Hardware version: 0
	Node GUID: 0xa088c20300e1f2{n}0
	System image GUID: 0xa088c20300e1f2{n}0
	Port 1:
		State: {state}
		Physical state: {phys}
		Rate: {rate}
		Base lid: 1{n}
		LMC: 0
		SM lid: 1
		Capability mask: 0xa651e848
		Port GUID: 0xa088c20300e1f2{n}0
		Link layer: InfiniBand
"""


def ibstat(*ports: tuple[str, str, int]) -> str:
    return "".join(
        IB_PORT.format(n=i, state=s, phys=p, rate=r) for i, (s, p, r) in enumerate(ports)
    )


def _has(kind: str, **want: object) -> Callable[[Facts], bool]:
    def check(facts: Facts) -> bool:
        return any(all(getattr(x, k) == v for k, v in want.items()) for x in getattr(facts, kind))

    return check


# catalogue id -> (command, output, what it must set, rules that name it on top)
FACT_CASES: dict[str, tuple[str, str, Callable[[Facts], bool], tuple[str, ...]]] = {
    "3.3": (
        "kubectl describe node gpu-node-1",
        _node_without_gpu_capacity(),
        lambda f: f.scheduler is not None and f.scheduler.k8s_node_gpu_capacity == 0,
        ("k8s-no-gpus-advertised",),
    ),
    "3.10": (
        "nvidia-smi -q",
        "==============NVSMI LOG==============\n\nDriver Version : 570.133.20\n"
        "CUDA Version : 12.8\n\nAttached GPUs : 2\nGPU 00000000:07:00.0\n"
        "    MIG Mode\n        Current : Enabled\n        Pending : Enabled\n"
        "GPU 00000000:0F:00.0\n    MIG Mode\n        Current : Disabled\n"
        "        Pending : Disabled\n",
        lambda f: [g.mig_mode for g in f.gpus] == [True, False],
        ("mig-mixed-with-buggy-r570",),
    ),
    "4.12": (
        "dmesg --time-format iso | grep -i -A2 oom",
        read(REAL / "oom/oom-dmesg-time-format-iso-grep-ert7797.log"),
        lambda f: bool(f.ooms),
        ("host-oom-kill",),
    ),
    "7.1": (
        "grep -i xid /var/log/syslog",
        read(REAL / "xid/xid-48-64-dbe-page-retirement-syslog-gpuoperator1146.log"),
        _has("xids", code=64),
        ("xid-48-dbe", "xid-48-dbe-row-remap", "xid-critical"),
    ),
    "7.2": (
        "nvidia-smi -q -d ROW_REMAPPER",
        "GPU 00000000:5D:00.0\n    Remapped Rows\n        Correctable Error : 0\n"
        "        Uncorrectable Error : 0\n        Pending : No\n"
        "        Remapping Failure Occurred : Yes\n",
        _has("gpus", remapped_rows_failure=True),
        ("gpu-row-remap-failure",),
    ),
    "7.3": (
        "dcgmi diag -r 3",
        _dcgm_with("Page Retirement/Row Remap"),
        lambda f: any(d.result == "fail" for d in f.diags),
        ("dcgm-diag-deployment-failed", "dcgm-diag-failed"),
    ),
    "8.1": (
        "nvidia-smi -q -d PERFORMANCE",
        read(REAL / "nvidia-smi-q/v100-sxm2-32gb-hw-power-brake-active-dell-c4130-l4rz.txt"),
        _has("gpus", throttle_hw_power_brake_slowdown=True),
        ("gpu-power-brake",),
    ),
    "8.2": (
        "nvidia-smi -q -d TEMPERATURE,PERFORMANCE",
        read(HAND / "nvidia-smi-q/q-d-temperature-rtx3090-535-target-lowered-62c.txt", 1),
        _has("gpus", temperature_target_c=62.0),
        ("gpu-thermal-limit-set-low",),
    ),
    "9.2": (
        "dmesg -H",
        read(REAL / "aer/aer-uncorrected-fatal-cmplto-nvidia-cant-recover-dmesg-H-returnn1500.log"),
        lambda f: bool(f.aers),
        ("pcie-aer-uncorrected-gpu", "xid-79-fallen-off-bus", "gpu-fell-off-bus-message"),
    ),
    "10.1": (
        "ibstat",
        ibstat(("Active", "LinkUp", 400), ("Down", "Polling", 10)),
        _has("ib_ports", state="down"),
        ("ib-port-disabled-or-polling", "ib-port-not-active"),
    ),
    "10.2": (
        "ibstat",
        ibstat(*[("Active", "LinkUp", 400)] * 3, ("Active", "LinkUp", 200)),
        _has("ib_ports", rate_gbps=200.0),
        ("ib-port-rate-downgraded",),
    ),
    "11.1": (
        "dcgmi diag -r 3",
        read(HAND / "dcgm/dcgmi-diag-r3-dcgm33-memory-fail-gpu1-wrapped-warning.txt"),
        lambda f: any(d.result == "fail" for d in f.diags),
        ("dcgm-diag-failed",),
    ),
    "13.1": (
        "nvidia-smi -q -i 0 | grep -A2 'MIG Mode'",
        "    MIG Mode\n        Current                           : Disabled\n"
        "        Pending                           : Enabled\n",
        _has("gpus", mig_mode=False, mig_mode_pending=True),
        ("mig-mode-change-pending",),
    ),
}

# Read as facts, but the finding is another rulebook's to give (named here so that the
# day it lands this list shrinks): kept honest, not counted as covered by a rule.
FACT_ONLY: dict[str, tuple[str, str, Callable[[Facts], bool]]] = {
    "9.1": (
        "dmesg | grep -i 'PCIe bandwidth'",
        "[    3.123456] pci 0000:3b:00.0: 63.008 Gb/s available PCIe bandwidth, limited by "
        "8.0 GT/s PCIe x8 link at 0000:3a:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe "
        "x16 link)\n",
        lambda f: bool(f.pcie_limits),
    ),
    "9.3": (
        "dmesg",
        "[ 812.100001] pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0\n"
        "[ 812.100004] nvidia 0000:01:00.0: PCIe Bus Error: severity=Corrected, "
        "type=Physical Layer, (Receiver ID)\n"
        "[ 812.100007] nvidia 0000:01:00.0:   device [10de:2330] error "
        "status/mask=00000001/0000e000\n"
        "[ 812.100009] nvidia 0000:01:00.0:    [ 0] RxErr\n",
        lambda f: bool(f.aers),
    ),
}

# What one paste cannot show.
NOT_IN_ONE_PASTE = {
    "10.3": "link flaps are counter growth between two readings (ib-port-flapping reads the "
    "history of unattended runs); one pasted ibstat holds one reading",
}

SESSION = """\
root@gpu-node-1:~# {command}
{output}root@gpu-node-1:~# uptime
 10:12:01 up 12 days,  3:04,  1 user,  load average: 0.52, 0.48, 0.40
"""


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


def test_every_catalogue_entry_is_accounted_for() -> None:
    ids = catalogue_ids()
    assert len(ids) == len(set(ids)) and len(ids) > 80
    covered = by_error_text() | set(FACT_CASES) | set(FACT_ONLY) | set(NOT_IN_ONE_PASTE)
    assert [i for i in ids if i not in covered] == []
    # and nothing listed here is a number the catalogue does not have
    assert set(FACT_CASES) | set(FACT_ONLY) | set(NOT_IN_ONE_PASTE) <= set(ids)


@pytest.mark.parametrize("entry", sorted(FACT_CASES), ids=sorted(FACT_CASES))
@pytest.mark.parametrize("where", ["alone", "in a session"])
def test_output_entry_is_recognised_and_ranked(entry: str, where: str) -> None:
    command, output, check, rules = FACT_CASES[entry]
    text = output if where == "alone" else SESSION.format(command=command, output=output)
    intake = intake_paste(text, "paste.txt")
    assert check(intake.facts), [p.describe() for p in intake.pieces]
    doc = evaluate(Snapshot(facts=intake.facts), book(), engine="reference")
    assert doc.findings and doc.findings[0].rule_id in rules, [f.rule_id for f in doc.findings]


@pytest.mark.parametrize("entry", sorted(FACT_ONLY), ids=sorted(FACT_ONLY))
@pytest.mark.parametrize("where", ["alone", "in a session"])
def test_output_entry_is_read_as_facts(entry: str, where: str) -> None:
    command, output, check = FACT_ONLY[entry]
    text = output if where == "alone" else SESSION.format(command=command, output=output)
    assert check(intake_paste(text, "paste.txt").facts)
