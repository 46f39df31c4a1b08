"""ExecAuth: client-go exec credential plugins (v1 and v1beta1), run for real.

The plugins are small Python scripts in tmp_path that record each run. Expiry
is measured on a FakeClock; nothing waits for wall-clock time.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import sys

import pytest

from config_fixtures import V1, V1BETA1, Gate, Plugin, drain, token_plugin
from kubereflector.client import Auth, ConfigError, ExecAuth, ExecPluginError
from kubereflector.testing import FakeClock

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX plugin scripts")


def test_exec_auth_is_an_auth() -> None:
    assert isinstance(ExecAuth("some-plugin"), Auth)


@posix_only
@pytest.mark.asyncio
async def test_token_is_sent_as_bearer_and_cached_without_expiry(tmp_path) -> None:
    plugin = token_plugin(tmp_path, "tok")
    auth = ExecAuth(str(plugin.path))
    first = await auth.authorize()
    assert first.headers == {"Authorization": "Bearer tok-1"}
    assert first.client_cert is None
    assert (await auth.authorize()) is first
    assert len(plugin.runs) == 1


@posix_only
@pytest.mark.asyncio
async def test_invalidate_runs_the_plugin_again(tmp_path) -> None:
    plugin = token_plugin(tmp_path, "tok")
    auth = ExecAuth(str(plugin.path))
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-1"
    auth.invalidate()
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-2"
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-2"
    assert len(plugin.runs) == 2


@posix_only
@pytest.mark.parametrize("api_version", [V1, V1BETA1])
@pytest.mark.asyncio
async def test_both_api_versions(tmp_path, api_version: str) -> None:
    plugin = token_plugin(tmp_path, "tok", api_version=api_version)
    auth = ExecAuth(str(plugin.path), api_version=api_version, interactive_mode="IfAvailable")
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-1"
    info = json.loads(plugin.runs[0]["exec_info"])
    assert info == {
        "kind": "ExecCredential",
        "apiVersion": api_version,
        "spec": {"interactive": False},
    }


@posix_only
@pytest.mark.asyncio
async def test_expiration_is_honoured_and_refreshed_a_little_before(tmp_path) -> None:
    clock = FakeClock()
    plugin = token_plugin(tmp_path, "tok", expires_in=3600)
    auth = ExecAuth(str(plugin.path), clock=clock, refresh_before=10)
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-1"
    clock.step(3500)
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-1"
    clock.step(95)  # 5 s before expiry: inside the refresh margin
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-2"
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-2"
    assert len(plugin.runs) == 2


@posix_only
@pytest.mark.asyncio
async def test_an_already_expired_credential_is_used_once(tmp_path) -> None:
    plugin = token_plugin(tmp_path, "tok", expires_in=-60)
    auth = ExecAuth(str(plugin.path), clock=FakeClock())
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-1"
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-2"


@posix_only
@pytest.mark.asyncio
async def test_expiration_with_offset_and_fraction(tmp_path) -> None:
    clock = FakeClock()
    stamp = "2999-01-01T01:00:00.123456789+01:00"
    body = f'emit({{"token": "t" + str(RUN), "expirationTimestamp": {stamp!r}}})'
    plugin = Plugin(tmp_path, body)
    auth = ExecAuth(str(plugin.path), clock=clock)
    assert (await auth.authorize()).headers["Authorization"] == "Bearer t1"
    clock.step(3600 * 24 * 365)
    assert (await auth.authorize()).headers["Authorization"] == "Bearer t1"


@posix_only
@pytest.mark.asyncio
async def test_concurrent_callers_share_one_run(tmp_path) -> None:
    plugin = token_plugin(tmp_path, "tok")
    auth = ExecAuth(str(plugin.path))
    infos = await asyncio.gather(*(auth.authorize() for _ in range(8)))
    assert {info.headers["Authorization"] for info in infos} == {"Bearer tok-1"}
    assert len(plugin.runs) == 1


@posix_only
@pytest.mark.asyncio
async def test_concurrent_callers_share_one_failure(tmp_path) -> None:
    plugin = Plugin(tmp_path, "sys.exit(7)")
    auth = ExecAuth(str(plugin.path))
    results = await asyncio.gather(*(auth.authorize() for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, ExecPluginError) and r.exit_code == 7 for r in results)
    assert len(plugin.runs) == 1
    # A later call tries again.
    with pytest.raises(ExecPluginError):
        await auth.authorize()
    assert len(plugin.runs) == 2


@posix_only
@pytest.mark.asyncio
async def test_client_certificate_result(tmp_path) -> None:
    body = 'emit({"clientCertificateData": "CERT PEM", "clientKeyData": "KEY PEM"})'
    auth = ExecAuth(str(Plugin(tmp_path, body).path))
    info = await auth.authorize()
    assert info.client_cert == (b"CERT PEM", b"KEY PEM")
    assert dict(info.headers) == {}


@posix_only
@pytest.mark.asyncio
async def test_token_and_client_certificate_together(tmp_path) -> None:
    body = 'emit({"token": "t", "clientCertificateData": "C", "clientKeyData": "K"})'
    info = await ExecAuth(str(Plugin(tmp_path, body).path)).authorize()
    assert info.headers == {"Authorization": "Bearer t"}
    assert info.client_cert == (b"C", b"K")


@posix_only
@pytest.mark.asyncio
async def test_args_env_and_no_stdin(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PLUGIN_FROM_PROCESS", "outer")
    monkeypatch.setenv("PLUGIN_OVERRIDDEN", "outer")
    plugin = token_plugin(tmp_path)
    auth = ExecAuth(
        str(plugin.path),
        ["get-token", "--cluster", "a b"],
        env={"PLUGIN_OVERRIDDEN": "inner", "PLUGIN_EXTRA": "x"},
    )
    await auth.authorize()
    run = plugin.runs[0]
    assert run["argv"] == ["get-token", "--cluster", "a b"]
    assert run["env"] == {
        "PLUGIN_FROM_PROCESS": "outer",
        "PLUGIN_OVERRIDDEN": "inner",
        "PLUGIN_EXTRA": "x",
    }
    assert run["stdin"] == ""


@posix_only
@pytest.mark.asyncio
async def test_cluster_info_is_passed_when_given(tmp_path) -> None:
    plugin = token_plugin(tmp_path)
    cluster = {"server": "https://k8s.example", "config": {"audience": "a"}}
    await ExecAuth(str(plugin.path), cluster=cluster).authorize()
    info = json.loads(plugin.runs[0]["exec_info"])
    assert info["spec"] == {"interactive": False, "cluster": cluster}


@posix_only
@pytest.mark.asyncio
async def test_plugin_found_on_path(tmp_path, monkeypatch) -> None:
    plugin = token_plugin(tmp_path, "tok", name="kubectl-fake-login")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    auth = ExecAuth("kubectl-fake-login")
    assert (await auth.authorize()).headers["Authorization"] == "Bearer tok-1"
    assert len(plugin.runs) == 1


# -- failures: clear errors that name the command ------------------------------


@posix_only
@pytest.mark.asyncio
async def test_exit_code_and_last_stderr_line(tmp_path) -> None:
    body = (
        "print('first line', file=sys.stderr)\n"
        "print('error: you must log in first' + 'x' * 500, file=sys.stderr)\n"
        "print('   ', file=sys.stderr)\n"
        "sys.exit(3)"
    )
    plugin = Plugin(tmp_path, body)
    with pytest.raises(ExecPluginError) as caught:
        await ExecAuth(str(plugin.path)).authorize()
    err = caught.value
    assert isinstance(err, ConfigError)
    assert err.command == str(plugin.path)
    assert err.exit_code == 3
    text = str(err)
    assert str(plugin.path) in text
    assert "exit code 3" in text
    assert "error: you must log in first" in text
    assert "first line" not in text
    assert len(text) < len(str(plugin.path)) + 300


@posix_only
@pytest.mark.asyncio
async def test_killed_by_a_signal(tmp_path) -> None:
    plugin = Plugin(tmp_path, "import signal\nos.kill(os.getpid(), signal.SIGKILL)")
    with pytest.raises(ExecPluginError, match="killed by signal 9"):
        await ExecAuth(str(plugin.path)).authorize()


@pytest.mark.asyncio
async def test_command_not_found_shows_the_install_hint(tmp_path) -> None:
    missing = str(tmp_path / "no-such-plugin")
    auth = ExecAuth(missing, install_hint="Install it with: brew install no-such-plugin")
    with pytest.raises(ExecPluginError) as caught:
        await auth.authorize()
    assert str(caught.value) == (
        f"exec plugin {missing!r} was not found: Install it with: brew install no-such-plugin"
    )
    assert caught.value.exit_code is None


@posix_only
@pytest.mark.asyncio
async def test_command_not_executable(tmp_path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    with pytest.raises(ExecPluginError, match="cannot be executed"):
        await ExecAuth(str(script)).authorize()


@posix_only
@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("print('hello, I am not JSON')", "printed output that is not JSON"),
        ("print('[' * 100000 + ']' * 100000)", "printed output that is not JSON"),
        ("pass", "printed nothing on standard output"),
        ("print('[1, 2]')", "is not an ExecCredential object"),
        (
            "emit({'token': 't'}, kind='Secret')",
            "returned another kind instead of an ExecCredential",
        ),
        ("print(json.dumps({'status': {'token': 't'}}))", "returned no kind instead of"),
        (
            f"emit({{'token': 't'}}, api_version={V1BETA1!r})",
            f"returned {V1BETA1!r}, but the kubeconfig asks for {V1!r}",
        ),
        (
            "emit({'token': 't'}, api_version='v1')",
            f"returned another apiVersion, but the kubeconfig asks for {V1!r}",
        ),
        (
            "print(json.dumps({'kind': 'ExecCredential', 'status': {'token': 't'}}))",
            "returned no apiVersion",
        ),
        (f"print(json.dumps({{'apiVersion': {V1!r}, 'kind': 'ExecCredential'}}))", "no status"),
        ("emit({})", "neither a token nor a client certificate"),
        ("emit({'clientCertificateData': 'C'})", "only a client certificate or key"),
        ("emit({'clientKeyData': 'K'})", "only a client certificate or key"),
        ("emit({'token': 5})", "status.token that is not a string"),
        ("emit({'token': 't', 'expirationTimestamp': 'tomorrow'})", "not RFC 3339"),
    ],
)
@pytest.mark.asyncio
async def test_unusable_output(tmp_path, body: str, message: str) -> None:
    plugin = Plugin(tmp_path, body)
    with pytest.raises(ExecPluginError) as caught:
        await ExecAuth(str(plugin.path)).authorize()
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"exec plugin {str(plugin.path)!r} ")


def test_interactive_always_cannot_be_satisfied() -> None:
    with pytest.raises(ExecPluginError, match="interactiveMode Always, which needs a terminal"):
        ExecAuth("login-plugin", interactive_mode="Always")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"interactive_mode": "Sometimes"}, "interactiveMode 'Sometimes'"),
        ({"api_version": "client.authentication.k8s.io/v1alpha1"}, "v1alpha1"),
    ],
)
def test_invalid_settings(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ExecPluginError, match=message):
        ExecAuth("plugin", **kwargs)  # type: ignore[arg-type]


def test_exec_plugin_error_pickles() -> None:
    err = ExecPluginError("cmd", "failed with exit code 2", 2)
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.command, copy.problem, copy.exit_code, str(copy)) == (
        "cmd",
        "failed with exit code 2",
        2,
        str(err),
    )


def test_repr_names_the_command_only() -> None:
    auth = ExecAuth("aws", ["eks", "get-token", "--secret-arg"], env={"AWS_SECRET": "hidden"})
    text = repr(auth)
    assert text == (
        "ExecAuth(command='aws', api_version='client.authentication.k8s.io/v1', credential=none)"
    )


@posix_only
@pytest.mark.asyncio
async def test_a_token_the_plugin_issued_is_redacted_from_a_later_failure(tmp_path) -> None:
    token = "SECRET-issued-token-5150"
    body = (
        "if RUN == 1:\n"
        f"    emit({{'token': {token!r}}})\n"
        "else:\n"
        f"    print('token {token} expired', file=sys.stderr)\n"
        "    sys.exit(1)\n"
    )
    auth = ExecAuth(str(Plugin(tmp_path, body).path))
    await auth.authorize()
    auth.invalidate()
    with pytest.raises(ExecPluginError, match="exit code 1: token <redacted> expired") as caught:
        await auth.authorize()
    assert token not in str(caught.value)


# -- cancellation --------------------------------------------------------------


@posix_only
@pytest.mark.asyncio
async def test_cancelling_the_only_caller_kills_the_plugin(tmp_path) -> None:
    gate = Gate(tmp_path)
    try:
        plugin = Plugin(tmp_path, gate.plugin_code() + 'emit({"token": "late"})')
        auth = ExecAuth(str(plugin.path))
        task = asyncio.create_task(auth.authorize())
        await gate.started()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await gate.ended()  # killed: it never got the release
        await drain()
        assert repr(auth).endswith("credential=none)")
    finally:
        gate.close()


@posix_only
@pytest.mark.asyncio
async def test_cancelling_kills_the_plugins_helpers_too(tmp_path) -> None:
    gate = Gate(tmp_path)
    try:
        plugin = Plugin(tmp_path, gate.plugin_code(with_helper=True))
        task = asyncio.create_task(ExecAuth(str(plugin.path)).authorize())
        await gate.started()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await gate.ended()  # the helper held the lifeline: the whole group was killed
        await drain()
    finally:
        gate.close()


# -- timeout -------------------------------------------------------------------


@posix_only
@pytest.mark.asyncio
async def test_a_plugin_that_never_finishes_is_killed_with_its_group_after_the_timeout(
    tmp_path,
) -> None:
    gate = Gate(tmp_path)
    clock = FakeClock()
    try:
        body = (
            'print("SECRET-partial-output", flush=True)\n'
            'print("SECRET-on-stderr", file=sys.stderr, flush=True)\n'
        ) + gate.plugin_code(with_helper=True)
        plugin = Plugin(tmp_path, body)
        auth = ExecAuth(str(plugin.path), timeout=5, clock=clock)
        task = asyncio.create_task(auth.authorize())
        await gate.started()
        await clock.advance(4.9)
        assert not task.done()
        await clock.advance(0.1)
        with pytest.raises(ExecPluginError) as caught:
            await task
        assert str(caught.value) == (
            f"exec plugin {str(plugin.path)!r} did not finish within 5 s and was killed"
        )
        assert caught.value.__cause__ is None
        assert caught.value.__suppress_context__
        # Its helper kept standard output open: only killing the group ends the run.
        await gate.ended()
        await drain()
    finally:
        gate.close()


@posix_only
@pytest.mark.asyncio
async def test_a_killed_plugin_s_pipes_are_closed_even_when_a_process_outside_its_group_holds_them(
    tmp_path,
) -> None:
    # A helper in a session of its own survives the group kill. It waits for the
    # plugin's death (the end of a pipe only the plugin writes), then writes to
    # the plugin's standard output until that fails: once we close our end it
    # gets EPIPE and exits, releasing the lifeline. Were our end left open, it
    # would block on a full pipe forever and ended() would never return.
    gate = Gate(tmp_path)
    clock = FakeClock()
    try:
        escaped = (
            "import subprocess\n"
            "_dead, _alive = os.pipe()\n"
            "subprocess.Popen([sys.executable, '-c', "
            "'import os, sys\\nos.read(%d, 1)\\n"
            'while True: sys.stdout.write("x" * 65536); sys.stdout.flush()\' % _dead], '
            "pass_fds=(_life, _dead), start_new_session=True)\n"
        )
        body = gate.plugin_code().replace("_release = ", escaped + "_release = ", 1)
        auth = ExecAuth(str(Plugin(tmp_path, body).path), timeout=5, clock=clock)
        task = asyncio.create_task(auth.authorize())
        await gate.started()
        await clock.advance(5)
        with pytest.raises(ExecPluginError, match="did not finish within 5 s"):
            await task
        await gate.ended()  # the plugin was killed, the escaped helper saw EPIPE
        await drain()
    finally:
        gate.close()


def test_the_timeout_has_a_sensible_default_and_is_checked() -> None:
    from kubereflector.client.auth import EXEC_TIMEOUT

    assert 10 <= EXEC_TIMEOUT <= 120
    with pytest.raises(ValueError, match="timeout must be > 0 or None"):
        ExecAuth("plugin", timeout=0)
    ExecAuth("plugin", timeout=None)


@posix_only
@pytest.mark.asyncio
async def test_a_cancelled_caller_does_not_stop_the_others(tmp_path) -> None:
    gate = Gate(tmp_path)
    try:
        plugin = Plugin(tmp_path, gate.plugin_code() + 'emit({"token": "shared"})')
        auth = ExecAuth(str(plugin.path))
        first = asyncio.create_task(auth.authorize())
        second = asyncio.create_task(auth.authorize())
        await gate.started()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        auth.invalidate()  # ignored while a run is under way
        gate.release()
        info = await second
        assert info.headers == {"Authorization": "Bearer shared"}
        assert (await auth.authorize()) is info
        assert len(plugin.runs) == 1
        await drain()
    finally:
        gate.close()
