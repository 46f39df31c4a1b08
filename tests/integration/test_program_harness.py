"""tests/programs.py, which starts the programs other tests send signals to.

Issue 26's SIGINT "flake": ``make test`` started as a background job of a shell
without job control (``sh -c 'make test &'``) runs with SIGINT ignored; every
program a test started inherited that, Python then installs no
``KeyboardInterrupt`` handler, and the two examples that stop on
``KeyboardInterrupt`` (lister_web.py, factory_sync.py) ignored the test's Ctrl-C
until its 20 s wait ran out. (The programs on ``kubereflector.run`` or the
Manager stopped: they install their own handlers.) The harness now starts each
program as a terminal would, and a program that hangs fails its test with its
threads' stacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import textwrap
from collections.abc import Iterator

import pytest

from programs import (
    PROGRAM_TEST_TIMEOUT,
    ProgramHung,
    finish,
    read_line,
    run_sync,
    running,
    step,
)

pytestmark = pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)

SHOW_SIGINT = textwrap.dedent(
    """
    import signal
    action = signal.getsignal(signal.SIGINT)
    print({signal.SIG_IGN: "ignored", signal.default_int_handler: "KeyboardInterrupt"}[action])
    """
)

WAITS_FOR_CTRL_C = textwrap.dedent(
    """
    import threading
    try:
        print("waiting", flush=True)
        threading.Event().wait()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    """
)

STUCK = textwrap.dedent(
    """
    import threading

    inside = threading.Event()

    def stuck_in_the_worker():
        inside.set()
        threading.Event().wait()

    def stuck_in_main():
        inside.wait()
        print("stuck", flush=True)
        threading.Event().wait()

    threading.Thread(target=stuck_in_the_worker, daemon=True).start()
    stuck_in_main()
    """
)


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """This process ignores SIGINT meanwhile, as one started by ``sh -c '... &'``
    does (what the processes it starts then inherit)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.asyncio
async def test_a_program_started_while_sigint_is_ignored_still_gets_ctrl_c() -> None:
    with sigint_ignored():
        # What the harness corrects: a plain child inherits the ignored SIGINT.
        plain = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SHOW_SIGINT, stdout=asyncio.subprocess.PIPE
        )
        inherited, _ = await step(plain, plain.communicate(), "its exit")
        assert inherited.decode() == "ignored\n"
        async with running(sys.executable, "-c", SHOW_SIGINT) as proc:
            assert await finish(proc) == ("KeyboardInterrupt\n", "")
        async with running(sys.executable, "-c", WAITS_FOR_CTRL_C) as waiting:
            assert await read_line(waiting) == "waiting"
            waiting.send_signal(signal.SIGINT)
            assert await finish(waiting) == ("interrupted\n", "")
    assert waiting.returncode == 0


@pytest.mark.asyncio
async def test_a_program_that_hangs_fails_the_wait_with_every_threads_stack() -> None:
    async with running(sys.executable, "-c", STUCK) as proc:
        assert await read_line(proc) == "stuck"
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with pytest.raises(ProgramHung) as failure:
            await step(proc, never, "a line that never comes", timeout=0)
    message = str(failure.value)
    assert "a line that never comes: nothing after 0s" in message
    assert "(pid " in message
    assert "in stuck_in_the_worker" in message
    assert "in stuck_in_main" in message
    assert proc.returncode == -signal.SIGABRT


@pytest.mark.asyncio
async def test_a_program_that_ended_has_no_stacks_to_give() -> None:
    async with running(sys.executable, "-c", "pass") as proc:
        await finish(proc)
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with pytest.raises(ProgramHung, match=r"it had ended, status 0"):
            await step(proc, never, "anything", timeout=0)


def test_a_short_program_run_to_its_end_or_failed_at_its_bound() -> None:
    with pytest.raises(ProgramHung, match=r"(?s)program python\S* -c .*: nothing after 0s"):
        run_sync([sys.executable, "-c", STUCK], timeout=0)
    done = run_sync([sys.executable, "-c", "print('ok')"], check=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")
