"""A live node whose driver is broken: NVML fails to start (a fake raising the real
pynvml error) while sysfs shows the GPUs on the bus. The broken driver is a critical top
finding with its runbook and the run exits 2, never "cannot evaluate"."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.host import HostCollector
from gpu_triage.collectors.nvml import NvmlCollector
from gpu_triage.collectors.runner import collect_snapshot
from gpu_triage.engine.compiler import load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import ExitCode
from gpu_triage.model.snapshot import CollectorState
from tests.collectors.fakeroot import build_fake_root
from tests.fakes import fake_nvml as fk


def live(tmp_path: Path, nvml: fk.FakeNvml, *, module_loaded: bool = True):  # type: ignore[no-untyped-def]
    root = build_fake_root(tmp_path)
    if not module_loaded:
        root.remove("proc/driver/nvidia/version")
    host = HostCollector(sleep=root.sleep)
    ctx = CollectContext(window_s=0.0, root=tmp_path)
    snap = collect_snapshot([NvmlCollector(nvml), host], ctx, timeout_s=20)
    return snap, evaluate(snap, load_rulebook(), engine="reference")


@pytest.mark.parametrize(
    ("code", "state", "rule"),
    [
        (
            pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
            "version_mismatch",
            "driver-library-version-mismatch",
        ),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver_not_loaded", "nvidia-driver-not-loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no_permission", "nvml-no-permission"),
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "library_not_found", "nvml-library-missing"),
        (pynvml.NVML_ERROR_UNKNOWN, "unknown_error", "nvml-unknown-error"),
    ],
)
def test_nvml_init_failure_is_a_critical_top_finding(
    tmp_path: Path, code: int, state: str, rule: str
) -> None:
    snap, doc = live(
        tmp_path,
        fk.FakeNvml([fk.h100_sxm()], init_error=code),
        module_loaded=state != "driver_not_loaded",
    )
    nvml = next(c for c in snap.collectors if c.name == "nvml")
    assert nvml.state in (CollectorState.UNAVAILABLE, CollectorState.FAILED)
    assert snap.facts.driver is not None and snap.facts.driver.nvml_init == state
    assert snap.facts.host is not None and snap.facts.host.gpu_count_pci == 2
    top = doc.findings[0]
    assert (top.rule_id, top.severity.value) == (rule, "critical")
    assert top.runbook and all(step.meaning for step in top.runbook)
    assert doc.exit_code == ExitCode.CRITICAL


def test_mismatch_shows_both_versions(tmp_path: Path) -> None:
    root = build_fake_root(tmp_path)
    lib = root.mkdir("usr/lib/x86_64-linux-gnu")
    (lib / "libnvidia-ml.so.570.86.15").write_text("")
    (lib / "libnvidia-ml.so.1").symlink_to("libnvidia-ml.so.570.86.15")
    fake = fk.FakeNvml([fk.h100_sxm()], init_error=pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    ctx = CollectContext(window_s=0.0, root=tmp_path)
    snap = collect_snapshot(
        [NvmlCollector(fake), HostCollector(sleep=root.sleep)], ctx, timeout_s=20
    )
    driver = snap.facts.driver
    assert driver is not None
    assert driver.library_version == "570.86.15"
    assert driver.kernel_module_version is not None
    assert driver.versions_match is False
    doc = evaluate(snap, load_rulebook(), engine="reference")
    values = {e.path: e.value for e in doc.findings[0].evidence}
    assert values["driver.library_version"] == "570.86.15"


def test_no_devices_found_with_gpus_on_the_bus(tmp_path: Path) -> None:
    snap, doc = live(tmp_path, fk.FakeNvml([]))
    assert snap.facts.driver is not None and snap.facts.driver.nvml_init == "no_devices"
    top = doc.findings[0]
    assert (top.rule_id, top.severity.value) == ("nvml-no-devices-found", "critical")
    assert doc.exit_code == ExitCode.CRITICAL


def test_a_working_driver_records_ok(tmp_path: Path) -> None:
    snap, doc = live(tmp_path, fk.FakeNvml([fk.h100_sxm(), fk.h100_sxm(1)]))
    assert snap.facts.driver is not None and snap.facts.driver.nvml_init == "ok"
    assert not snap.facts.errors
    assert not [
        f for f in doc.findings if f.rule_id.startswith(("nvml-", "driver-", "nvidia-driver"))
    ]
