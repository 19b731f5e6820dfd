"""dcgmi diag (text table and -j JSON) and nvidia-smi -q -x (XML) into facts: the real
all-pass fragment, failing runs written from DCGM's documented formats, and XML from
two driver generations, plus the inputs a parser must refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.dcgm_diag import fr_name, parse_dcgmi_diag
from gpu_triage.collectors.parsers.nvidia_smi.xml import parse_nvidia_smi_xml
from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.collectors.recognise import DETECTORS
from gpu_triage.model.facts import RecoveryAction

DATA = Path(__file__).resolve().parents[1] / "data"
DCGM = DATA / "hand-written" / "dcgm"
XML = DATA / "hand-written" / "nvidia-smi-q-xml"


def rows(run) -> list[tuple[str | None, str | None, str | None, int | None]]:
    return [(r.category, r.test, r.result, r.gpu_index) for r in run.results]


def test_real_all_pass_deployment_fragment() -> None:
    path = DATA / "real-outputs" / "dcgm" / "dcgmi-diag-r3-deployment-all-pass-fragment-dcgm55.txt"
    run = parse_dcgmi_diag(path.read_text())
    assert [r[1] for r in rows(run)] == [
        "Denylist",
        "NVML Library",
        "CUDA Main Library",
        "Permissions and OS Blocks",
        "Persistence Mode",
        "Environment Variables",
        "Page Retirement/Row Remap",
        "Graphics Processes",
        "Inforom",
    ]
    assert {(r.category, r.result, r.gpu_index) for r in run.results} == {
        ("Deployment", "pass", None)
    }


def test_text_table_with_failures_per_gpu_and_wrapped_warnings() -> None:
    run = parse_dcgmi_diag(
        (DCGM / "dcgmi-diag-r3-dcgm33-memory-fail-gpu1-wrapped-warning.txt").read_text()
    )
    assert run.dcgm_version == "3.3.5" and run.driver_version == "550.54.15"
    got = rows(run)
    assert ("Deployment", "Page Retirement/Row Remap", "fail", None) in got
    assert ("Integration", "PCIe", "pass", None) in got
    assert ("Hardware", "GPU Memory", "fail", 1) in got
    assert [g for c, t, r, g in got if t == "GPU Memory" and r == "pass"] == [0, 2, 3]
    assert ("Stress", "Targeted Power", "warn", 3) in got
    assert ("Stress", "Memory Bandwidth", "skip", None) in got
    mem = next(r for r in run.results if r.test == "GPU Memory" and r.gpu_index == 1)
    # the wrapped warning is joined back without the column's line breaks
    assert mem.message == (
        "GPU 1 Error using CUDA API cudaMemcpy Check DCGM and system logs for errors. "
        "Reset GPU. Restart DCGM. Rerun diagnostics."
    )
    power = next(r for r in run.results if r.test == "Targeted Power" and r.gpu_index == 3)
    assert "did not reach desired power minimum" in (power.message or "")
    remap = next(r for r in run.results if r.test == "Page Retirement/Row Remap")
    assert "row remappings are pending" in (remap.message or "")
    assert all(r.dcgm_version == "3.3.5" for r in run.results)


def test_old_text_table_without_gpu_column() -> None:
    run = parse_dcgmi_diag((DCGM / "dcgmi-diag-r1-dcgm2-persistence-fail-all.txt").read_text())
    persist = next(r for r in run.results if r.test == "Persistence Mode")
    assert persist.result == "fail" and persist.gpu_index is None
    assert "nvidia-smi -i <gpuId> -pm 1" in (persist.message or "")
    assert sum(r.result == "pass" for r in run.results) == 8


def test_json_with_error_codes_severity_and_category() -> None:
    run = parse_dcgmi_diag((DCGM / "dcgmi-diag-r3-j-dcgm33-memory-fail-gpu1.json").read_text())
    assert run.dcgm_version == "3.3.5"
    mem = next(r for r in run.results if r.test == "GPU Memory" and r.gpu_index == 1)
    assert (mem.result, mem.error_id, mem.error_severity, mem.error_category) == (
        "fail",
        52,
        "isolate",
        "hardware_memory",
    )
    assert mem.error_code == "DCGM_FR_FAULTY_MEMORY" == fr_name(52)
    assert "3 mismatched bytes" in (mem.message or "") and "Allocated" in (mem.message or "")
    remap = next(r for r in run.results if r.test == "Page Retirement/Row Remap")
    assert (remap.gpu_index, remap.error_id, remap.error_severity) == (1, 85, "reset")
    assert [r.result for r in run.results if r.test == "Targeted Stress"] == ["skip", "skip"]


def test_dcgm4_json_entities_and_named_enums() -> None:
    run = parse_dcgmi_diag((DCGM / "dcgmi-diag-r2-j-dcgm4-pcie-fail-entity.json").read_text())
    assert run.dcgm_version == "4.1.1"
    pcie = [r for r in run.results if r.test == "pcie"]
    assert [(r.gpu_index, r.result) for r in pcie] == [(0, "pass"), (1, "fail")]  # CPU dropped
    assert (pcie[1].error_severity, pcie[1].error_category) == ("isolate", "hardware_pcie")


def test_a_run_that_could_not_start_is_an_error_not_a_pass() -> None:
    text = (DCGM / "dcgmi-diag-hostengine-not-running-error.txt").read_text()
    run = parse_dcgmi_diag(text)
    assert not run.results and "connection" in (run.error or "")
    with pytest.raises(ParseError, match="did not run"):
        get_parser("dcgmi-diag")(text, "dcgmi diag -r 1")


@pytest.mark.parametrize("text", ["", "hello\nworld", "{not json", "[1, 2]", '{"x": 1}'])
def test_not_dcgm_output_is_refused(text: str) -> None:
    with pytest.raises(ParseError):
        parse_dcgmi_diag(text)


def test_the_paste_detector_knows_both_formats() -> None:
    from gpu_triage.collectors.from_text import intake_paste

    for name in (
        "dcgmi-diag-r3-dcgm33-memory-fail-gpu1-wrapped-warning.txt",
        "dcgmi-diag-r3-j-dcgm33-memory-fail-gpu1.json",
    ):
        intake = intake_paste((DCGM / name).read_text(), name)
        assert [p.parser for p in intake.pieces] == ["dcgmi-diag"], name
    assert {"dcgmi-diag", "nvidia-smi-q-xml"} <= {d.parser for d in DETECTORS}


# --------------------------------------------------------------------------- XML


def test_xml_h100_two_gpus() -> None:
    rep = parse_nvidia_smi_xml((XML / "q-x-550-h100-two-gpus-remap-pending-gpu1.xml").read_text())
    assert (rep.driver_version, rep.cuda_version, rep.attached_gpus) == ("550.127.05", "12.4", 2)
    g0, g1 = rep.gpus
    assert (g0.index, g0.pci_bus_id, g0.name) == (0, "0000:18:00.0", "NVIDIA H100 80GB HBM3")
    assert (g0.pcie_link_gen, g0.pcie_link_width, g0.pcie_link_width_max) == (5, 16, 16)
    assert (g0.power_draw_w, g0.power_limit_w, g0.temperature_gpu_c) == (655.12, 700.0, 63.0)
    assert (g0.utilization_gpu_pct, g0.memory_used_mib) == (97.0, 71234.0)
    assert g0.throttle_hw_slowdown is False and g0.ecc_enabled is True
    assert (g0.fabric_state, g0.fabric_status) == ("completed", "success")
    assert g0.recovery_action is RecoveryAction.NONE and g0.retired_pages_dbe is None
    assert (g1.index, g1.pcie_link_width, g1.pcie_replay_count) == (1, 8, 112)
    assert (g1.remapped_rows_uncorrectable, g1.remapped_rows_pending) == (1, True)
    assert (g1.ecc_volatile_uncorrected, g1.ecc_aggregate_corrected) == (1, 305)
    assert (g1.fabric_state, g1.fabric_status) == ("in_progress", None)
    assert g1.recovery_action is RecoveryAction.DRAIN_AND_RESET


def test_xml_old_driver_names() -> None:
    rep = parse_nvidia_smi_xml((XML / "q-x-418-v100-throttle-reasons-old-ecc.xml").read_text())
    (g,) = rep.gpus
    assert g.throttle_hw_slowdown is True and g.throttle_hw_power_brake_slowdown is True
    assert (g.ecc_volatile_corrected, g.ecc_aggregate_corrected, g.ecc_aggregate_uncorrected) == (
        3,
        77,
        2,
    )
    assert (g.retired_pages_sbe, g.retired_pages_dbe, g.retired_pages_pending) == (1, 2, True)
    assert (g.power_draw_w, g.power_limit_w, g.persistence_mode) == (105.21, 300.0, False)


def test_xml_entities_and_dtds_are_refused() -> None:
    with pytest.raises(ParseError, match="refusing XML"):
        parse_nvidia_smi_xml((XML / "q-x-entity-expansion-bomb.xml").read_text())
    with pytest.raises(ParseError, match="refusing XML"):
        parse_nvidia_smi_xml('<?xml version="1.0"?><?evil x?><nvidia_smi_log/>')


@pytest.mark.parametrize(
    "text",
    [
        "",
        "<nvidia_smi_log>",
        "<other/>",
        "not xml at all",
        "<nvidia_smi_log><gpu></nvidia_smi_log>",
    ],
)
def test_broken_xml_is_a_clear_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_nvidia_smi_xml(text)


def test_xml_parser_through_the_registry_gives_facts() -> None:
    facts = get_parser("nvidia-smi-q-xml")(
        (XML / "q-x-550-h100-two-gpus-remap-pending-gpu1.xml").read_text(), "q.xml"
    )
    assert len(facts.gpus) == 2 and facts.host is not None
    assert facts.host.driver_version == "550.127.05"
