"""The file-writing model (gpu_triage.io.files), and the attacks of issue 13 against it.

Attack tests run as root with a second, unprivileged account: a forked child that drops
to uid/gid 65534 (``nobody``) plants links and locks; root then runs gpu-triage, and the
victim files must be unchanged. They skip when not root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpu_triage.io import files
from tests.conftest import ROOT

DEMO = ROOT / "gpu_triage" / "data" / "demo-incident.json"
NOBODY = 65534
IS_ROOT = os.geteuid() == 0
root_only = pytest.mark.skipif(not IS_ROOT, reason="needs root (attacks a root run)")


def cli(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_triage", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def _drop() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def as_nobody(fn: Callable[[], None]) -> None:
    """Run ``fn`` in a forked child as uid/gid 65534; fail the test if it fails."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            _drop()
            fn()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged child failed"


@contextlib.contextmanager
def held_by_nobody(fn: Callable[[], object]) -> Iterator[None]:
    """A child as uid 65534 runs ``fn`` (which may take a lock) and keeps running,
    holding whatever it opened, until the block ends."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(ready_r)
            os.close(done_w)
            _drop()
            keep = fn()  # noqa: F841 - held open until the parent is done
            os.write(ready_w, b"1")
            os.read(done_r, 1)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(ready_w)
    os.close(done_r)
    try:
        assert os.read(ready_r, 1) == b"1", "the unprivileged child failed"
        yield
    finally:
        os.close(done_w)
        os.close(ready_r)
        os.waitpid(pid, 0)


@pytest.fixture
def arena() -> Iterator[Path]:
    """A directory tree the unprivileged account can reach (tmp_path is root's 0700)."""
    base = Path(tempfile.mkdtemp(prefix="gpu-triage-attack-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def victim(arena: Path, name: str = "victim", text: str = "precious\n") -> Path:
    """A root-owned file in a directory only root can write."""
    vault = arena / "vault"
    vault.mkdir(mode=0o755, exist_ok=True)
    p = vault / name
    p.write_text(text)
    p.chmod(0o644)
    return p


def shared_dir(arena: Path, kind: str) -> Path:
    """``owned``: a directory the other account owns (0755); ``sticky``: a
    world-writable sticky directory owned by root (like /tmp)."""
    d = arena / kind
    d.mkdir()
    if kind == "owned":
        os.chown(d, NOBODY, NOBODY)
        d.chmod(0o755)
    else:
        d.chmod(0o1777)
    return d


def unchanged(p: Path, text: str = "precious\n") -> bool:
    st = p.lstat()
    return stat.S_ISREG(st.st_mode) and st.st_uid == 0 and p.read_text() == text


# --------------------------------------------------------------------------- targets


def _fifo_reader(path: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(path, "rb") as fh:
            into.append(fh.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def test_a_fifo_target_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "findings"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _fifo_reader(fifo, got)
    r = cli("run", "--demo", "--out", str(fifo))
    reader.join(30)
    assert r.returncode == 2, r.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert json.loads(got[0])["findings"]
    assert sorted(os.listdir(tmp_path)) == ["findings"]  # no lock, no state beside it


def test_dash_is_stdout_with_no_files(tmp_path: Path) -> None:
    r = cli("run", "--demo", "--format", "jsonl", "--out", "-", cwd=tmp_path)
    assert r.returncode == 2 and json.loads(r.stdout)["v"] == 1
    assert os.listdir(tmp_path) == []


@root_only
def test_an_own_character_device_is_still_one_after_run(tmp_path: Path) -> None:
    dev = tmp_path / "null"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # our own /dev/null, in tmp_path
    dev.chmod(0o666)
    for fmt in ("json", "jsonl", "markdown", "prometheus"):
        r = cli("run", "--demo", "--format", fmt, "--out", str(dev), "--also", f"json:{dev}")
        assert r.returncode == 2, r.stderr
        st = dev.lstat()
        assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
        assert stat.S_IMODE(st.st_mode) == 0o666
    assert os.listdir(tmp_path) == ["null"]  # no .null.lock, no .null.state.json


def test_a_symlinked_output_is_refused_not_replaced(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("keep\n")
    (tmp_path / "out.json").symlink_to(real)
    r = cli("run", "--demo", "--out", str(tmp_path / "out.json"))
    assert r.returncode == 3 and "symbolic link" in r.stderr
    assert real.read_text() == "keep\n" and (tmp_path / "out.json").is_symlink()


def test_block_devices_and_directories_are_refused(tmp_path: Path) -> None:
    with pytest.raises(files.UnsafeFile, match="directory"):
        files.write_atomic(tmp_path, "x")


# --------------------------------------------------------------------------- modes, JSONL


def test_outputs_are_0644_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        out = tmp_path / "f.json"
        prom = tmp_path / "g.prom"
        r = cli("run", "--demo", "--out", str(out), "--also", f"prometheus:{prom}")
        assert r.returncode == 2, r.stderr
        assert stat.S_IMODE(out.stat().st_mode) == 0o644
        assert stat.S_IMODE(prom.stat().st_mode) == 0o644
        hist = tmp_path / "h.jsonl"
        r = cli("run", "--demo", "--format", "jsonl", "--out", str(hist), "--out-mode", "0640")
        assert stat.S_IMODE(hist.stat().st_mode) == 0o640
    finally:
        os.umask(old)
    assert cli("run", "--demo", "--out-mode", "999").returncode == 64  # usage (the contract)


@root_only
def test_the_textfile_is_readable_by_nobody(arena: Path) -> None:
    prom = arena / "gpu_triage.prom"
    old = os.umask(0o077)
    try:
        assert cli("run", "--demo", "--format", "prometheus", "--out", str(prom)).returncode == 2
    finally:
        os.umask(old)
    as_nobody(lambda: None if "# HELP" in prom.read_text() else sys.exit(1))


def test_jsonl_after_a_partial_line_starts_a_new_one(tmp_path: Path) -> None:
    hist = tmp_path / "history.jsonl"
    hist.write_text('{"v":1,"host":"a"}\n{"v":1,"ho')  # a writer killed mid-line
    assert cli("run", "--demo", "--format", "jsonl", "--out", str(hist)).returncode == 2
    lines = hist.read_text().splitlines()
    assert lines[1] == '{"v":1,"ho'
    assert json.loads(lines[2])["v"] == 1 and len(lines) == 3


def test_append_line_module_level(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    files.append_line(p, "a")
    p.write_bytes(p.read_bytes() + b"torn")
    files.append_line(p, "b\n")
    assert p.read_text() == "a\ntorn\nb\n"


# --------------------------------------------------------------------------- locks


def test_a_held_lock_times_out_naming_it_and_state_waits_too(tmp_path: Path) -> None:
    import fcntl

    out = tmp_path / "f.json"
    assert cli("run", "--demo", "--out", str(out)).returncode == 2
    state = tmp_path / ".f.json.state.json"
    before = state.read_bytes()
    lock = files.lock_path(out)
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        t0 = time.monotonic()
        r = cli("run", "--demo", "--out", str(out), "--lock-timeout", "0.5")
        took = time.monotonic() - t0
    finally:
        os.close(fd)
    assert r.returncode == 3 and str(lock) in r.stderr and "timed out" in r.stderr
    assert took < 30
    assert state.read_bytes() == before  # the state is written under the same lock


def test_two_outputs_in_either_order_do_not_deadlock(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpu_triage",
                "run",
                "--demo",
                "--out",
                str(x),
                "--also",
                f"json:{y}",
                "--lock-timeout",
                "60",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for x, y in ((a, b), (b, a), (a, b), (b, a))
    ]
    assert [p.wait(120) for p in procs] == [2, 2, 2, 2]
    json.loads(a.read_text()), json.loads(b.read_text())


# --------------------------------------------------------------------------- attacks


@root_only
@pytest.mark.parametrize("kind", ["owned", "sticky"])
def test_symlink_at_the_lock_name_creates_nothing(arena: Path, kind: str) -> None:
    d = shared_dir(arena, kind)
    target = victim(arena)
    nologin = arena / "vault" / "nologin"
    as_nobody(lambda: os.symlink(nologin, d / ".findings.json.lock"))
    as_nobody(lambda: os.symlink(target, d / ".other.json.lock"))
    for name in ("findings.json", "other.json"):
        r = cli("run", "--demo", "--out", str(d / name))
        assert r.returncode == 3, r.stderr
        assert f".{name}.lock" in r.stderr and "symbolic link" in r.stderr
    assert not nologin.exists()
    assert unchanged(target)


@root_only
@pytest.mark.parametrize("kind", ["owned", "sticky"])
def test_symlink_at_the_jsonl_path_appends_nothing(arena: Path, kind: str) -> None:
    d = shared_dir(arena, kind)
    keys = victim(arena, "authorized_keys", "ssh-ed25519 AAAA root@x\n")
    as_nobody(lambda: os.symlink(keys, d / "history.jsonl"))
    r = cli("run", "--demo", "--format", "jsonl", "--out", str(d / "history.jsonl"))
    assert r.returncode == 3 and "history.jsonl" in r.stderr, r.stderr
    r = cli("run", "--demo", "--also", f"jsonl:{d / 'history.jsonl'}", "--out", str(arena / "o"))
    assert r.returncode == 3, r.stderr
    assert unchanged(keys, "ssh-ed25519 AAAA root@x\n")


@root_only
def test_a_hard_link_at_the_jsonl_path_is_refused(arena: Path) -> None:
    # fs.protected_hardlinks stops nobody making this link; root's own mistake is refused too.
    keys = victim(arena, "authorized_keys", "key\n")
    d = arena / "logs"
    d.mkdir()
    os.link(keys, d / "history.jsonl")
    r = cli("run", "--demo", "--format", "jsonl", "--out", str(d / "history.jsonl"))
    assert r.returncode == 3 and "hard links" in r.stderr
    assert unchanged(keys, "key\n")


@root_only
def test_symlinks_at_the_output_and_state_names_change_nothing(arena: Path) -> None:
    d = shared_dir(arena, "sticky")
    target = victim(arena)
    state_victim = victim(arena, "shadow", "root:x:0\n")
    as_nobody(lambda: os.symlink(target, d / "findings.json"))
    as_nobody(lambda: os.symlink(state_victim, d / ".mine.json.state.json"))
    r = cli("run", "--demo", "--out", str(d / "findings.json"))
    assert r.returncode == 3 and "symbolic link" in r.stderr
    r = cli("run", "--demo", "--out", str(d / "mine.json"))
    assert r.returncode == 3 and ".mine.json.state.json" in r.stderr, r.stderr
    assert not (d / "mine.json").exists()
    assert unchanged(target) and unchanged(state_victim, "root:x:0\n")


@root_only
def test_a_lock_held_by_another_account_fails_fast(arena: Path) -> None:
    import fcntl

    d = shared_dir(arena, "sticky")
    lock = d / ".findings.json.lock"

    def hold() -> int:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    with held_by_nobody(hold):
        t0 = time.monotonic()
        r = cli("run", "--demo", "--out", str(d / "findings.json"), "--lock-timeout", "600")
        took = time.monotonic() - t0
    assert r.returncode == 3 and str(lock) in r.stderr and "uid 65534" in r.stderr
    assert took < 60  # refused at once, not after the 600 s timeout
    assert not (d / "findings.json").exists()


@root_only
def test_a_world_writable_directory_that_is_not_sticky_is_refused(arena: Path) -> None:
    d = arena / "open"
    d.mkdir()
    d.chmod(0o777)
    r = cli("run", "--demo", "--out", str(d / "findings.json"))
    assert r.returncode == 3 and "not sticky" in r.stderr and str(d) in r.stderr
    assert os.listdir(d) == []
    d.chmod(0o1777)  # sticky: nobody can rename or delete root's files in it
    assert cli("run", "--demo", "--out", str(d / "findings.json")).returncode == 2


@root_only
def test_a_file_of_another_account_is_not_appended_to(arena: Path) -> None:
    d = shared_dir(arena, "sticky")
    hist = d / "history.jsonl"

    def plant() -> None:
        hist.write_text("theirs\n")

    as_nobody(plant)
    r = cli("run", "--demo", "--format", "jsonl", "--out", str(hist))
    assert r.returncode == 3 and "owned by uid 65534" in r.stderr
    assert hist.read_text() == "theirs\n"
