"""Programs the tests start as subprocesses: started as from a terminal, waited for
with generous bounds, and, when one hangs, failed with every thread's stack.

* :func:`start` / :func:`running` start a program with :func:`environment`:
  ``tests/program_site/sitecustomize.py`` runs first in every Python program, so
  SIGINT is Ctrl-C there even when the test runner was started with SIGINT
  ignored (as ``sh -c 'make test &'`` starts it; the cause of the SIGINT "flake"
  of issue 26), and SIGABRT makes it write its threads' stacks to a file.
* :func:`step` bounds one wait for a program (a line, its exit) by :data:`STEP`
  seconds. That is far more than any step takes on a loaded machine (cold
  imports and CPU hogs make a step take seconds, not a minute), so reaching it
  means the program hangs: the program is then asked for its stacks and the
  test fails with :class:`ProgramHung`, naming the program, what it was waited
  for and where each of its threads was.
* :data:`PROGRAM_TEST_TIMEOUT`: the pytest-timeout of a test that waits for
  programs, so that a :func:`step` gives up (with the stacks) before pytest
  does (without them).
* :func:`run_sync` is ``subprocess.run`` for short programs, bounded the same way.

Nothing here sleeps: every wait ends on the program's output or exit, or at
its bound.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

STEP = 60.0
"""Upper bound (seconds) on one wait for a program; never reached when things work."""

PROGRAM_TEST_TIMEOUT = 300
"""pytest-timeout (seconds) of a test that waits for programs: above :data:`STEP`,
so a hang is reported by :func:`step`, with the program's stacks."""

SITE = Path(__file__).resolve().parent / "program_site"
STACKS_ENV = "KUBEREFLECTOR_TEST_STACKS"

_stacks_dir: Path | None = None
_stacks_files: dict[int, Path] = {}
_commands: dict[int, str] = {}


class ProgramHung(AssertionError):
    """A program did not do what a test waited for within the bound; the message
    carries where each of its threads was."""


def environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process' environment) for a program the tests start:
    ``tests/program_site`` first on ``PYTHONPATH`` (see its ``sitecustomize``)."""
    result = dict(os.environ if env is None else env)
    paths = [str(SITE), *filter(None, result.get("PYTHONPATH", "").split(os.pathsep))]
    result["PYTHONPATH"] = os.pathsep.join(paths)
    return result


def _stacks_path() -> Path:
    global _stacks_dir
    if _stacks_dir is None:
        _stacks_dir = Path(tempfile.mkdtemp(prefix="kubereflector-test-stacks-"))
        atexit.register(shutil.rmtree, _stacks_dir, True)
    fd, name = tempfile.mkstemp(dir=_stacks_dir, suffix=".txt")
    os.close(fd)
    return Path(name)


def _name(command: Sequence[str]) -> str:
    """``command`` as a shell would show it, the executable's directory and any
    argument over 60 characters (a ``-c`` program) shortened."""
    shown = [
        os.path.basename(command[0]),
        *(a if len(a) <= 60 else a[:57] + "..." for a in command[1:]),
    ]
    return shlex.join(shown)


def _describe(pid: int) -> str:
    return f"program {_commands.get(pid, '?')} (pid {pid})"


async def start(
    *command: str,
    env: Mapping[str, str] | None = None,
    stdin: int | None = asyncio.subprocess.DEVNULL,
    stdout: int | None = asyncio.subprocess.PIPE,
    stderr: int | None = asyncio.subprocess.PIPE,
    cwd: str | os.PathLike[str] | None = None,
) -> asyncio.subprocess.Process:
    """Start ``command`` (``command[0]`` is the executable, e.g. ``sys.executable``)
    with :func:`environment` (``env``), stdin from ``/dev/null`` and stdout and
    stderr piped, unless told otherwise."""
    path = _stacks_path()
    proc = await asyncio.create_subprocess_exec(
        *command,
        env={**environment(env), STACKS_ENV: str(path)},
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
    )
    _stacks_files[proc.pid] = path
    _commands[proc.pid] = shlex.join(
        os.path.basename(c) if i == 0 else c for i, c in enumerate(command)
    )
    return proc


@contextlib.asynccontextmanager
async def running(
    *command: str, env: Mapping[str, str] | None = None, **kwargs: Any
) -> AsyncIterator[asyncio.subprocess.Process]:
    """:func:`start` for the length of the block; on leaving it, the program is
    killed if it still runs, and waited for."""
    proc = await start(*command, env=env, **kwargs)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def stacks(proc: asyncio.subprocess.Process) -> str:
    """End ``proc`` with SIGABRT and return the stacks its threads were in (what
    :mod:`faulthandler` wrote), or why there are none (it had ended, or is not a
    Python program started by :func:`start`)."""
    path = _stacks_files.get(proc.pid)
    if proc.returncode is not None:
        return f"(no stacks: it had ended, status {proc.returncode})"
    proc.send_signal(signal.SIGABRT)
    try:
        await asyncio.wait_for(proc.wait(), STEP)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return "(no stacks: SIGABRT did not end it)"
    dump = path.read_text(encoding="utf-8", errors="replace") if path is not None else ""
    return dump or f"(no stacks: it ended with status {proc.returncode} and wrote none)"


async def step(
    proc: asyncio.subprocess.Process, work: Awaitable[T], what: str, timeout: float = STEP
) -> T:
    """``await work`` (something ``proc`` is to do: a line, its exit); after
    ``timeout`` seconds, raise :class:`ProgramHung` with ``proc``'s stacks (which
    ends it)."""
    try:
        return await asyncio.wait_for(work, timeout)
    except asyncio.TimeoutError:
        where = await stacks(proc)
        raise ProgramHung(
            f"{_describe(proc.pid)}: {what}: nothing after {timeout:g}s; its threads were:\n{where}"
        ) from None


async def finish(proc: asyncio.subprocess.Process, timeout: float = STEP) -> tuple[str, str]:
    """The rest of ``proc``'s stdout and stderr once it has exited (bounded by
    :func:`step`)."""
    out, err = await step(proc, proc.communicate(), "its exit", timeout)
    return (out or b"").decode(), (err or b"").decode()


async def read_line(proc: asyncio.subprocess.Process, timeout: float = STEP) -> str:
    """The next line ``proc`` prints, without its newline. Raises ``AssertionError``
    (with what the program wrote to stderr) if its output ends first, and
    :class:`ProgramHung` after ``timeout`` seconds."""
    assert proc.stdout is not None
    raw = await step(proc, proc.stdout.readline(), "a line of output", timeout)
    if not raw:
        stderr = ""
        if proc.stderr is not None:
            stderr = (await step(proc, proc.stderr.read(), "the end of stderr", timeout)).decode()
        raise AssertionError(f"{_describe(proc.pid)} ended: {stderr}")
    return raw.decode().rstrip("\n")


def run_sync(
    command: Sequence[str],
    *,
    timeout: float = STEP,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(command, capture_output=True, text=True)`` (in ``cwd``)
    with :func:`environment` (``env``); after ``timeout`` seconds raises
    :class:`ProgramHung` with the program's stacks. ``check``: raise
    ``CalledProcessError`` on a non-zero status, naming stdout and stderr."""
    path = _stacks_path()
    with subprocess.Popen(
        list(command),
        env={**environment(env), STACKS_ENV: str(path)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            try:
                proc.communicate(timeout=STEP)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            where = path.read_text(encoding="utf-8", errors="replace") or "(none written)"
            raise ProgramHung(
                f"program {_name(command)}: nothing after {timeout:g}s; its threads were:\n{where}"
            ) from None
    done = subprocess.CompletedProcess(list(command), proc.returncode, out, err)
    if check and done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, list(command), out, err)
    return done
