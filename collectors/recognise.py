"""Which parser reads which lines of a pasted text: one table of detectors.

``DETECTORS`` is the one extension point. A row names a parser of the registry
(:data:`gpu_triage.collectors.parsers.registry.PARSERS`) and says, with regexes
searched in each (cleaned) line:

- ``anchor``: a line that proves the format (``| NVIDIA-SMI 535...``, ``CA 'mlx5_0'``,
  ``NVRM: Xid ...``). An anchor starts a segment of that kind, even in the middle of
  another output: anchors must be specific.
- ``member``: a line that belongs to the format (table borders, ``Key : value``
  lines). Members keep a segment going, and join a segment that starts right after
  them (a banner, a header above the first anchor). Anchors are members too.
- ``command``: a shell command whose output this is (``nvidia-smi -q``,
  ``dmesg | grep -i xid``), read from the prompt line of a pasted session. Inside
  such a block the detector's member lines count as anchors, and a block where
  nothing is recognised goes to this parser whole (it then parses it or says why not).
- ``yields_to``: kinds whose segments this detector's anchors do not interrupt
  (an ``Events:`` table inside ``kubectl describe pod`` stays with the pod).
- ``wraps``: the format has long lines that pastes wrap: an unclaimed line right after
  a claimed one (no blank line between) continues it. Otherwise unclaimed lines join
  a segment only when a member line follows them; trailing ones are reported.
- ``grep_prefix``: the parser reads ``grep -H`` / ``-n`` prefixes itself (PSI labels).

Rows are tried in order: put the more specific first. To add a format (an error
text, a new tool), register its parser in the registry and add one row here; nothing
else changes. Cost: per line, one regex of the current segment, and the combined
anchor regex when that fails; linear in the input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache


@dataclass(frozen=True)
class Detector:
    parser: str
    anchor: str
    member: str = ""
    command: str = ""
    yields_to: tuple[str, ...] = ()
    grep_prefix: bool = False  # the parser reads grep -H / -n prefixes itself (labels)
    wraps: bool = False  # long lines wrap in pastes: a line right after a claimed one continues it


_CONN = r"(?:X|SYS|SOC|NODE|PHB|PXB|PIX|PSB|C2C|NV\d{1,3})"
_P2P = r"(?:X|OK|NS|CNS|GNS|TNS|U)"
_KUBE_MEMBER = r"^\S[^:]{0,80}:(?:\s|$)|^\s+\S"


def _error_text_anchor() -> str:
    """The error-text table's distinctive keys (12 characters or more, so a word such as
    "ecc" inside another tool's output starts nothing), as one case-blind alternation."""
    from gpu_triage.collectors.parsers.error_signatures import SIGNATURES

    keys = sorted({k for s in SIGNATURES for k in s.keys if len(k) >= 12}, key=len, reverse=True)
    return "(?i:" + "|".join(re.escape(k) for k in keys) + ")"


ERROR_TEXT_ANCHOR = _error_text_anchor()

# The lines `nvidia-smi` prints (its table, the date line above it, "No devices were
# found"): the nvidia-smi row's and the container test's members.
_SMI_MEMBER = (
    r"^\s*[|+]|No running processes found|No devices were found"
    r"|^\s*\w{3}\s+\w{3}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\d{4}\s*$"
)

DETECTORS: tuple[Detector, ...] = (
    Detector(
        # Named by its prompt only (`$ docker run --rm --gpus all IMAGE nvidia-smi`): the
        # same table as the host's, or the runtime's error, both read as the container's.
        "docker-run-nvidia-smi",
        anchor=r"(?!)",
        member=(
            _SMI_MEMBER + r"|^\s*(?:docker|podman|nerdctl)?:?\s*Error response from daemon"
            r"|nvidia-container-cli|OCI runtime|Failed to initialize NVML|^\s*(?:ERRO|time=)"
            r"|^\s*(?:Unable to find image|[0-9a-f]{12}: (?:Pull|Download|Verif|Waiting|Already))"
            r"|^\s*(?:Digest|Status): |^\s*\S+: Pulling from |^Run '\S+ run --help'"
            r"|^\s*GPU \d{1,3}: .*\(UUID: "
        ),
        command=r"\b(?:docker|podman|nerdctl)\s+(?:container\s+)?run\b.*\bnvidia-smi\b",
    ),
    Detector(
        "docker-info",
        anchor=(
            r"^\s*Runtimes:\s+\S|^\s*Default Runtime:\s+\S|^Client:\s+Docker Engine"
            r"|\"DefaultRuntime\"\s*:"
        ),
        member=r"^\s*[A-Za-z][\w .()/-]{0,60}:(?:\s|$)|^\s+\S",
        command=r"\bdocker\s+(?:system\s+)?info\b",
    ),
    Detector(
        "nvidia-ctk-version",
        anchor=(
            r"^\s*NVIDIA Container (?:Toolkit CLI|Runtime(?: Hook)?) version \d"
            r"|^\s*cli-version:\s*\d"
        ),
        member=r"^\s*(?:commit|spec|lib-version|build [a-z]+|go|libseccomp|runc version)\b",
        command=r"\bnvidia-(?:ctk|container-cli|container-runtime(?:-hook)?)\s+--version\b",
    ),
    Detector(
        "ethtool-i",
        # "driver: mlx5_core" opens each output (ethtool -i is the tool that prints a bare
        # lower-case driver: line); firmware-version and expansion-rom-version prove it too
        anchor=(
            r"^driver:[ \t]+[a-z][\w-]{0,31}[ \t]*$|^\s*firmware-version:"
            r"|^\s*expansion-rom-version:"
        ),
        member=(
            r"^\s*(?:driver|version|bus-info|supports-[a-z-]+|expansion-rom-version"
            r"|firmware-version):"
        ),
        command=r"\bethtool\s+(?:-i|--driver)\b",
    ),
    Detector(
        "nvidia-ctk-cdi-list",
        anchor=r"\bFound\s+\d+\s+CDI\s+devices?\b|^\s*nvidia\.com/gpu=\S+\s*$",
        member=r"^\s*[a-z0-9.-]+/[a-z0-9.-]+=\S+\s*$|^(?:INFO|WARN|ERRO)\[\d+\]",
        command=r"\bnvidia-ctk\s+cdi\s+list\b",
    ),
    Detector(
        "nvidia-smi-q",
        anchor=(
            r"^\s*=+\s*NVSMI LOG\s*=+\s*$|^\s*Attached GPUs\s+:\s*\d"
            r"|^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$"
            r"|^\s*(?:Clocks (?:Event|Throttle) Reasons|Clock Throttle Reasons|Remapped Rows"
            r"|Retired Pages|ECC Errors|Ecc Errors|FB Memory Usage|BAR1 Memory Usage"
            r"|GPU Power Readings|Power Readings|Max Clocks|Fabric|MIG Mode)\s*$"
        ),
        member=r"^\s*[A-Za-z][^:|]{0,80}?\s:(?:\s|$)|^\s{2,}[A-Z][\w ./()+-]{0,80}$",
        command=r"nvidia-smi\b.*(?:\s-q\b|\s--query(?:\s|$)|\s-a\b|\s-q?d\s)",
    ),
    Detector(
        "nvidia-smi",
        anchor=(
            r"^\s*\|?\s*NVIDIA-SMI\s+\d|^\s*\|\s*Processes:?\s|^\s*\|\s*GPU\s+Name\b"
            r"|^\s*\|\s*\d{1,3}\s+\S.*\|\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s"
            r"|^\s*\|\s*\d{1,3}\s+(?:(?:N/A|\d{1,6})\s+){0,2}\d{1,10}\s+(?:C|G|C\+G|M|M\+C)\s+\S"
        ),
        member=_SMI_MEMBER,
        command=r"nvidia-smi(?:\.exe)?(?:\s+-i\s+\S+)?\s*(?:$|\|)",
        yields_to=("docker-run-nvidia-smi",),
    ),
    Detector(
        "dcgmi-diag",
        anchor=(
            r"Successfully ran diagnostic for group|^\s*\|\s*Diagnostic\s+\|\s*Result\s*\|"
            r"|\"DCGM (?:GPU )?Diagnostic\"\s*:"
        ),
        member=r"^\s*[+|]|^\s*[{}\[\]\"]",
        command=r"\bdcgmi\s+diag\b",
    ),
    Detector(
        "nvidia-smi-q-xml",
        anchor=r"<nvidia_smi_log>|<!DOCTYPE nvidia_smi_log",
        member=r"^\s*<",
        command=r"\bnvidia-smi\b.*\s-x\b|\bnvidia-smi\b.*--xml-format",
    ),
    Detector(
        "nvidia-smi-topo-p2p",
        anchor=rf"^\s*GPU\d{{1,3}}\s+(?:{_P2P}\s+)+{_P2P}\s*$",
        member=rf"^\s*(?:GPU\d{{1,3}}\s*)+$|^\s*Legend:|^\s*{_P2P}\s+=",
        command=r"nvidia-smi\s+topo\s+(?:-p2p|--p2pstatus)",
    ),
    Detector(
        "nvidia-smi-topo",
        anchor=(
            r"^\s*GPU0\b.*\b(?:CPU Affinity|NUMA Affinity)"
            rf"|^\s*(?:GPU\d{{1,3}}|NIC\d{{1,3}}|[a-z][a-z0-9]*_\d{{1,3}})\s+(?:{_CONN}\s+)+{_CONN}\b"
        ),
        member=(
            r"^\s*(?:GPU\d{1,3}|NIC\d{1,3}|mlx\d+_\d+)(?:\s+\S+)+\s*$|^\s*Legend:|^\s*NIC Legend:"
            rf"|^\s*(?:{_CONN}|NV#)\s+=|^\s*NIC\d{{1,3}}\s*:\s*\S+"
        ),
        command=r"nvidia-smi\s+topo\s+(?:-m|--matrix)",
    ),
    Detector(
        "nvidia-smi-nvlink",
        anchor=r"^\s*Link \d{1,3}\s*:\s|Unable to retrieve NVLink information",
        member=r"^\s*GPU \d{1,3}:.*\(UUID:|^\s*(?:NVML:|Unable to|Failed to)",
        command=r"nvidia-smi\s+nvlink",
    ),
    Detector(
        "nvidia-smi-compute-apps",
        anchor=(
            r"^(?=(?:.*,)?\s*(?:pid|process_name|used_gpu_memory|used_memory)\s*(?:\[[^\]]*\]\s*)?(?:,|$))"
            r"\s*[\w.]+(?:\s*\[[^\]]*\])?(?:\s*,\s*[\w.]+(?:\s*\[[^\]]*\])?)+\s*$"
            r"|^\s*\d{1,10}\s*,\s*[^,]+,\s*(?:\d+\s*MiB|\[N/A\]|N/A)\s*(?:,.*)?$"
        ),
        member=r",",
        command=r"--query-compute-apps",
    ),
    Detector(
        "nvidia-smi-query-gpu",
        anchor=(
            r"^(?=.*,)(?=.*\b(?:pci\.bus_id|utilization\.(?:gpu|memory)|memory\.(?:used|total|free)"
            r"|temperature\.gpu|power\.(?:draw|limit)|clocks_(?:event|throttle)_reasons\.|pstate"
            r"|driver_version|ecc\.errors|enforced\.power\.limit|fan\.speed)\b)"
            r"\s*[\w.]+(?:\s*\[[^\]]*\])?(?:\s*,\s*[\w.]+(?:\s*\[[^\]]*\])?)+\s*$"
        ),
        member=r",",
        command=r"--query-gpu",
    ),
    Detector(
        "ibv-devinfo",
        anchor=r"^\s*hca_id:\s*\S|^\s*state:\s+PORT_[A-Z_]+|^\s*phys_state:\s+[A-Z_]+",
        member=r"^\s*[a-z_]{2,40}(?:\[\s*\d+\])?:\s|^\s*port:\s+\d+\s*$|^\s*GID\[",
        command=r"\bibv_devinfo\b",
    ),
    Detector(
        "ibstat",
        anchor=r"^\s*CA:?\s+'[^']+'\s*$|^\s*Physical state:\s|^\s*Link layer:\s",
        member=(
            r"^\s*(?:CA type|Number of ports|Firmware version|Hardware version|Node GUID"
            r"|System image GUID|Port \d{1,3}|State|Physical state|Rate|Base lid|LMC|SM lid"
            r"|Capability mask|Port GUID|Link layer)\s*:|^\s*ib(?:warn|panic|debug):"
        ),
        command=r"\bibstat\b",
    ),
    Detector(
        "lspci",
        anchor=(
            r"^\s{0,3}(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\s+[^:]{2,80}:\s"
            r"|^\s*(?:LnkCap2?|LnkSta2?|LnkCtl2?|ACSCap|ACSCtl|DevCap2?|DevSta|SltCap|SltSta):\s"
            r"|^\s*Capabilities:\s+\[[0-9a-f]{2,3}"
        ),
        member=r"^\s+\S",
        command=r"\blspci\b",
    ),
    Detector(
        "proc-pressure",
        anchor=r"\b(?:some|full)\s+avg10=",
        member=r"^\s*(?:==>.*<==|/proc/pressure/\w+|cpu|io|memory|irq)\s*$",
        command=r"/proc/pressure",
        grep_prefix=True,
    ),
    Detector(
        "proc-stat",
        anchor=r"^\s*cpu\s+\d+\s+\d+\s+\d+\s+\d+|^\s*btime\s+\d+\s*$|^\s*procs_running\s+\d+\s*$",
        member=r"^\s*(?:cpu\d*|intr|ctxt|btime|processes|procs_running|procs_blocked|softirq)\s+\d",
        command=r"/proc/stat\b",
    ),
    Detector(
        "meminfo",
        anchor=(
            r"^\s*(?:MemTotal|MemFree|MemAvailable|SwapTotal|HugePages_Total|Committed_AS"
            r"|SReclaimable):\s+\d+"
        ),
        member=r"^\s*[A-Za-z][\w()]{0,40}:\s+\d+(?:\s+kB)?\s*$",
        command=r"/proc/meminfo|\bfree\b",
    ),
    Detector(
        "mpstat",
        anchor=r"\b(?:CPU|NODE)\s+%(?:usr|user)\b.*%idle|\"cpu-load\"\s*:",
        member=(
            r"^\s*\d{1,2}[:.]\d\d(?:[:.]\d\d)?(?:\s*[AP]M)?\s+(?:all|\d+)\s"
            r"|^\s*\S+:?\s+(?:all|\d+)\s+-?\d+[.,]\d+\s"
            r"|^\S+ \S+ \([^)]*\)\s+\S+|^\s*[{}\[\]\"]"
        ),
        command=r"\bmpstat\b",
    ),
    Detector(
        "iostat",
        anchor=r"^\s*Device:?\s+(?:r/s|rrqm/s|tps|rkB/s|w/s)\b|^\s*avg-cpu:\s+%user|%util\s+Device\s*$"
        r"|\"disk\"\s*:\s*\[",
        member=(
            r"^\s*[\w/.:-]+\s+-?[\d.,]+[kKMGTP%]?(?:\s+-?[\d.,]+[kKMGTP%]?)+(?:\s+[\w/.-]+)?\s*$"
            r"|^\S+ \S+ \([^)]*\)\s+\S+|^\s*\d\d/\d\d/\d{2,4}\s+\d\d:\d\d:\d\d|^\s*[{}\[\]\"]"
        ),
        command=r"\biostat\b",
    ),
    Detector(
        "kubectl-events",
        anchor=(r"\bFailedScheduling\b|^\s*(?:NAMESPACE\s+)?LAST SEEN\s+TYPE\s+REASON"),
        member=r"^\s*Events:\s*$|^\s*Type\s+Reason\s+Age|^\s*-{4}\s+-{6}|\b(?:Warning|Normal)\s+\w",
        command=r"kubectl\s+(?:get\s+events|events)\b",
        yields_to=("kubectl-describe-pod", "kubectl-describe-node"),
        wraps=True,
    ),
    Detector(
        "kubectl-describe-pod",
        anchor=(
            r"^\s*(?:Containers|Init Containers|QoS Class|Node-Selectors|Tolerations|Controlled By"
            r"|Service Account|Priority Class Name|Volumes):|^\s*Namespace:\s+\S"
        ),
        member=_KUBE_MEMBER,
        command=r"kubectl\s+describe\s+(?:pods?|po)\b",
        yields_to=("docker-info",),  # docker info has a "Containers:" line too
        wraps=True,
    ),
    Detector(
        "kubectl-describe-node",
        anchor=(
            r"^\s*(?:Capacity|Allocatable|Allocated resources|Non-terminated Pods|System Info"
            r"|Taints|Unschedulable|PodCIDRs?|ProviderID|Lease):"
            r"|^\s*nvidia\.com/gpu\s+\d+\s+\d+\s*$"
        ),
        member=_KUBE_MEMBER,
        command=r"kubectl\s+describe\s+(?:nodes?|no)\b",
        wraps=True,
    ),
    Detector(
        "iperf3",
        anchor=(
            r"^\[\s*(?:\d{1,4}|SUM|ID)\]\s+(?:\d|Interval|local)|^Connecting to host \S+, port \d"
            r"|^Server listening on \d|\"sum_received\"\s*:"
        ),
        member=r"^\[|^-\s-\s-|iperf Done",
        command=r"\biperf3?\b",
    ),
    Detector(
        "fio",
        anchor=r"\(groupid=\d+, jobs=\d+\)|^\s*Run status group \d+|^fio-\d|\"fio version\"\s*:",
        member=r"^\s+\S|^\S+: \(g=\d+\)|^Starting \d+ process|^Jobs: |^\s*(?:READ|WRITE):",
        command=r"\bfio\b",
    ),
    # Fabric Manager: its unit's status, its version and its log (before the kernel log,
    # whose journalctl command would claim `journalctl -u nvidia-fabricmanager`).
    Detector(
        "systemctl-fabricmanager",
        anchor=(
            r"^\s*(?:[\u25cf\u25cb\u00d7*]\s*)?nvidia-fabricmanager(?:\.service)?\s+-\s"
            r"|Unit nvidia-fabricmanager(?:\.service)? could not be found"
            r"|^\s*Id=nvidia-fabricmanager\.service\s*$"
        ),
        member=(
            r"^\s+(?:Loaded|Active|Docs|Process|Main PID|Tasks|Memory|CPU|CGroup|Invocation"
            r"|TriggeredBy|Drop-In|Status):|^\s+[│├└|`]|^\s+\S"
            r"|^(?:LoadState|ActiveState|SubState|Result|Names)=\S*\s*$"
            r"|^\w{3}\s+\d{1,2} \d\d:\d\d:\d\d \S+ (?:nv-fabricmanager|systemd)\[\d+\]:"
        ),
        command=r"\bsystemctl\s+(?:status|show|is-active)\b.*\bnvidia-fabricmanager",
    ),
    Detector(
        "nv-fabricmanager-version",
        anchor=r"^\s*(?i:Fabric\s*Manager\s+version\s+is)\b",
        command=r"\bnv-fabricmanager\s+(?:--version|-v)\b",
    ),
    Detector(
        "fabricmanager-log",
        anchor=(
            r"^(?:.*?\bnv-fabricmanager\[\d+\]:\s*)?\[[A-Z][a-z]{2} \d{1,2} \d{4} "
            r"\d\d:\d\d:\d\d\]\s*\[(?:INFO|ERROR|WARNING|WARN|FATAL|DEBUG|CRITICAL)\]"
        ),
        command=(r"fabricmanager\.log|\bjournalctl\b.*-u\s*nvidia-fabricmanager"),
        wraps=True,
    ),
    Detector(
        "mountstats",
        anchor=r"^device \S+ mounted on \S+ with fstype \S+",
        member=r"^\s+\S",
        command=r"mountstats\b",
    ),
    Detector(
        "kernel-log",
        anchor=(
            r"\bNVRM:|\bXid\b|\bSXid\b|^\s*\[\s*\+?\d{1,10}\.\d{1,9}\]"
            r"|^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3}\s+\d{1,2} \d\d:\d\d:\d\d \d{4}\]"
            r"|\bkernel:\s|^\S+:\s+kern\s*:\s*\w+\s*:|^kern\s*:\s*\w+\s*:"
            r"|^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[.,]\d+(?:Z|[+-]\d\d:?\d\d)\s"
            r"|invoked oom-killer|Out of memory:|oom-kill:|oom_reaper:|\bAER:|PCIe Bus Error"
            r"|\bnvidia-nvswitch\d*:|\bnvidia-peermem\b|\bmlx5_core\b|\bpcieport\b"
        ),
        member=r"^\S{3,5}\s+\d{1,2} \d\d:\d\d:\d\d \S+ \S+?(?:\[\d+\])?:",
        command=r"\b(?:dmesg|journalctl)\b|/var/log/(?:syslog|messages|kern)",
        wraps=True,
        # lspci's indented "Kernel driver in use: pcieport" / "nvidia" is not a log line,
        # nor ethtool -i's "driver: mlx5_core"
        yields_to=("lspci", "ethtool-i"),
    ),
    # Last: an error a job, nvidia-smi, docker or a plugin printed (the signature table's
    # longer keys); it never interrupts a segment of the formats above.
    Detector(
        "error-text",
        anchor=ERROR_TEXT_ANCHOR,
        member=(
            r"^\s+\S|^Traceback |^\w+(?:\.\w+)*(?:Error|Exception|Warning):"
            r"|^(?:Start-Date|Commandline|Requested-By|Install|Upgrade|Remove|End-Date):"
            r"|(?i:\berror\b)"
        ),
        yields_to=(
            "docker-run-nvidia-smi",
            "nvidia-smi",
            "nvidia-smi-q",
            "nvidia-smi-q-xml",
            "dcgmi-diag",
            "kernel-log",
            "kubectl-describe-pod",
            "kubectl-describe-node",
            "kubectl-events",
            "systemctl-fabricmanager",
            "fabricmanager-log",
            "lspci",  # "Kernel modules: nvidiafb, nouveau, ..." lists modules, not an error
        ),
        wraps=True,
    ),
)


DETECT_CHARS = 1024


@dataclass
class Segment:
    """Lines ``[first, end)`` (0-based) read by one parser."""

    parser: str
    first: int
    end: int


@dataclass
class Recognised:
    segments: list[Segment] = field(default_factory=list)
    unrecognised: list[tuple[int, int]] = field(default_factory=list)  # [first, end)


@dataclass(frozen=True)
class _Compiled:
    det: Detector
    anchor: re.Pattern[str]
    member: re.Pattern[str]
    command: re.Pattern[str] | None


@cache
def _table() -> tuple[tuple[_Compiled, ...], re.Pattern[str], dict[str, int]]:
    rows = []
    for d in DETECTORS:
        anchor = re.compile(d.anchor)
        member = re.compile(f"{d.member}|{d.anchor}" if d.member else d.anchor)
        rows.append(_Compiled(d, anchor, member, re.compile(d.command) if d.command else None))
    combined = re.compile("|".join(f"(?P<d{i}>{d.anchor})" for i, d in enumerate(DETECTORS)))
    return tuple(rows), combined, {d.parser: i for i, d in enumerate(DETECTORS)}


def known_kinds() -> list[str]:
    return [d.parser for d in DETECTORS]


def keeps_grep_prefix(parser: str) -> bool:
    _, _, index = _table()
    return parser in index and DETECTORS[index[parser]].grep_prefix


def kind_for_command(command: str | None) -> str | None:
    """The parser whose output a shell command prints, from the detectors' ``command``."""
    if not command:
        return None
    rows, _, _ = _table()
    for row in rows:
        if row.command is not None and row.command.search(command):
            return row.det.parser
    return None


def _anchor_kind(line: str, cur: _Compiled | None) -> _Compiled | None:
    """The first row whose anchor is in ``line`` (one combined search; the rows before
    the one it found are checked alone, since they may match further right)."""
    rows, combined, _ = _table()
    m = combined.search(line)
    if m is None:
        return None
    last = int((m.lastgroup or "d0")[1:])
    for i in range(last + 1):
        row = rows[i]
        if i != last and not row.anchor.search(line):
            continue
        if cur is not None and cur.det.parser in row.det.yields_to and cur.member.search(line):
            continue
        return row
    return None


def recognise(lines: list[str], first: int, end: int, hint: str | None = None) -> Recognised:
    """Cut ``lines[first:end]`` into segments of one kind each; what no detector claims
    is returned as unrecognised ranges (never silently dropped)."""
    rows, _, index = _table()
    hint_row = rows[index[hint]] if hint in index else None
    out = Recognised()
    cur: _Compiled | None = None
    seg: Segment | None = None
    pending: int | None = None  # first unclaimed line since the last claimed one
    in_para = False  # the previous line was claimed and no blank line followed

    for i in range(first, end):
        line = lines[i][:DETECT_CHARS]  # what proves a format sits at a line's start
        if not line.strip():
            in_para = False
            continue
        if cur is not None and cur.anchor.search(line):
            row: _Compiled | None = cur
        elif cur is None and hint_row is not None and hint_row.member.search(line):
            row = hint_row  # the prompt said which command printed this
        else:
            row = _anchor_kind(line, cur)
        if row is not None and row is not cur:
            start = i
            if pending is not None:
                j = i - 1
                while j >= pending and (
                    not lines[j].strip() or row.member.search(lines[j][:DETECT_CHARS])
                ):
                    j -= 1
                if any(lines[k].strip() for k in range(pending, j + 1)):
                    out.unrecognised.append(_trim(lines, pending, j + 1))
                start = next((k for k in range(j + 1, i) if lines[k].strip()), i)
            cur, seg, pending, in_para = row, Segment(row.det.parser, start, i + 1), None, True
            out.segments.append(seg)
            continue
        if (
            cur is not None
            and seg is not None
            and (row is cur or cur.member.search(line) or (in_para and cur.det.wraps))
        ):
            seg.end, pending, in_para = i + 1, None, True
            continue
        if pending is None:
            pending = i
    if pending is not None:
        out.unrecognised.append(_trim(lines, pending, end))
    if not out.segments and hint_row is not None and out.unrecognised:
        # the command says what this is, and no detector knows better: the parser decides
        a, b = out.unrecognised[0][0], out.unrecognised[-1][1]
        out.segments, out.unrecognised = [Segment(hint_row.det.parser, a, b)], []
    return out


def _trim(lines: list[str], a: int, b: int) -> tuple[int, int]:
    while a < b and not lines[a].strip():
        a += 1
    while b > a and not lines[b - 1].strip():
        b -= 1
    return a, b
