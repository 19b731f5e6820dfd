"""Host health from the kernel log (node-problem-detector parity): the parser's host
events and the rules on them, from a journal with NPD's kernel-monitor lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.collectors.parsers.kernel_log import parse_kernel_log
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import Facts

LOG = (
    Path(__file__).resolve().parents[1]
    / "data/hand-written/kernel-log/host-health-npd-patterns-journal.log"
)


def test_parser_reads_the_host_problems() -> None:
    log = parse_kernel_log(LOG.read_text(), year=2026)
    got = [(e.problem, e.device) for e in log.host_events]
    assert got == [
        ("nfs_not_responding", "storage01.example"),
        ("hung_task", None),
        ("io_error", "nvme1n1"),
        ("io_error", "nvme1n1p1"),
        ("fs_error", "nvme1n1p1"),
        ("fs_error", "nvme1n1p1"),
        ("machine_check", None),
    ]
    hung = log.host_events[1]
    assert (hung.process_name, hung.pid) == ("pt_data_worker", 48213) and hung.time is not None
    assert not log.xids and not log.aers  # none of them is a GPU event


@pytest.mark.parametrize("engine", ["reference", "durable"])
def test_rules_on_the_host_problems(builtin_book: Rulebook, engine: str) -> None:
    log = parse_kernel_log(LOG.read_text(), year=2026)
    doc = evaluate(EvalInput(Facts(host_events=log.host_events)), builtin_book, engine=engine)
    got = sorted((f.rule_id, f.severity.value) for f in doc.findings)
    assert got == [
        ("host-disk-io-error", "critical"),
        ("host-disk-io-error", "critical"),
        ("host-filesystem-error", "critical"),
        ("host-machine-check", "critical"),
        ("host-nfs-not-responding", "warning"),
        ("host-task-hung", "warning"),
    ]
