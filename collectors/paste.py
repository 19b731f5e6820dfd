"""A pasted terminal session, cut into the blocks each command printed.

Responders paste what their terminal showed: prompts (``$ nvidia-smi``,
``root@node:~# dmesg | grep -i xid``, ``[user@host ~]$ ...``, ``PS C:\\> ...``),
colour codes, CRLF line ends, ``grep -n`` / ``grep -H`` prefixes. This module only
cleans the text and finds the prompts; which parser reads each block is decided in
:mod:`gpu_triage.collectors.recognise`.

Line numbers are kept: cleaning never adds or removes a line, so a block's lines are
the file's lines (1-based in every message).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# CSI (colours, cursor moves), OSC (window titles) and two-character escapes.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?|[@-Z\\-_])")
# Characters str.splitlines() would treat as line breaks: they must not shift numbering.
# str.translate with a table runs per character in Python's slow path (2 s for 12 MB);
# one character-class substitution took 0.25 s for the same input.
_ODD_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")

# Commands that make a bare '#', '>' or '%' prompt believable (a '#' line is usually
# a comment otherwise). '$' prompts and user@host prompts need no such proof.
SHELL_WORDS = frozenset(
    {
        "sudo",
        "cat",
        "grep",
        "egrep",
        "zgrep",
        "head",
        "tail",
        "less",
        "more",
        "watch",
        "dmesg",
        "journalctl",
        "nvidia-smi",
        "nvidia-bug-report.sh",
        "dcgmi",
        "lspci",
        "ibstat",
        "ibv_devinfo",
        "ibstatus",
        "mpstat",
        "iostat",
        "sar",
        "vmstat",
        "free",
        "top",
        "uname",
        "kubectl",
        "docker",
        "podman",
        "crictl",
        "ctr",
        "systemctl",
        "modinfo",
        "lsmod",
        "modprobe",
        "ls",
        "echo",
        "python",
        "python3",
        "iperf3",
        "fio",
        "sinfo",
        "scontrol",
        "squeue",
        "srun",
        "for",
        "while",
        "env",
        "time",
        "nvidia-container-cli",
        "numactl",
        "lscpu",
        "ip",
        "ethtool",
        "mst",
        "mlxlink",
    }
)

_PROMPT = re.compile(
    r"""^\s*(?:\([\w.-]{1,64}\)\s*)?              # (venv) / (base)
    (?P<prompt>
        [\w.-]{1,64}@[\w.-]{1,253}(?::[^\s$#%]{0,512})?\s{0,2}[$#%]   # user@host:~$
      | \[[\w.-]{1,64}@[\w.-]{1,253}(?:\s[^\]]{0,512})?\][$#]        # [user@host ~]$
      | [\w.-]{1,64}@[\w.-]{1,253}\s[^\s]{1,512}\s[$#%]              # user@host ~ %
      | (?:ba|z|k)?sh-[\d.]{1,10}[$#]                               # bash-5.1$
      | PS(?:\s[^>]{0,512})?>                                       # PS C:\> / PS /root>
      | (?P<bare>[\w.-]{1,253}:[^\s$#]{0,512}\s?[#$]|[$#%>])         # node:~ #, $, #, >
    )
    (?:\s+(?P<cmd>\S.*?))?\s*$""",
    re.X,
)
# grep -n (and -n -C: '12-' for context lines) with one file; grep -H / -n with several.
_GREP_N = re.compile(r"^(\d{1,10})[:-](?!\d)")
_GREP_PATH = re.compile(r"^(/[^\s:]{1,4096}|[\w.-]{1,255}/[^\s:]{1,4096}):(?:\d{1,10}[:-])?")


@dataclass
class Block:
    """Lines ``[first, end)`` (0-based) that one command printed, or the whole file."""

    first: int
    end: int
    command: str | None = None  # the command after the prompt, when there was one
    prompt_line: int | None = None  # 0-based index of the prompt line


def clean_lines(text: str) -> list[str]:
    """The text as a terminal showed it, one entry per line: colour codes gone, CRLF
    and carriage-return overwrites resolved, odd line-break characters blanked."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = _ODD_BREAKS.sub(" ", text)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = []
    for line in lines:
        if "\r" in line:
            line = line.rstrip("\r")
            if "\r" in line:  # a progress line redrawn in place: what stayed visible
                line = line.rsplit("\r", 1)[-1]
        out.append(line)
    return out


def prompt_command(line: str) -> tuple[bool, str | None]:
    """(is a prompt line, the command it runs or None for an empty prompt)."""
    if len(line) > 4096 or not line.strip():
        return False, None
    m = _PROMPT.match(line)
    if m is None:
        return False, None
    cmd = m.group("cmd")
    # '#', '>', '%' and 'host:path #' prompts: believe them only before a known command
    bare = m.group("bare") is not None and m.group("prompt") != "$"
    if bare and (cmd is None or _first_word(cmd) not in SHELL_WORDS):
        return False, None
    return True, cmd


def _first_word(cmd: str) -> str:
    words = cmd.split()
    while words and ("=" in words[0] and not words[0].startswith("=")):
        words = words[1:]  # FOO=bar cmd
    return words[0].rsplit("/", 1)[-1] if words else ""


def split_blocks(lines: list[str]) -> list[Block]:
    """One block per prompt (the output up to the next prompt); text before the first
    prompt, or a file with none, is a block without a command. Empty prompts (the
    trailing ``user@host:~$`` of a paste) end the block before them."""
    blocks: list[Block] = []
    cur = Block(0, 0)
    for i, line in enumerate(lines):
        is_prompt, cmd = prompt_command(line)
        if not is_prompt:
            continue
        cur.end = i
        blocks.append(cur)
        cur = Block(i + 1, i + 1, command=cmd, prompt_line=i)
    cur.end = len(lines)
    blocks.append(cur)
    return [
        b for b in blocks if b.command is not None or any(s.strip() for s in lines[b.first : b.end])
    ]


def strip_grep_prefixes(lines: list[str]) -> tuple[list[str], str | None]:
    """``grep -n`` line numbers, or ``grep -H`` file names, removed when every non-blank
    line carries one (and -n numbers go up): ``(lines, what was removed)``."""
    body = [s for s in lines if s.strip()]
    if not body:
        return lines, None
    last = -1
    numbered = True
    for s in body:
        m = _GREP_N.match(s)
        if m is None or int(m.group(1)) <= last:
            numbered = False
            break
        last = int(m.group(1))
    if numbered:
        return [_GREP_N.sub("", s, count=1) if s.strip() else s for s in lines], "grep -n"
    if all(_GREP_PATH.match(s) for s in body):
        return [_GREP_PATH.sub("", s, count=1) if s.strip() else s for s in lines], "grep -H"
    return lines, None
