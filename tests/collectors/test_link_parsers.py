"""nvlink, topo -m and lspci parsers: real samples against the answer key, then hand-written."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.lspci import parse_lspci_vv
from gpu_triage.collectors.parsers.nvidia_smi.full import parse_nvidia_smi_q
from gpu_triage.collectors.parsers.nvidia_smi.query_csv import (
    parse_compute_apps_csv,
    parse_query_gpu_csv,
)
from gpu_triage.collectors.parsers.nvidia_smi.table import parse_nvidia_smi_table
from gpu_triage.collectors.parsers.nvlink import parse_nvlink_status
from gpu_triage.collectors.parsers.topo import parse_topo_matrix
from gpu_triage.model.facts import UnavailableReason

DATA = Path(__file__).resolve().parents[1] / "data" / "real-outputs"
HAND = Path(__file__).resolve().parents[1] / "data" / "hand-written"
KEY: dict[str, Any] = yaml.safe_load((DATA / "expected.yaml").read_text())


def _samples(kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [(name, entry) for name, entry in KEY["samples"].items() if entry["kind"] == kind]


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_key_has_samples_for_every_link_kind() -> None:
    for kind in ("nvidia_smi_nvlink_s", "nvidia_smi_topo_m", "lspci_vv"):
        assert _samples(kind), kind


# --------------------------------------------------------------------------- nvlink


@pytest.mark.parametrize(("name", "entry"), _samples("nvidia_smi_nvlink_s"), ids=str)
def test_nvlink_sample_matches_key(name: str, entry: dict[str, Any]) -> None:
    links = parse_nvlink_status(_read(name), source=name)
    for gpu in entry["gpus"]:
        mine = [f for f in links if f.gpu_index == gpu["index"]]
        per_link = {f.link: f for f in mine if f.link is not None}
        assert {k: (v.active, v.speed_gbps) for k, v in per_link.items()} == {
            int(k): (v != "<inactive>", None) for k, v in gpu["links"].items()
        }
        if gpu.get("error"):
            (summary,) = [f for f in mine if f.link is None]
            assert summary.active is False  # every link down: visible to rules
            assert summary.unavailable["link"].detail == gpu["error"]
            assert summary.source == name


NVLINK_S = """\
GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0f8c1a5e-1111-2222-3333-444455556666)
\t Link 0: 25 GB/s
\t Link 1: 25 GB/s
\t Link 2: <inactive>
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-1f8c1a5e-1111-2222-3333-444455556666)
\t Link 0: 26.562 GB/s
\t Link 1: <inactive>
"""
NVLINK_E = """\
GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0f8c1a5e-1111-2222-3333-444455556666)
\t Link 0: Replay Errors: 0
\t Link 0: Recovery Errors: 0
\t Link 0: CRC Errors: 0
\t Link 1: Replay Errors: 12
\t Link 1: Recovery Errors: 1
\t Link 1: CRC Errors: 44
"""


def test_nvlink_status_active_links_and_error_counters() -> None:
    links = parse_nvlink_status(NVLINK_S + NVLINK_E)
    got = {(f.gpu_index, f.link): f for f in links}
    assert set(got) == {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)}
    assert (got[0, 0].active, got[0, 0].speed_gbps) == (True, 25.0)
    assert got[0, 2].active is False and got[0, 2].speed_gbps is None
    assert got[1, 0].speed_gbps == 26.562
    assert (got[0, 1].replay_errors, got[0, 1].recovery_errors, got[0, 1].crc_errors) == (12, 1, 44)
    assert got[0, 0].crc_errors == 0
    assert got[0, 1].active is True  # -s and -e merged


def test_nvlink_garbage() -> None:
    assert parse_nvlink_status("") == []
    with pytest.raises(ParseError):
        parse_nvlink_status("some random text\n")


# --------------------------------------------------------------------------- topo


@pytest.mark.parametrize(("name", "entry"), _samples("nvidia_smi_topo_m"), ids=str)
def test_topo_sample_matches_key(name: str, entry: dict[str, Any]) -> None:
    topo = parse_topo_matrix(_read(name), source=name)
    cells = {(p.a, p.b): p.connection for p in topo.pairs}
    assert all(p.source == name for p in topo.pairs)
    if "devices" in entry:
        assert topo.devices == entry["devices"]
    if "matrix" in entry:
        want = {(a, b): c for a, row in entry["matrix"].items() for b, c in row.items() if c != "X"}
        assert cells == want
    rows = sorted(entry["affinity"])
    if "matrix_gpu_to_gpu" in entry:
        assert entry["matrix_gpu_to_gpu"].startswith("NV18 between every pair")
        for a in rows:
            for j in range(8):
                if f"GPU{j}" != a:
                    assert cells[a, f"GPU{j}"] == "NV18"
    if "gpu_nic_pix" in entry:
        nics = [d for d in topo.devices if d.startswith("NIC")]
        assert len(nics) == 10
        for a in rows:
            for nic in nics:
                want = "PIX" if entry["gpu_nic_pix"].get(a) == nic else "SYS"
                assert cells[a, nic] == want, (a, nic)
    for gpu, aff in entry["affinity"].items():
        assert topo.cpu_affinity[gpu] == aff["cpu"]
        if "numa" in aff:
            assert topo.numa_node[gpu] == int(aff["numa"])
        else:
            assert gpu not in topo.numa_node  # no NUMA column printed
        if "gpu_numa_id" in aff:
            assert topo.gpu_numa_id[gpu] is None and aff["gpu_numa_id"] == "N/A"
    assert set(topo.cpu_affinity) == set(entry["affinity"])


TOPO_NEW = (
    "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\tPIX\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tSYS\tPIX\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tPIX\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tPIX\tSYS\t X \t\t\t\t\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
    "\n"
    "NIC Legend:\n"
    "\n"
    "  NIC0: mlx5_0\n"
    "  NIC1: mlx5_1\n"
)


def test_topo_modern_header_legend_tabs() -> None:
    topo = parse_topo_matrix(TOPO_NEW)
    assert topo.devices == ["GPU0", "GPU1", "NIC0", "NIC1"]
    assert topo.nic_legend == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    cells = {(p.a, p.b): p.connection for p in topo.pairs}
    assert cells[("GPU0", "GPU1")] == "NV18"
    assert cells[("NIC1", "GPU1")] == "PIX"
    assert len(cells) == 12
    assert topo.cpu_affinity == {"GPU0": "0-55,112-167", "GPU1": "56-111,168-223"}
    assert topo.numa_node == {"GPU0": 0, "GPU1": 1}
    assert topo.gpu_numa_id == {"GPU0": None, "GPU1": None}
    spaced = parse_topo_matrix(TOPO_NEW.expandtabs(8))
    assert spaced.numa_node == topo.numa_node and spaced.pairs == topo.pairs


def test_topo_two_column_affinity_and_old_soc() -> None:
    text = (
        "        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
        "GPU0     X      SOC     0-7             N/A\n"
        "GPU1    SOC      X      8-15            1\n"
    )
    topo = parse_topo_matrix(text)
    assert {(p.a, p.b): p.connection for p in topo.pairs} == {
        ("GPU0", "GPU1"): "SOC",
        ("GPU1", "GPU0"): "SOC",
    }
    assert topo.numa_node == {"GPU0": None, "GPU1": 1}
    assert topo.gpu_numa_id == {}


def test_topo_single_gpu() -> None:
    text = (
        "        GPU0    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
        "GPU0     X      0-15    0               N/A\n"
    )
    topo = parse_topo_matrix(text)
    assert topo.pairs == [] and topo.devices == ["GPU0"]
    assert (topo.cpu_affinity, topo.numa_node) == ({"GPU0": "0-15"}, {"GPU0": 0})


def test_topo_garbage() -> None:
    assert parse_topo_matrix("").pairs == []
    with pytest.raises(ParseError):
        parse_topo_matrix("nothing to see here\n")


# --------------------------------------------------------------------------- lspci


def _speed(text: str) -> float | None:
    return None if text == "unknown" else float(text.removesuffix("GT/s"))


@pytest.mark.parametrize(("name", "entry"), _samples("lspci_vv"), ids=str)
def test_lspci_sample_matches_key(name: str, entry: dict[str, Any]) -> None:
    links = parse_lspci_vv(_read(name), source=name)
    assert len(links) == len(entry["links"])
    for link, exp in zip(links, entry["links"], strict=True):
        assert link.pci_bus_id == exp["device"]
        assert link.source == name
        cap, sta = exp["lnkcap"], exp["lnksta"]
        assert link.speed_gts_max == _speed(cap["speed"])
        if cap["speed"] == "unknown":
            assert link.unavailable["speed_gts_max"].reason is UnavailableReason.NOT_SUPPORTED
        assert link.width_max == int(cap["width"].lstrip("x"))
        assert link.speed_gts == _speed(sta["speed"])
        assert link.width == int(sta["width"].lstrip("x"))
        # what a rule would conclude from the values: matches the key's verdicts
        down = (
            None
            if link.speed_gts is None or link.speed_gts_max is None
            else link.speed_gts < link.speed_gts_max
        )
        assert down == exp["speed_downgraded"]
        assert (link.width < link.width_max) == exp["width_downgraded"]


LSPCI_FULL = (HAND / "lspci/lspci-vv-gpu-x8-downgraded-nic-nvme-bridge-aspeed.txt").read_text()


def test_lspci_full_device_blocks() -> None:
    links = parse_lspci_vv(LSPCI_FULL)
    got = {f.pci_bus_id: f for f in links}
    assert list(got) == [
        "0000:3b:00.0",
        "0000:5e:00.0",
        "0000:c1:00.0",
        "0000:00:01.0",
        "0000:03:00.0",
    ]  # the host bridge has no link and is left out
    gpu = got["0000:3b:00.0"]
    assert (gpu.device_class, gpu.numa_node) == ("gpu", 0)
    assert (gpu.speed_gts, gpu.speed_gts_max, gpu.width, gpu.width_max) == (16, 16, 8, 16)
    assert [got[b].device_class for b in got] == ["gpu", "nic", "nvme", "bridge", "other"]
    assert got["0000:5e:00.0"].numa_node == 1
    assert got["0000:00:01.0"].speed_gts == 2.5  # reported as printed
    assert got["0000:03:00.0"].width == 1


def test_lspci_access_denied_and_fragments() -> None:
    denied = (
        "3b:00.0 3D controller: NVIDIA Corporation GV100GL [Tesla V100 PCIe 32GB] (rev a1)\n"
        "\tSubsystem: NVIDIA Corporation Device 124a\n"
        "\tFlags: bus master, fast devsel, latency 0, IRQ 16, NUMA node 0\n"
        "\tCapabilities: <access denied>\n"
    )
    (link,) = parse_lspci_vv(denied)
    assert link.numa_node == 0 and link.device_class == "gpu"
    assert link.unavailable["width"].reason is UnavailableReason.NO_PERMISSION
    two = (
        "LnkCap: Port #0, Speed 8GT/s, Width x16\nLnkSta: Speed 8GT/s, Width x16\n"
        "LnkCap: Port #0, Speed 16GT/s, Width x16\nLnkSta: Speed 16GT/s, Width x4\n"
    )
    assert [(f.speed_gts, f.width) for f in parse_lspci_vv(two)] == [(8, 16), (16, 4)]
    assert parse_lspci_vv("") == []
    with pytest.raises(ParseError):
        parse_lspci_vv("not lspci at all\n")


# --------------------------------------------------------------------------- fuzz

PARSERS = [
    parse_nvidia_smi_table,
    parse_nvidia_smi_q,
    parse_compute_apps_csv,
    parse_query_gpu_csv,
    parse_nvlink_status,
    parse_topo_matrix,
    parse_lspci_vv,
]
FRAGMENTS = st.sampled_from(
    [
        "|",
        "+---+",
        "GPU 0:",
        "Link 0:",
        " : ",
        "N/A",
        "X",
        "NV18",
        "GPU0",
        "\t",
        "\n",
        "LnkSta:",
        "Speed",
        "x16",
        "00000000:18:00.0",
        "Processes:",
        "MIG devices:",
        "Clocks Event Reasons",
        "ECC Errors",
        "Volatile",
        "Total : 3",
        ",",
        "[N/A]",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(FRAGMENTS, st.text(max_size=20)), max_size=60))
def test_parsers_never_crash(parts: list[str]) -> None:
    text = " ".join(parts)
    for parse in PARSERS:
        with contextlib.suppress(ParseError):
            parse(text)


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
def test_binary_and_huge_lines(parse: Any) -> None:
    for text in (bytes(range(256)) * 50, "x" * 3_000_000, "| " * 200_000 + "\n"):
        with contextlib.suppress(ParseError):
            parse(text)
