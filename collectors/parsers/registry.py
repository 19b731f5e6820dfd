"""Parser names a runbook step may declare, and what each turns output into.

Each entry maps a name to ``"module:function"``; the function takes the command's
output text and returns a partial :class:`~gpu_triage.model.facts.Facts`. Modules are
imported only when a parser is used, so linting a rulebook stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Protocol

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.model.facts import Facts

PARSERS: dict[str, str] = {
    "nvidia-smi": "gpu_triage.collectors.parsers.adapters:nvidia_smi_table",
    "nvidia-smi-q": "gpu_triage.collectors.parsers.adapters:nvidia_smi_q",
    "nvidia-smi-q-xml": "gpu_triage.collectors.parsers.adapters:nvidia_smi_xml",
    "dcgmi-diag": "gpu_triage.collectors.parsers.adapters:dcgmi_diag",
    "nvidia-smi-query-gpu": "gpu_triage.collectors.parsers.adapters:nvidia_smi_query_gpu",
    "nvidia-smi-compute-apps": "gpu_triage.collectors.parsers.adapters:nvidia_smi_compute_apps",
    "nvidia-smi-nvlink": "gpu_triage.collectors.parsers.adapters:nvidia_smi_nvlink",
    "nvidia-smi-topo": "gpu_triage.collectors.parsers.adapters:nvidia_smi_topo",
    "lspci": "gpu_triage.collectors.parsers.adapters:lspci",
    "kernel-log": "gpu_triage.collectors.parsers.adapters:kernel_log",
    "mpstat": "gpu_triage.collectors.parsers.adapters:mpstat",
    "iostat": "gpu_triage.collectors.parsers.adapters:iostat",
    "meminfo": "gpu_triage.collectors.parsers.adapters:meminfo",
    "ibstat": "gpu_triage.collectors.parsers.adapters:ibstat",
    "iperf3": "gpu_triage.collectors.parsers.adapters:iperf3",
    "fio": "gpu_triage.collectors.parsers.adapters:fio",
    "mountstats": "gpu_triage.collectors.parsers.adapters:mountstats",
    "kubectl-describe-pod": "gpu_triage.collectors.parsers.adapters:kubectl_describe_pod",
    "kubectl-describe-node": "gpu_triage.collectors.parsers.adapters:kubectl_describe_node",
    "nvidia-smi-topo-p2p": "gpu_triage.collectors.parsers.adapters:nvidia_smi_topo_p2p",
    "nvidia-smi-topo-p2p-r": "gpu_triage.collectors.parsers.adapters:nvidia_smi_topo_p2p_r",
    "nvidia-smi-topo-p2p-w": "gpu_triage.collectors.parsers.adapters:nvidia_smi_topo_p2p_w",
    "nvidia-smi-topo-p2p-n": "gpu_triage.collectors.parsers.adapters:nvidia_smi_topo_p2p_n",
    "nvidia-smi-topo-p2p-a": "gpu_triage.collectors.parsers.adapters:nvidia_smi_topo_p2p_a",
    "nvidia-smi-topo-p2p-p": "gpu_triage.collectors.parsers.adapters:nvidia_smi_topo_p2p_p",
    "ibv-devinfo": "gpu_triage.collectors.parsers.adapters:ibv_devinfo",
    "proc-stat": "gpu_triage.collectors.parsers.adapters:proc_stat",
    "proc-pressure": "gpu_triage.collectors.parsers.adapters:proc_pressure",
    "proc-pressure-cpu": "gpu_triage.collectors.parsers.adapters:proc_pressure_cpu",
    "proc-pressure-io": "gpu_triage.collectors.parsers.adapters:proc_pressure_io",
    "proc-pressure-memory": "gpu_triage.collectors.parsers.adapters:proc_pressure_memory",
    "kubectl-events": "gpu_triage.collectors.parsers.adapters:kubectl_events",
    "error-text": "gpu_triage.collectors.parsers.adapters:error_text",
    "systemctl-fabricmanager": "gpu_triage.collectors.parsers.adapters:systemctl_fabricmanager",
    "nv-fabricmanager-version": "gpu_triage.collectors.parsers.adapters:nv_fabricmanager_version",
    "fabricmanager-log": "gpu_triage.collectors.parsers.adapters:fabricmanager_log",
    "docker-info": "gpu_triage.collectors.parsers.adapters:docker_info",
    "nvidia-ctk-cdi-list": "gpu_triage.collectors.parsers.adapters:nvidia_ctk_cdi_list",
    "nvidia-ctk-version": "gpu_triage.collectors.parsers.adapters:nvidia_ctk_version",
    "ethtool-i": "gpu_triage.collectors.parsers.adapters:ethtool_i",
    "docker-run-nvidia-smi": "gpu_triage.collectors.parsers.adapters:docker_run_nvidia_smi",
}


class TextParser(Protocol):
    def __call__(self, text: str, source: str = "<text>") -> Facts: ...


def raw_parser(name: str) -> TextParser:
    """The parser itself, without the guards (the fuzzer calls this one)."""
    try:
        target = PARSERS[name]
    except KeyError:
        raise KeyError(f"unknown parser '{name}' (known: {', '.join(sorted(PARSERS))})") from None
    module, _, func = target.partition(":")
    parser: TextParser = getattr(import_module(module), func)
    return parser


def get_parser(name: str) -> TextParser:
    """The parser behind guards: lines clipped to a sane length, and any failure the
    parser did not foresee reported as a ParseError naming the source, never raised raw
    (a runbook step's odd output must not take down the TUI)."""
    parser = raw_parser(name)

    def guarded(text: str, source: str = "<text>") -> Facts:
        try:
            return parser(clip_long_lines(text), source)
        except ParseError:
            raise
        except (
            ValueError,
            TypeError,
            KeyError,
            IndexError,
            AttributeError,
            RecursionError,
            OverflowError,
        ) as exc:
            raise ParseError(
                f"{name} parser could not read this output ({type(exc).__name__}: {exc})",
                source=source,
            ) from exc

    return guarded


MAX_LINE_CHARS = 16_384


def clip_long_lines(text: str) -> str:
    """Cut lines longer than any real tool prints (pastes of binary junk, runaway logs):
    a parser's regexes then never see an unbounded line."""
    if len(text) <= MAX_LINE_CHARS or max(map(len, text.splitlines()), default=0) <= MAX_LINE_CHARS:
        return text
    return "\n".join(line[:MAX_LINE_CHARS] for line in text.splitlines())
