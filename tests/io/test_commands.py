"""io/commands.py run_streaming on real subprocesses: timeout, cancel, missing, exit codes."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from gpu_triage.io.commands import group_alive, run_streaming

PY = sys.executable


def _run(
    argv: list[str], timeout_s: float = 5.0, **kw: object
) -> tuple[object, list[tuple[float, str]]]:
    seen: list[tuple[float, str]] = []

    async def go() -> object:
        return await run_streaming(
            argv, timeout_s, lambda s: seen.append((time.monotonic(), s)), **kw
        )  # type: ignore[arg-type]

    return asyncio.run(go()), seen


def test_lines_stream_as_they_come_and_stderr_is_merged() -> None:
    code = (
        "import sys, time\n"
        "print('one', flush=True); time.sleep(0.3)\n"
        "print('two', file=sys.stderr, flush=True); time.sleep(0.3); print('three')"
    )
    start = time.monotonic()
    result, seen = _run([PY, "-c", code])
    assert [s for _, s in seen] == ["one", "two", "three"]
    assert seen[0][0] - start < seen[2][0] - start - 0.4  # 'one' arrived well before the end
    assert result.ok and result.status == "ok" and result.output == "one\ntwo\nthree"  # type: ignore[attr-defined]


def test_non_zero_exit_is_reported() -> None:
    result, _ = _run([PY, "-c", "print('bad'); raise SystemExit(4)"])
    assert result.returncode == 4 and not result.ok and result.status == "exit 4"  # type: ignore[attr-defined]
    assert result.output == "bad"  # type: ignore[attr-defined]


def test_timeout_kills_the_command() -> None:
    start = time.monotonic()
    result, seen = _run([PY, "-c", "print('a', flush=True); import time; time.sleep(30)"], 0.5)
    assert time.monotonic() - start < 5
    assert result.timed_out and result.status == "timed out"  # type: ignore[attr-defined]
    assert [s for _, s in seen] == ["a"]
    assert not group_alive(result.pgid)  # type: ignore[attr-defined]


def test_cancel_event_kills_the_whole_group() -> None:
    async def go() -> object:
        cancel = asyncio.Event()
        asyncio.get_running_loop().call_later(0.3, cancel.set)
        # a shell with a background child: both are in the command's process group
        return await run_streaming(
            ["sh", "-c", "sleep 30 & sleep 30"], 10, lambda s: None, cancel=cancel, grace_s=0.5
        )

    result = asyncio.run(go())
    assert result.cancelled and result.status == "cancelled"  # type: ignore[attr-defined]
    assert result.pgid and not group_alive(result.pgid)  # type: ignore[attr-defined]


def test_task_cancellation_kills_the_group_even_if_sigterm_is_ignored() -> None:
    pgid: list[int] = []

    async def go() -> None:
        task = asyncio.ensure_future(
            run_streaming(
                [
                    PY,
                    "-c",
                    "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
                    "print(os.getpgid(0), flush=True); time.sleep(30)",
                ],
                10,
                lambda s: pgid.append(int(s)),
                grace_s=0.2,
            )
        )
        while not pgid:
            await asyncio.sleep(0.02)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return
        raise AssertionError("CancelledError must propagate")

    asyncio.run(go())
    assert pgid and not group_alive(pgid[0])


def test_missing_binary() -> None:
    result, seen = _run(["/nonexistent/gpu-triage-no-such-tool", "-x"])
    assert result.missing and result.status == "not found" and not seen  # type: ignore[attr-defined]
    assert "command not found" in result.error  # type: ignore[attr-defined]


def test_long_lines_are_cut_and_output_is_bounded() -> None:
    code = "print('x' * 100000); print('tail')"
    result, seen = _run([PY, "-c", code], max_line_chars=100, max_output_chars=120)
    assert seen[0][1].startswith("x" * 100) and seen[0][1].endswith("[line truncated]")
    assert seen[1][1] == "tail"
    assert result.truncated  # type: ignore[attr-defined]


def test_minimal_environment_and_no_shell() -> None:
    os.environ["GPU_TRIAGE_SECRET_FOR_TEST"] = "x"
    try:
        result, _ = _run([PY, "-c", "import os; print(sorted(os.environ))"])
    finally:
        del os.environ["GPU_TRIAGE_SECRET_FOR_TEST"]
    assert "GPU_TRIAGE_SECRET_FOR_TEST" not in result.output  # type: ignore[attr-defined]
    result, _ = _run(["echo", "$HOME; ls"])
    assert result.output == "$HOME; ls"  # type: ignore[attr-defined]


def test_a_streamed_step_leaves_no_descendant_that_left_its_group() -> None:
    """A runbook step whose grandchild calls setsid (and keeps the output open): killed
    with the step, found by the marker in its environment."""
    import subprocess

    nap = f"300.{os.getpid()}{time.monotonic_ns() % 10_000}"
    start = time.monotonic()
    result, _ = _run(["sh", "-c", f"setsid sleep {nap} & exec sleep {nap}"], timeout_s=0.5)
    assert result.timed_out and time.monotonic() - start < 10  # type: ignore[attr-defined]
    ps = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout
    assert not [line for line in ps.splitlines() if nap in line and not line.startswith("Z")]
