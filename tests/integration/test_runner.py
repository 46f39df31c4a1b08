"""``kubereflector.run``: a program stopped by Ctrl-C or SIGTERM cleans up and exits
quietly. Each case is a small program in a subprocess (signals go to a process);
the test waits on its output, never on the clock."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap

import pytest

from kubereflector import run
from programs import PROGRAM_TEST_TIMEOUT, finish, read_line
from programs import start as start_program

FOLLOWER = textwrap.dedent(
    """
    import asyncio, sys
    from kubereflector import run

    async def main() -> str:
        try:
            print("following", flush=True)
            await asyncio.Event().wait()
            return "never"
        finally:
            print("cleaned up", flush=True)
            if "--slow-clean-up" in sys.argv:
                print("cleaning up slowly", flush=True)
                await asyncio.Event().wait()

    print("run returned", run(main()), flush=True)
    """
)


async def start(*args: str) -> asyncio.subprocess.Process:
    return await start_program(sys.executable, "-c", FOLLOWER, *args)


@pytest.mark.asyncio
@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
async def test_a_signal_cancels_main_which_cleans_up_and_the_program_exits_0(
    sig: signal.Signals,
) -> None:
    proc = await start()
    try:
        assert await read_line(proc) == "following"
        proc.send_signal(sig)
        stdout, stderr = await finish(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert stderr == ""
    assert stdout.splitlines() == ["cleaned up", "run returned None"]
    assert proc.returncode == 0


@pytest.mark.asyncio
@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_a_second_ctrl_c_interrupts_a_clean_up_that_hangs() -> None:
    proc = await start("--slow-clean-up")
    try:
        assert await read_line(proc) == "following"
        proc.send_signal(signal.SIGINT)
        assert await read_line(proc) == "cleaned up"
        assert await read_line(proc) == "cleaning up slowly"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = await finish(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    # An interrupted clean-up is no quiet stop: KeyboardInterrupt ends the process
    # as it would without run() (killed by SIGINT: status 130 in a shell).
    assert proc.returncode == -signal.SIGINT
    assert "run returned" not in stdout
    assert "KeyboardInterrupt" in stderr


def test_the_result_of_main_is_returned() -> None:
    async def main() -> int:
        await asyncio.sleep(0)
        return 42

    assert run(main()) == 42


def test_what_main_raises_propagates() -> None:
    async def main() -> None:
        raise LookupError("from main")

    with pytest.raises(LookupError, match="from main"):
        run(main())


@pytest.mark.asyncio
async def test_refused_on_a_running_loop_and_for_a_non_coroutine() -> None:
    async def main() -> None:
        pass

    coro = main()
    with pytest.raises(RuntimeError, match="await the program instead"):
        run(coro)
    assert coro.cr_frame is None  # closed: no "never awaited" warning
    with pytest.raises(TypeError, match="needs a coroutine, got function"):
        run(main)  # type: ignore[arg-type]
