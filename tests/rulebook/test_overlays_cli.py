"""Site directories are linted and tested against the packaged rulebook they refer to, and
what an overlay changes is visible: `rules list`, `rules docs`, the report's header.
The README's "Writing rules" example is one of them and must pass."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_triage", *args], capture_output=True, text=True, timeout=300
    )


def readme_site_dir(tmp_path: Path) -> Path:
    """The README's site rule and overlay, written where a site would keep them."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Writing rules") :]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    rule = next(b for b in blocks if b.startswith("id: "))
    overlay = next(b for b in blocks if b.startswith("overlay: "))
    site = tmp_path / "site-rules"
    site.mkdir(mode=0o755)
    (site / "hall-b.yaml").write_text(rule, encoding="utf-8")
    (site / "overlay.yaml").write_text(overlay, encoding="utf-8")
    for p in site.iterdir():
        p.chmod(0o644)
    return site


def test_readme_example_passes_lint_and_test(tmp_path: Path) -> None:
    site = readme_site_dir(tmp_path)
    lint = cli("rules", "lint", str(site))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "0 error(s)" in lint.stderr
    test = cli("rules", "test", str(site))
    assert test.returncode == 0, test.stdout + test.stderr
    passed = int(re.search(r"(\d+) passed", test.stdout).group(1))  # type: ignore[union-attr]
    assert passed >= 2  # the site rule's two cases, and the changed packaged rules' cases


def test_without_the_packaged_rulebook_an_overlay_names_unknown_rules(tmp_path: Path) -> None:
    site = readme_site_dir(tmp_path)
    lint = cli("rules", "lint", "--no-builtin", str(site))
    assert lint.returncode == 1
    assert "unknown rule 'pcie-link-downgraded'" in lint.stdout + lint.stderr


def test_lint_still_reports_a_wrong_overlay_and_only_the_site_files(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    bad = site / "overlay.yaml"
    bad.write_text(
        "overlay: typo\nseverity: {pcie-link-downgradd: critical}\n"
        "params: {input-bound-pipeline.iowait_pct: 500}\n",
        encoding="utf-8",
    )
    lint = cli("rules", "lint", str(site))
    out = lint.stdout + lint.stderr
    assert lint.returncode == 1
    assert "unknown rule 'pcie-link-downgradd'" in out
    assert "iowait_pct" in out  # out of its bounds
    problems = [line for line in lint.stdout.splitlines() if ": error:" in line]
    assert problems and all(line.startswith(str(bad)) for line in problems)


def test_a_failing_site_rule_case_fails_rules_test(tmp_path: Path) -> None:
    site = readme_site_dir(tmp_path)
    rule = site / "hall-b.yaml"
    rule.write_text(
        rule.read_text(encoding="utf-8").replace(
            "temperature_gpu_c: 70}]}\n    expect: {fires: false}",
            "temperature_gpu_c: 90}]}\n    expect: {fires: false}",
        ),
        encoding="utf-8",
    )
    test = cli("rules", "test", str(site))
    assert test.returncode == 1
    assert "FAIL site-gpu-hotter-than-hall-allows" in test.stdout


def test_list_docs_and_report_show_the_overlay(tmp_path: Path) -> None:
    site = readme_site_dir(tmp_path)
    listed = cli("rules", "list", "--rules", str(site)).stdout
    rows = {line.split()[0]: line for line in listed.splitlines() if line.strip()}
    assert "[overlay dc-east]" in rows["pcie-link-downgraded"]
    assert rows["pcie-link-downgraded"].split()[1] == "critical"
    assert rows["gpu-compute-bound"].split()[1] == "disabled"
    assert "not useful on inference nodes" in rows["gpu-compute-bound"]
    assert "site-gpu-hotter-than-hall-allows" in rows
    docs = cli("rules", "docs", "--rules", str(site)).stdout
    assert "Site overlays applied: `dc-east`." in docs
    assert "`iowait_pct` = 30 % (packaged default 20)" in docs
    assert "(host.cpu_iowait_pct > 30)" in docs  # When and Params agree
    assert "critical (packaged: warning)" in docs
    report = cli("run", "--demo", "incident", "--rules", str(site), "--format", "markdown").stdout
    header = next(line for line in report.splitlines() if line.startswith("- Rulebook:"))
    assert "overlays `dc-east`" in header and "`gpu-compute-bound`" in header
