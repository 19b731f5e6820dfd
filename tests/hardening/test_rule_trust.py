"""Rule trust as root checks the whole path: the file, its directory and every parent
not writable by others (sticky excepted), symlinks resolved and checked the same way.
Root only (a non-root run trusts what its user can read); attacks use uid 65534."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_triage.collectors.parsers.registry import PARSERS
from gpu_triage.engine.loader import load_paths, trust_problem
from tests.engine.test_lint import GOOD
from tests.hardening.test_file_model import NOBODY, as_nobody, cli

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="rule trust applies to root")


@pytest.fixture
def base() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="gpu-triage-trust-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def rule_in(directory: Path, name: str = "site.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    p = directory / name
    p.write_text(GOOD)
    p.chmod(0o644)
    return p


def refused(path: Path) -> list[str]:
    raw = load_paths([path], include_builtin=False)
    return [d.message for d in raw.diagnostics if "refusing" in d.message]


def test_a_root_owned_file_in_a_trusted_tree_is_accepted(base: Path) -> None:
    f = rule_in(base / "rules")
    assert trust_problem(f) is None and refused(f) == []
    assert load_paths([f], include_builtin=False).rules


def test_a_0644_root_file_in_a_0777_directory_is_refused(base: Path) -> None:
    f = rule_in(base / "open")
    (base / "open").chmod(0o777)
    msgs = refused(f)
    assert msgs and f"directory {base / 'open'} is writable by group or others" in msgs[0]
    r = cli("rules", "list", "--no-builtin", "--rules", str(f))
    assert r.returncode != 0 and str(base / "open") in r.stderr


def test_a_writable_grandparent_is_refused_but_a_sticky_one_is_not(base: Path) -> None:
    f = rule_in(base / "a" / "b" / "c")
    (base / "a").chmod(0o777)
    assert f"directory {base / 'a'}" in (trust_problem(f) or "")
    (base / "a").chmod(0o1777)  # sticky: nobody can rename root's b away
    assert trust_problem(f) is None
    (base / "a").chmod(0o775)
    assert "group or others" in (trust_problem(f) or "")


def test_a_directory_owned_by_another_account_is_refused(base: Path) -> None:
    f = rule_in(base / "theirs")
    os.chown(base / "theirs", NOBODY, NOBODY)
    assert f"owned by uid {NOBODY}" in (trust_problem(f) or "")


def test_a_symlink_to_a_rule_in_an_untrusted_directory_is_refused(base: Path) -> None:
    target = rule_in(base / "open")
    (base / "open").chmod(0o777)
    (base / "rules").mkdir()
    link = base / "rules" / "site.yaml"
    link.symlink_to(target)
    assert str(base / "open") in (trust_problem(link) or "")
    assert refused(base / "rules")  # found by the directory scan, refused the same way


def test_a_symlinked_directory_is_resolved_and_checked(base: Path) -> None:
    rule_in(base / "real")
    (base / "link").symlink_to(base / "real")
    assert trust_problem(base / "link" / "site.yaml") is None
    (base / "real").chmod(0o777)
    assert str(base / "real") in (trust_problem(base / "link" / "site.yaml") or "")


def test_a_link_planted_by_another_account_is_refused(base: Path) -> None:
    target = rule_in(base / "safe")
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    as_nobody(lambda: os.symlink(target, shared / "site.yaml"))
    assert f"symbolic link owned by uid {NOBODY}" in (trust_problem(shared / "site.yaml") or "")


def test_a_rule_file_of_another_account_is_refused(base: Path) -> None:
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o1777)

    def plant() -> None:
        (shared / "evil.yaml").write_text(GOOD)

    as_nobody(plant)
    assert f"owned by uid {NOBODY}" in (trust_problem(shared / "evil.yaml") or "")
    assert refused(shared)
    assert PARSERS  # the lint path uses the same loader
