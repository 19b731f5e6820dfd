"""`dcgmi diag` output, as the text table or as JSON (`-j`), into one fact per test and GPU.

Formats (DCGM 2.x-4.x): the text table opens with "Successfully ran diagnostic for
group." and has a row per test, section headers (``|-----  Deployment  ----+---|``),
results ``Pass``/``Fail``/``Warn``/``Skip`` optionally followed by ``- All`` or
``- GPU: 0, 1`` (DCGM 4 prints a ``GPU0: Fail`` line per GPU), and ``Warning``/``Info``
rows whose text wraps over continuation rows. The JSON document nests
``test_categories[].tests[].results[]`` under "DCGM GPU Diagnostic" (DCGM 2/3) or
"DCGM Diagnostic" (DCGM 4); results name the GPU (``gpu_ids`` or ``entity_id``) and
carry ``warnings`` with ``error_id`` (a DCGM_FR_* code) and, from DCGM 3, its severity
and category.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import DiagResult

# dcgm_errors.h: dcgmErrorSeverity_t and dcgmErrorCategory_t values as dcgmi -j prints them.
SEVERITY = {
    0: "none",
    1: "monitor",
    2: "isolate",
    3: "unknown",
    4: "triage",
    5: "config",
    6: "reset",
}
CATEGORY = {
    0: "none",
    1: "performance_threshold",
    2: "performance_violation",
    3: "software_config",
    4: "software_library",
    5: "software_xid",
    6: "software_cuda",
    7: "software_eud",
    8: "software_other",
    9: "hardware_thermal",
    10: "hardware_memory",
    11: "hardware_nvlink",
    12: "hardware_nvswitch",
    13: "hardware_pcie",
    14: "hardware_power",
    15: "hardware_other",
    16: "internal_other",
}
# dcgmError_t (dcgm_errors.h) codes by number, for outputs that give only error_id. Recalled
# from the header (DCGM 3.x order), not read from a copy here: the name is shown beside the
# number, and no rule decides on the name alone.
FR_CODES: tuple[str, ...] = (
    "OK",
    "UNKNOWN",
    "UNRECOGNIZED",
    "PCI_REPLAY_RATE",
    "VOLATILE_DBE_DETECTED",
    "VOLATILE_SBE_DETECTED",
    "PENDING_PAGE_RETIREMENTS",
    "RETIRED_PAGES_LIMIT",
    "RETIRED_PAGES_DBE_LIMIT",
    "CORRUPT_INFOROM",
    "CLOCK_THROTTLE_THERMAL",
    "POWER_UNREADABLE",
    "CLOCK_THROTTLE_POWER",
    "NVLINK_ERROR_THRESHOLD",
    "NVLINK_DOWN",
    "NVSWITCH_FATAL_ERROR",
    "NVSWITCH_NON_FATAL_ERROR",
    "NVSWITCH_DOWN",
    "NO_ACCESS_TO_FILE",
    "NVML_API",
    "DEVICE_COUNT_MISMATCH",
    "BAD_PARAMETER",
    "CANNOT_OPEN_LIB",
    "DENYLISTED_DRIVER",
    "NVML_LIB_BAD",
    "GRAPHICS_PROCESSES",
    "HOSTENGINE_CONN",
    "FIELD_QUERY",
    "BAD_CUDA_ENV",
    "PERSISTENCE_MODE",
    "LOW_BANDWIDTH",
    "HIGH_LATENCY",
    "CANNOT_GET_FIELD_TAG",
    "FIELD_VIOLATION",
    "FIELD_THRESHOLD",
    "FIELD_VIOLATION_DBL",
    "FIELD_THRESHOLD_DBL",
    "UNSUPPORTED_FIELD_TYPE",
    "FIELD_THRESHOLD_TS",
    "FIELD_THRESHOLD_TS_DBL",
    "THERMAL_VIOLATIONS",
    "THERMAL_VIOLATIONS_TS",
    "TEMP_VIOLATION",
    "THROTTLING_VIOLATION",
    "INTERNAL",
    "PCIE_GENERATION",
    "PCIE_WIDTH",
    "ABORTED",
    "TEST_DISABLED",
    "CANNOT_GET_STAT",
    "STRESS_LEVEL",
    "CUDA_API",
    "FAULTY_MEMORY",
    "CANNOT_SET_WATCHES",
    "CUDA_UNBOUND",
    "ECC_DISABLED",
    "MEMORY_ALLOC",
    "CUDA_DBE",
    "MEMORY_MISMATCH",
    "CUDA_DEVICE",
    "ECC_UNSUPPORTED",
    "ECC_PENDING",
    "MEMORY_BANDWIDTH",
    "TARGET_POWER",
    "API_FAIL",
    "API_FAIL_GPU",
    "CUDA_CONTEXT",
    "DCGM_API",
    "CONCURRENT_GPUS",
    "TOO_MANY_ERRORS",
    "NVLINK_CRC_ERROR_THRESHOLD",
    "NVLINK_ERROR_CRITICAL",
    "ENFORCED_POWER_LIMIT",
    "MEMORY_ALLOC_HOST",
    "GPU_OP_MODE",
    "NO_MEMORY_CLOCKS",
    "NO_GRAPHICS_CLOCKS",
    "HAD_TO_RESTORE_STATE",
    "L1TAG_UNSUPPORTED",
    "L1TAG_MISCOMPARE",
    "ROW_REMAP_FAILURE",
    "UNCONTAINED_ERROR",
    "EMPTY_GPU_LIST",
    "DBE_PENDING_PAGE_RETIREMENTS",
    "UNCORRECTABLE_ROW_REMAP",
    "PENDING_ROW_REMAP",
)

RESULTS = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip"}
RESULTS.update({"not run": "skip", "skipped": "skip", "passed": "pass", "failed": "fail"})

_SECTION = re.compile(r"^[|+]\s*-{2,}\s*(?P<cat>[A-Za-z][\w /&-]*?)\s*-{2,}\s*\+")
_ROW = re.compile(r"^\|(?P<name>[^|]*)\|(?P<value>.*)\|\s*$")
_RESULT = re.compile(
    r"^(?P<res>Pass(?:ed)?|Fail(?:ed)?|Warn(?:ing)?|Skip(?:ped)?|Not Run)\b\s*"
    r"(?:-\s*(?P<who>All|GPUs?\s*:?\s*[\d,\s]+))?\s*$",
    re.I,
)
_PER_GPU = re.compile(r"^GPU\s*(?P<gpu>\d+)\s*:\s*(?P<res>\w+(?: Run)?)\s*$", re.I)
_MSG_GPU = re.compile(r"^\s*GPU\s*(?P<gpu>\d+)\b[:\s]*")
_NOTE = re.compile(r"^(?P<kind>Warning|Info|Error)\b\s*(?::\s*GPU\s*(?P<gpu>\d+))?\s*$", re.I)
_METADATA = {"dcgm version": "dcgm_version", "driver version detected": "driver_version"}


@dataclass
class DiagRun:
    """What one dcgmi diag output says."""

    results: list[DiagResult] = field(default_factory=list)
    dcgm_version: str | None = None
    driver_version: str | None = None
    error: str | None = None  # the run itself failed (no results), in DCGM's words


def parse_dcgmi_diag(text: str, source: str = "dcgmi diag") -> DiagRun:
    """Either format; ParseError when the text is neither."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return _parse_json(stripped, source)
    return _parse_table(text, source)


# --------------------------------------------------------------------------- JSON


def _parse_json(text: str, source: str) -> DiagRun:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"not dcgmi diag JSON: {exc}", source=source) from None
    if not isinstance(doc, dict):
        raise ParseError("not dcgmi diag JSON: expected an object", source=source)
    body: Any = doc
    for key in ("DCGM GPU Diagnostic", "DCGM Diagnostic"):
        if isinstance(doc.get(key), dict):
            body = doc[key]
            break
    run = DiagRun()
    for holder in (doc, body):
        version = holder.get("version") or holder.get("DCGM Version")
        if isinstance(version, str):
            run.dcgm_version = version
        meta = holder.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("DCGM Version"), str):
            run.dcgm_version = meta["DCGM Version"]
        err = holder.get("runtime_error") or holder.get("error")
        if isinstance(err, str) and err:
            run.error = err
    cats = body.get("test_categories")
    if not isinstance(cats, list):
        if run.error:
            return run
        raise ParseError("dcgmi diag JSON without test_categories", source=source)
    for cat in cats:
        if not isinstance(cat, dict):
            continue
        category = str(cat.get("category") or "")
        if category.lower() == "metadata":
            continue
        for test in cat.get("tests") or []:
            if isinstance(test, dict):
                _json_test(run, category, test, source)
    return run


def _json_test(run: DiagRun, category: str, test: dict[str, Any], source: str) -> None:
    name = str(test.get("name") or "")
    results = test.get("results")
    if not isinstance(results, list) or not results:
        summary = test.get("test_summary")
        results = [summary] if isinstance(summary, dict) else []
    for res in results:
        if not isinstance(res, dict):
            continue
        status = RESULTS.get(str(res.get("status") or "").strip().lower())
        if status is None:
            continue
        gpus = _json_gpus(res)
        warnings = res.get("warnings")
        notes: list[tuple[str, Any]] = []
        if isinstance(warnings, list):
            notes = [("warning", w) for w in warnings]
        elif isinstance(warnings, str | dict):
            notes = [("warning", warnings)]
        info = res.get("info")
        if isinstance(info, list):
            notes += [("info", i) for i in info]
        elif isinstance(info, str):
            notes.append(("info", info))
        for gpu in gpus:
            row = DiagResult(
                category=category or None,
                test=name or None,
                result=status,
                gpu_index=gpu,
                dcgm_version=run.dcgm_version,
                source=source,
            )
            _json_notes(row, notes)
            run.results.append(row)


def _json_gpus(res: dict[str, Any]) -> list[int | None]:
    if str(res.get("entity_group") or "GPU").upper() != "GPU":
        return []  # a CPU or switch entity: not a GPU result
    for key in ("gpu_ids", "gpu_id", "entity_id"):
        value = res.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]
        if isinstance(value, str) and value.strip():
            ids = [int(v) for v in re.findall(r"\d+", value)]
            if ids:
                return list(dict.fromkeys(ids))
    return [None]


def _json_notes(row: DiagResult, notes: list[tuple[str, Any]]) -> None:
    texts: list[str] = []
    for kind, note in notes:
        if isinstance(note, str):
            texts.append(note.strip())
            continue
        if not isinstance(note, dict):
            continue
        text = note.get("warning") or note.get("info") or note.get("message") or ""
        if text:
            texts.append(str(text).strip())
        if kind != "warning" or row.error_id is not None:
            continue
        eid = note.get("error_id")
        if isinstance(eid, int) and not isinstance(eid, bool):
            row.error_id = eid
            row.error_code = fr_name(eid)
        row.error_severity = _enum(note.get("error_severity"), SEVERITY)
        row.error_category = _enum(note.get("error_category"), CATEGORY)
    if texts:
        row.message = " | ".join(t for t in texts if t)


def _enum(value: Any, table: dict[int, str]) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return table.get(value, f"code {value}")
    if isinstance(value, str) and value.strip():
        v = value.strip().lower()
        for prefix in ("dcgm_error_", "dcgm_fr_ec_"):
            v = v.removeprefix(prefix)
        return v
    return None


def fr_name(error_id: int) -> str | None:
    return f"DCGM_FR_{FR_CODES[error_id]}" if 0 <= error_id < len(FR_CODES) else None


# --------------------------------------------------------------------------- text


def _parse_table(text: str, source: str) -> DiagRun:
    run = DiagRun()
    category: str | None = None
    current: list[DiagResult] = []  # rows of the test being read
    note: tuple[int | None, list[str]] | None = None  # GPU named, text chunks
    seen_table = False
    width = 0

    def close_note() -> None:
        nonlocal note
        if note is not None:
            _attach(current, *note)
        note = None

    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := _SECTION.match(line):
            close_note()
            category, current, seen_table = m.group("cat").strip(), [], True
            continue
        m = _ROW.match(line)
        if not m:
            if not seen_table and run.error is None and re.search(r"(?i)\berror\b", line):
                run.error = line
            continue
        name, cell = m.group("name").strip(), m.group("value")
        value = cell.strip()
        width = max(width, len(cell) - 2)
        seen_table = True
        if name.lower() == "diagnostic" and value.lower() == "result":
            continue
        if category is not None and category.lower() == "metadata":
            if key := _METADATA.get(name.lower()):
                setattr(run, key, value or None)
            continue
        if n := _NOTE.match(name):
            close_note()
            note = (int(n.group("gpu")) if n.group("gpu") else None, [value])
            continue
        if not name:
            if note is not None:
                joiner = "" if len(note[1][-1]) >= width - 1 else " "
                note[1].append(joiner + value)
            elif current and (more := _results(value)):
                if len(current) == 1 and current[0].gpu_index is None and _PER_GPU.match(value):
                    run.results.remove(current.pop())  # DCGM 4: a summary, then each GPU
                for gpu, status in more:
                    row = _row(category, current[0].test if current else None, status, gpu, source)
                    current.append(row)
                    run.results.append(row)
            continue
        close_note()
        res = _results(value)
        if res is None:
            continue
        current = [_row(category, name, status, gpu, source) for gpu, status in res]
        run.results.extend(current)
    close_note()
    if not seen_table:
        if run.error:
            return run
        raise ParseError("not dcgmi diag output: no result table", source=source)
    for r in run.results:
        r.dcgm_version = run.dcgm_version
    return run


def _attach(current: list[DiagResult], gpu: int | None, chunks: list[str]) -> None:
    """A Warning/Info row's text goes to the result of the GPU it names, else to the
    test's failing results."""
    msg = "".join(chunks).strip()
    if gpu is None and (m := _MSG_GPU.match(msg)):
        gpu = int(m.group("gpu"))
    targets = [r for r in current if r.gpu_index == gpu] if gpu is not None else []
    if not targets:
        targets = [r for r in current if r.result in ("fail", "warn")] or current[:1]
    for r in targets:
        r.message = f"{r.message} | {msg}" if r.message else msg


def _results(value: str) -> list[tuple[int | None, str]] | None:
    if m := _RESULT.match(value):
        status = RESULTS[m.group("res").lower()]
        who = m.group("who") or ""
        gpus = [int(g) for g in re.findall(r"\d+", who)] if who.lower() != "all" else []
        return [(g, status) for g in gpus] or [(None, status)]
    if m := _PER_GPU.match(value):
        per_gpu = RESULTS.get(m.group("res").lower())
        return [(int(m.group("gpu")), per_gpu)] if per_gpu else None
    return None


def _row(
    category: str | None, test: str | None, status: str, gpu: int | None, source: str
) -> DiagResult:
    return DiagResult(category=category, test=test, result=status, gpu_index=gpu, source=source)
