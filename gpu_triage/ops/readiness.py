"""Readiness: the acceptance checks that put a node into service, as one pass/fail report.

A run evaluates the rulebook on the node (or on a snapshot), runs the diagnostics its
profile names (``dcgmi diag -r N -j`` by default, where DCGM is installed) and watches the
kernel log and the ECC counters across them: an Xid, a PCIe AER error or a new
uncorrectable ECC error logged while the diagnostic ran fails the node whatever the
diagnostic said. It runs only the commands the profile lists, and lists them in the report.

Verdicts and exit codes (the run contract): pass 0, fail 2, could not check 3 (the GPUs
could not be read, or a diagnostic the profile requires could not run).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.registry import get_parser
from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.evaluate import evaluate
from gpu_triage.engine.findings import FindingsDocument
from gpu_triage.io.commands import CommandResult, run_command
from gpu_triage.model.facts import Facts, SiteInventory
from gpu_triage.model.snapshot import Snapshot

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
EXIT = {"pass": 0, "fail": 2, "could_not_check": 3}


class ProfileCommand(BaseModel):
    model_config = ConfigDict(extra="forbid")
    argv: list[str] = Field(min_length=1, description="the command, never run through a shell")
    parser: Literal["dcgmi-diag"] = "dcgmi-diag"
    timeout_s: float = Field(default=1800.0, gt=0, le=86400)
    required: bool = Field(
        default=False, description="the node cannot pass when this command cannot run"
    )


class Profile(BaseModel):
    """What a readiness run checks; a site's profile file replaces the default."""

    model_config = ConfigDict(extra="forbid")
    name: str = "default"
    fail_on: Literal["warning", "critical"] = Field(
        default="warning", description="findings at or above this severity fail the node"
    )
    stages: list[str] = Field(
        # FD3 holds link width, NVLink and fabric state (the guide's scaling stage): a node
        # whose links are down or downtrained is not ready either.
        default_factory=lambda: ["hardware", "FD3", "readiness"],
        description="stages of the rules whose findings count (others are reported only)",
    )
    commands: list[ProfileCommand] = Field(default_factory=list)
    burn_in: bool = Field(
        default=False,
        description=(
            "the node is in burn-in (site.burn_in): the diagnostics must cover compute, "
            "memory bandwidth, interconnect and thermal/power stress (fleet/F2)"
        ),
    )


BURN_IN_LEVEL = 3  # dcgmi diag -r 3: deployment, PCIe, memory, stress, power, bandwidth


def default_profile(
    level: int | None = None,
    have: Callable[[str], str | None] = shutil.which,
    *,
    burn_in: bool = False,
) -> Profile:
    """Run the DCGM diagnostic at ``level`` (1, or 3 in burn-in) where dcgmi is installed;
    nothing else."""
    if level is None:
        level = BURN_IN_LEVEL if burn_in else 1
    commands = []
    if have("dcgmi"):
        commands.append(
            ProfileCommand(
                argv=["dcgmi", "diag", "-r", str(level), "-j"],
                timeout_s=600 * level,
                required=burn_in,
            )
        )
    return Profile(name="burn-in" if burn_in else "default", commands=commands, burn_in=burn_in)


def apply_context(facts: Facts, profile: Profile, site: SiteInventory | None = None) -> None:
    """The site's inventory (``--site``) and the profile's burn-in flag on the judged facts."""
    if site is not None:
        facts.site = site.model_copy(deep=True)
    if profile.burn_in:
        if facts.site is None:
            facts.site = SiteInventory(source="readiness --burn-in")
        facts.site.burn_in = True


def diag_level(argv: list[str]) -> int | None:
    """The level of a ``dcgmi diag -r N`` command line (``-r 3``, ``-r3``, ``--run 3``);
    None for a named test list (``-r pcie,memory``) or none given."""
    for i, word in enumerate(argv):
        value: str | None = None
        if word in ("-r", "--run") and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith("--run="):
            value = word.split("=", 1)[1]
        elif word.startswith("-r") and len(word) > 2:
            value = word[2:]
        if value is not None:
            return int(value) if value.isdigit() and 1 <= int(value) <= 4 else None
    return None


def load_profile(path: Path) -> Profile:
    from gpu_triage.io.yamlio import YamlError, load_one

    try:
        data = load_one(path.read_text(encoding="utf-8"), str(path))
        return Profile.model_validate(data)
    except (OSError, UnicodeDecodeError, YamlError) as exc:
        raise ValueError(f"{path}: cannot read the profile: {exc}") from None
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(x) for x in e["loc"])
        raise ValueError(f"{path}: {loc}: {e['msg']}") from None


class CommandRun(BaseModel):
    argv: list[str]
    status: str = Field(description="ok, exit N, not found, timed out, parse error, ...")
    duration_s: float = 0.0
    results: int = Field(default=0, description="facts the output gave (diagnostic results)")
    error: str = ""


class Reason(BaseModel):
    rule_id: str
    severity: str
    title: str
    subject: str


class ReadinessReport(BaseModel):
    hostname: str = ""
    generated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    profile: str
    verdict: Literal["pass", "fail", "could_not_check"]
    exit_code: int
    reasons: list[Reason] = Field(default_factory=list, description="why the node fails")
    not_checked: list[str] = Field(default_factory=list, description="what could not be checked")
    commands: list[CommandRun] = Field(default_factory=list, description="every command run")
    watch: list[str] = Field(
        default_factory=list, description="errors logged while the diagnostics ran"
    )
    findings: int = 0
    snapshot_source: str = ""


@dataclass
class Watch:
    """Kernel-log events and uncorrectable ECC counts before the diagnostics."""

    xids: set[str] = field(default_factory=set)
    aers: set[str] = field(default_factory=set)
    ecc: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, facts: Facts) -> Watch:
        return cls(
            {_event_key(x) for x in facts.xids},
            {_event_key(a) for a in facts.aers},
            {
                g.pci_bus_id: g.ecc_volatile_uncorrected
                for g in facts.gpus
                if g.pci_bus_id and g.ecc_volatile_uncorrected is not None
            },
        )

    def new_since(self, facts: Facts) -> list[str]:
        out = [
            f"Xid {x.code} on {x.pci_bus_id or 'an unknown GPU'} during the diagnostics"
            for x in facts.xids
            if _event_key(x) not in self.xids
        ]
        out += [
            f"PCIe AER {a.severity or 'error'} on {a.pci_bus_id or 'a device'} "
            "during the diagnostics"
            for a in facts.aers
            if _event_key(a) not in self.aers
        ]
        for g in facts.gpus:
            before = self.ecc.get(g.pci_bus_id or "")
            now = g.ecc_volatile_uncorrected
            if before is not None and now is not None and now > before:
                out.append(f"{now - before} new uncorrectable ECC error(s) on {g.pci_bus_id}")
        return out


def _event_key(ev: Any) -> str:
    return f"{ev.pci_bus_id}|{getattr(ev, 'code', '')}|{ev.time_text or ev.monotonic_s or ev.raw}"


def run_commands(
    profile: Profile,
    facts: Facts,
    runner: Callable[[list[str], float], CommandResult] = run_command,
) -> tuple[list[CommandRun], list[str]]:
    """Run the profile's commands, add what they print to ``facts``; (runs, not checked)."""
    runs: list[CommandRun] = []
    not_checked: list[str] = []
    for cmd in profile.commands:
        res = runner(cmd.argv, cmd.timeout_s)
        run = CommandRun(argv=cmd.argv, status=res.status, duration_s=round(res.duration_s, 3))
        if res.ok or (res.returncode not in (None, 0) and res.stdout.strip()):
            # dcgmi diag exits non-zero when a test fails: its output is still the result
            try:
                got = get_parser(cmd.parser)(res.stdout, " ".join(cmd.argv))
                level = diag_level(cmd.argv)
                for d in got.diags:
                    if d.run_level is None and level is not None:
                        d.run_level = level
                facts.diags.extend(got.diags)
                run.results = len(got.diags)
            except ParseError as exc:
                run.status, run.error = "parse error", str(exc)
        else:
            run.error = res.output.strip()[-500:]
        if run.results == 0 and cmd.required:
            not_checked.append(f"{' '.join(cmd.argv)}: {run.status} {run.error}".strip())
        runs.append(run)
    return runs, not_checked


def judge(
    doc: FindingsDocument,
    profile: Profile,
    facts: Facts,
    commands: list[CommandRun],
    not_checked: list[str],
    watch: list[str],
) -> ReadinessReport:
    floor = SEVERITY_RANK[profile.fail_on]
    reasons = [
        Reason(rule_id=f.rule_id, severity=f.severity.value, title=f.title, subject=f.subject)
        for f in doc.findings
        if SEVERITY_RANK[f.severity.value] >= floor and f.stage.value in profile.stages
    ]
    not_checked = list(not_checked)
    gpu_collectors = [c for c in doc.collectors if "gpu" in c.kinds or c.name == "nvml"]
    if not facts.gpus:
        states = ", ".join(f"{c.name} {c.state}" for c in gpu_collectors) or "no GPU facts"
        not_checked.append(f"the GPUs could not be read ({states})")
    if reasons or watch:
        verdict: Literal["pass", "fail", "could_not_check"] = "fail"
    elif not_checked:
        verdict = "could_not_check"
    else:
        verdict = "pass"
    return ReadinessReport(
        hostname=doc.hostname,
        profile=profile.name,
        verdict=verdict,
        exit_code=EXIT[verdict],
        reasons=reasons,
        not_checked=not_checked,
        commands=commands,
        watch=watch,
        findings=len(doc.findings),
        snapshot_source=doc.snapshot_source,
    )


def check_snapshot(
    snap: Snapshot,
    source: str,
    book: Rulebook,
    profile: Profile,
    engine: str,
    site: SiteInventory | None = None,
) -> ReadinessReport:
    """Readiness of a stored snapshot: nothing is run, the snapshot's facts decide."""
    apply_context(snap.facts, profile, site)
    doc = evaluate(snap, book, engine=engine, source=source)
    return judge(doc, profile, snap.facts, [], [], [])


def check_live(
    collect: Callable[[], Snapshot],
    book: Rulebook,
    profile: Profile,
    engine: str,
    runner: Callable[[list[str], float], CommandResult] = run_command,
    site: SiteInventory | None = None,
) -> ReadinessReport:
    """Collect, run the profile's diagnostics, collect again; judge the second snapshot
    with the diagnostic results, and whatever the kernel log and ECC counters added."""
    before = collect()
    watch = Watch.of(before.facts)
    commands: list[CommandRun] = []
    not_checked: list[str] = []
    if profile.commands:
        after_facts = Facts()
        commands, not_checked = run_commands(profile, after_facts, runner)
        snap = collect()
        snap.facts.diags.extend(after_facts.diags)
        added = watch.new_since(snap.facts)
    else:
        snap, added = before, []
    apply_context(snap.facts, profile, site)
    doc = evaluate(snap, book, engine=engine, source="live")
    return judge(doc, profile, snap.facts, commands, not_checked, added)


def report_markdown(rep: ReadinessReport) -> str:
    from gpu_triage.io.escape import md_text

    lines = [
        f"# Readiness of {md_text(rep.hostname or 'this node')}: {rep.verdict.upper()}",
        "",
        f"Profile `{md_text(rep.profile)}`, exit code {rep.exit_code}, "
        f"{rep.findings} finding(s) evaluated.",
        "",
    ]
    if rep.reasons:
        lines += ["## Why it fails", ""]
        lines += [
            f"- **{r.severity}** `{r.rule_id}`: {md_text(r.title)} ({md_text(r.subject)})"
            for r in rep.reasons
        ]
        lines.append("")
    if rep.watch:
        lines += ["## Logged while the diagnostics ran", ""]
        lines += [f"- {md_text(w)}" for w in rep.watch] + [""]
    if rep.not_checked:
        lines += ["## Could not check", ""]
        lines += [f"- {md_text(n)}" for n in rep.not_checked] + [""]
    lines += ["## Commands run", ""]
    lines += [
        f"- `{md_text(' '.join(c.argv))}`: {md_text(c.status)}, {c.results} result(s)"
        for c in rep.commands
    ] or ["- none"]
    return "\n".join(lines) + "\n"
