"""Every signature of the error-text table is recognised, alone and inside a realistic
paste, sets its fact, and makes its rule the top finding when it is the only fault.

The texts are the catalogue's (tests/errors/signature_cases.py); the signatures the table
marks unverified (``[recalled]`` in the catalogue) are listed there as such."""

from __future__ import annotations

import functools

import pytest

from gpu_triage.collectors.parsers.error_signatures import SIGNATURES
from gpu_triage.collectors.parsers.error_text import parse_error_text, recognises
from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.engine.compiler import Rulebook, load_rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import Snapshot
from tests.errors.signature_cases import CASES, PASTE, UNVERIFIED

IDS = [c[0] for c in CASES]
TEXTS = {c[0]: c[1] for c in CASES}


@functools.cache
def book() -> Rulebook:
    return load_rulebook()


def top_rule(facts: Facts) -> str | None:
    doc = evaluate(Snapshot(facts=facts), book(), engine="reference")
    return doc.findings[0].rule_id if doc.findings else None


def test_every_signature_has_a_case() -> None:
    assert sorted(IDS) == sorted(s.id for s in SIGNATURES)
    assert len(IDS) == len(set(IDS))


def test_unverified_signatures_are_the_recalled_ones() -> None:
    assert {s.id for s in SIGNATURES if not s.verified} == UNVERIFIED


@pytest.mark.parametrize(("sig_id", "text", "rule"), CASES, ids=IDS)
@pytest.mark.parametrize("where", ["alone", "in a paste"])
def test_signature_is_recognised(sig_id: str, text: str, rule: str | None, where: str) -> None:
    sig = next(s for s in SIGNATURES if s.id == sig_id)
    paste = text if where == "alone" else PASTE.format(text=text)
    assert recognises(paste)
    facts = parse_error_text(paste, "paste.txt")
    if sig.cause is None:
        assert facts.driver is not None  # a version line: facts, no event of its own
        assert not [e for e in facts.errors if e.signature == sig_id]
    else:
        found = [e for e in facts.errors if e.signature == sig_id]
        assert found, [e.signature for e in facts.errors]
        assert found[0].cause == sig.cause
        assert found[0].verified is sig.verified
        assert found[0].line is not None
    if rule is not None:
        assert top_rule(facts) == rule


def test_version_lines_set_the_versions() -> None:
    facts = parse_error_text(TEXTS["nvrm-api-mismatch"])
    assert facts.driver is not None
    assert facts.driver.library_version == "535.171.04"
    assert facts.driver.kernel_module_version == "535.161.07"
    assert facts.driver.versions_match is False
    module = parse_error_text(TEXTS["nvrm-module-version"])
    assert module.driver is not None and module.driver.kernel_module_version == "550.54.15"
    apt = parse_error_text(TEXTS["apt-nvidia-upgrade"])
    assert apt.driver is not None
    assert apt.driver.package_upgraded_to == "460.73.01-0ubuntu0.20.04.1"


def test_text_with_no_signature_is_an_error_naming_the_file() -> None:
    from gpu_triage.collectors.parsers import ParseError

    with pytest.raises(ParseError, match=r"log\.txt: no known error text"):
        parse_error_text("epoch 1 loss 0.3\nepoch 2 loss 0.2\n", "log.txt")


def test_repeats_fold_into_a_count() -> None:
    line = (
        "NVRM: API mismatch: the client has the version 535.171.04, but\n"
        "NVRM: this kernel module has the version 535.161.07.\n"
    )
    facts = parse_error_text(line * 500)
    events = [e for e in facts.errors if e.signature == "nvrm-api-mismatch"]
    assert len(events) == 1 and events[0].count == 500


def test_gpu_addresses_are_normalised_and_kept_apart() -> None:
    text = (
        "Unable to determine the device handle for GPU0000:CB:00.0: Unknown Error\n"
        "Unable to determine the device handle for GPU0000:34:00.0: Unknown Error\n"
    )
    facts = parse_error_text(text)
    assert sorted(e.pci_bus_id or "" for e in facts.errors) == ["0000:34:00.0", "0000:cb:00.0"]


def test_quoted_hook_errors_are_unescaped() -> None:
    text = (
        "docker: Error response from daemon: OCI runtime create failed: container_linux.go:348: "
        'starting container process caused "process_linux.go:402: container init caused '
        '\\"process_linux.go:385: running prestart hook 1 caused \\\\\\"error running hook: exit '
        "status 1, stdout: , stderr: exec command: [/usr/bin/nvidia-container-cli --load-kmods "
        "configure]\\\\\\\\nnvidia-container-cli: initialization error: driver error: timed "
        'out\\\\\\\\n\\\\\\"\\"": unknown.'
    )
    facts = parse_error_text(text)
    assert [e.cause for e in facts.errors] == ["container_driver_timeout"]


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("Failed to initialize NVML: Driver/library version mismatch", "version_mismatch"),
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
            "sure that the latest NVIDIA driver is installed and running.",
            "driver_not_loaded",
        ),
        ("No devices were found", "no_devices"),
        ("Failed to initialize NVML: Insufficient Permissions", "no_permission"),
        ("Failed to initialize NVML: Unknown Error", "unknown_error"),
    ],
)
def test_nvidia_smi_errors_are_read_by_the_nvidia_smi_parser(text: str, state: str) -> None:
    for parser in ("nvidia-smi", "nvidia-smi-q"):
        facts = get_parser(parser)(text + "\n", "nvidia-smi.txt")
        assert facts.driver is not None and facts.driver.nvml_init == state
        assert facts.errors


def test_every_signature_has_lower_case_keys() -> None:
    # The scan skips a pattern unless one of its keys occurs in the lower-cased text.
    for sig in SIGNATURES:
        assert sig.keys, sig.id
        assert all(k == k.lower() and k for k in sig.keys), sig.id


def test_a_long_run_of_backslashes_is_read_in_linear_time() -> None:
    # Escape folding once scanned a run of backslashes from every position in it.
    from gpu_triage.collectors.parsers.error_text import _unescape

    assert _unescape("\\" * 300_000 + "x").endswith("x")
