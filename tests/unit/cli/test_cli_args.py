"""The command line's pieces that need no server: arguments, durations, formatting,
progress and error lines."""

from __future__ import annotations

import ast
import asyncio
import base64
import io
import re
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml

from config_fixtures import V1, Gate, Plugin, drain
from kubereflector import cli
from kubereflector.cache.listwatch import ListOptions, ListResult
from kubereflector.cli._context import CommandContext
from kubereflector.cli._dispatch import amain
from kubereflector.cli._errors import EXIT_ERROR, EXIT_USAGE, describe
from kubereflector.cli._observer import ListWatchObserver, ObservedListWatch
from kubereflector.cli._parser import parse_duration
from kubereflector.cli._progress import ListProgress
from kubereflector.cli._tables import render_table
from kubereflector.client import ConfigError
from kubereflector.errors import ApiError, ForbiddenError, UnauthorizedError
from kubereflector.testing import FakeClock


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("1m", 60.0),
        ("500ms", 0.5),
        ("2.5", 2.5),
        ("7", 7.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
        (" 200ms ", 0.2),
        (".5s", 0.5),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "3x", "10 s", "-1s", "0", "0ms", "inf", "nan", "1s2"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


class Streams:
    def __init__(self) -> None:
        self.out = io.StringIO()
        self.err = io.StringIO()

    def run(self, *argv: str) -> int:
        return cli.main(list(argv), stdout=self.out, stderr=self.err)

    def err_lines(self) -> list[str]:
        return self.err.getvalue().splitlines()


def test_help_goes_to_stdout() -> None:
    s = Streams()
    assert s.run("--help") == 0
    text = s.out.getvalue()
    for command in ("watch", "get", "emulator", "demo", "crd"):
        assert command in text
    assert s.err.getvalue() == ""


def test_watch_help_lists_its_options() -> None:
    s = Streams()
    assert s.run("watch", "--help") == 0
    text = s.out.getvalue()
    for option in (
        "--namespace",
        "--all-namespaces",
        "--selector",
        "--field-selector",
        "--kubeconfig",
        "--context",
        "--output",
        "--every",
        "--metadata-only",
        "--no-strip-managed-fields",
    ):
        assert option in text


def test_the_emulator_is_loaded_only_by_the_commands_that_run_it() -> None:
    # `get` and `watch` start faster without it; `emulator` and `demo` import it when run.
    # The parser takes the emulator's options from its light command-line module only.
    code = (
        "import sys, kubereflector.cli; "
        "print(sorted(m for m in sys.modules if m.startswith('kubereflector.testing')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=20
    )
    modules = set(ast.literal_eval(loaded.stdout))
    assert "kubereflector.testing.apiserver._command" in modules  # the probe sees imports
    heavy = {"_emulator", "_handler", "_store", "_fields", "_statuses"}
    assert not {m.rsplit(".", 1)[-1] for m in modules} & heavy, sorted(modules)
    assert "kubereflector.testing.fake_source" not in modules


def test_a_command_is_required() -> None:
    s = Streams()
    assert s.run() == EXIT_USAGE
    assert "kubereflector: error:" in s.err.getvalue()


def test_namespace_and_all_namespaces_are_accepted_together() -> None:
    # As kubectl: -A wins (tests/integration/test_cli.py shows what is listed); here the
    # arguments parse, and the command gets as far as reading the kubeconfig.
    s = Streams()
    code = s.run("get", "pods", "-n", "a", "-A", "--kubeconfig", "/nonexistent/kubeconfig")
    assert code == EXIT_ERROR
    assert "not allowed with argument" not in s.err.getvalue()
    assert "/nonexistent/kubeconfig" in s.err.getvalue()


def test_unknown_output_format_is_refused() -> None:
    s = Streams()
    assert s.run("get", "pods", "-o", "xml") == EXIT_USAGE
    assert "invalid choice" in s.err.getvalue()
    s = Streams()
    assert s.run("watch", "pods", "-o", "wide") == EXIT_USAGE
    assert "invalid choice" in s.err.getvalue()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["get", "pods", "-l", "app in (a"], "label selector"),
        (["watch", "pods", "-l", "=x"], "label selector"),
        (["watch", "pods", "--field-selector", "novalue"], "field selector"),
        (["get", "pods", "-n", "Bad NS!"], "-n/--namespace: invalid namespace 'Bad NS!'"),
        (["watch", "pods", "-n", "kube-system/secrets?x="], "invalid namespace"),
        (["watch", "pods", "--every", "3x"], "--every"),
        (["get", "pods", "--timeout", "soon"], "--timeout"),
        (["demo", "--duration", "-4"], "--duration"),
        (["demo", "--duration", "soon"], "--duration"),
    ],
)
def test_invalid_arguments_give_one_line_and_exit_2(argv: list[str], needle: str) -> None:
    # Checked before any configuration is read or request is made.
    s = Streams()
    if argv[0] != "demo":
        argv = [*argv, "--kubeconfig", "/nonexistent/kubeconfig"]
    assert s.run(*argv) == EXIT_USAGE
    lines = s.err_lines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("kubereflector: error: ")
    assert needle in lines[0]
    assert s.out.getvalue() == ""


def test_debug_works_before_and_after_the_command() -> None:
    for argv in (["--debug", "get", "pods", "-l", "=x"], ["get", "pods", "-l", "=x", "--debug"]):
        s = Streams()
        assert s.run(*argv) == EXIT_USAGE
        assert "Traceback" in s.err.getvalue()


def test_a_missing_kubeconfig_is_one_line() -> None:
    s = Streams()
    assert s.run("get", "pods", "--kubeconfig", "/nonexistent/kubeconfig") == EXIT_ERROR
    lines = s.err_lines()
    assert len(lines) == 1, lines
    assert "/nonexistent/kubeconfig" in lines[0]
    assert "Traceback" not in s.err.getvalue()


# -- error lines ----------------------------------------------------------------------------


def context(server: str | None = "https://k8s.example:6443") -> CommandContext:
    ctx = CommandContext(
        stdout=io.StringIO(),
        stderr=io.StringIO(),
        clock=FakeClock(),
        stop=asyncio.Event(),
    )
    ctx.server = server
    ctx.context = "prod"
    return ctx


def test_describe_errors_in_one_line() -> None:
    ctx = context()
    refused = aiohttp.ClientConnectorError(
        aiohttp.client_reqrep.ConnectionKey("k8s.example", 6443, True, True, None, None, None),
        ConnectionRefusedError(111, "Connect call failed"),
    )
    cases = {
        ConfigError("context 'x' not found\nin a file"): "context 'x' not found in a file",
        UnauthorizedError(401, "Unauthorized", "Unauthorized"): (
            "https://k8s.example:6443 rejected the credentials of context 'prod' (401 Unauthorized)"
        ),
        ForbiddenError(403, "Forbidden", 'pods is forbidden: User "x" cannot list'): (
            '403 Forbidden: pods is forbidden: User "x" cannot list'
        ),
        ApiError(500, "InternalError", "boom", url="https://k8s.example:6443/api"): (
            "500 InternalError: boom (https://k8s.example:6443/api)"
        ),
        refused: "cannot reach the API server at https://k8s.example:6443: connection refused",
        TimeoutError(): "timed out talking to the API server at https://k8s.example:6443",
        KeyError("x"): "internal error: KeyError",
    }
    for err, expected in cases.items():
        text = describe(err, ctx)
        assert "\n" not in text
        assert text.startswith(expected), (err, text)


# -- formatting ------------------------------------------------------------------------------


def pod(name: str, namespace: str = "default", created: str = "2025-01-01T00:00:00Z") -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": "12",
            "creationTimestamp": created,
        }
    }


def test_table_columns_line_up() -> None:
    text = render_table([pod("a"), pod("web-long-name", "kube-system")], "Pod", show_namespace=True)
    lines = text.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    column = lines[0].index(" NAME ") + 1
    assert lines[1][column:].startswith("a ")
    assert lines[2][column:].startswith("web-long-name ")
    assert lines[1].split()[:2] == ["default", "a"]
    assert "NAMESPACE" not in render_table([pod("a")], "Pod", show_namespace=False)


# -- progress ------------------------------------------------------------------------------------


def test_progress_on_a_terminal_is_overwritten_in_place_and_erased() -> None:
    stream = io.StringIO()
    clock = FakeClock()
    progress = ListProgress(stream, "pods", enabled=True, clock=clock)
    first = ListOptions(limit=500)
    progress.list_succeeded(
        first, ListResult(items=[{}] * 500, continue_="t1", remaining_item_count=700)
    )
    page = ListOptions(limit=500, continue_="t1")
    progress.list_succeeded(
        page, ListResult(items=[{}] * 500, continue_="t2", remaining_item_count=200)
    )
    assert stream.getvalue() == (
        "\r\x1b[Klisting pods: 500 so far, 700 remaining"
        "\r\x1b[Klisting pods: 1000 so far, 200 remaining"
    )
    progress.list_succeeded(ListOptions(continue_="t2"), ListResult(items=[{}] * 200))
    assert stream.getvalue().endswith("\r\x1b[K")
    # Done: later lists (relists) show nothing.
    progress.list_succeeded(first, ListResult(items=[{}], continue_="t3"))
    progress.initial_progress(ListOptions(send_initial_events=True), 5)
    assert stream.getvalue().endswith("200 remaining\r\x1b[K")


def test_watch_list_progress_is_throttled() -> None:
    stream = io.StringIO()
    clock = FakeClock()
    progress = ListProgress(stream, "pods", enabled=True, clock=clock)
    options = ListOptions(send_initial_events=True)
    for count in range(1, 101):
        progress.initial_progress(options, count)
    clock.step(0.2)
    progress.initial_progress(options, 101)
    assert stream.getvalue() == ("\r\x1b[Klisting pods: 1 so far\r\x1b[Klisting pods: 101 so far")
    progress.initial_events_ended(options, 101, "9")
    assert stream.getvalue().endswith("\r\x1b[K")


def test_no_progress_when_not_enabled() -> None:
    stream = io.StringIO()
    progress = ListProgress(stream, "pods", enabled=False, clock=FakeClock())
    progress.list_succeeded(
        ListOptions(), ListResult(items=[{}], continue_="t", remaining_item_count=3)
    )
    progress.initial_progress(ListOptions(send_initial_events=True), 1)
    progress.finish()
    assert stream.getvalue() == ""


def test_progress_needs_both_streams_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    ctx = context()
    assert not ctx.tty
    ctx.stdout = Tty()
    assert not ctx.tty
    ctx.stderr = Tty()
    assert ctx.tty


PEM_CERT = "-----BEGIN CERTIFICATE-----\nbm9wZQ==\n-----END CERTIFICATE-----\n"
PEM_KEY = "-----BEGIN PRIVATE KEY-----\nbm9wZQ==\n-----END PRIVATE KEY-----\n"


@pytest.mark.parametrize(
    ("cert", "message"),
    [
        # not even PEM: refused while loading the kubeconfig, naming the field
        ("garbage", r"user 'u' in .*: client-certificate-data is not a PEM certificate"),
        # PEM-shaped, but TLS cannot load it: refused on the first request
        (PEM_CERT, r"the client certificate and key cannot be loaded: "),
    ],
)
def test_bad_client_certificate_data_is_one_specific_line(
    tmp_path, cert: str, message: str
) -> None:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "current-context": "c",
                "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "client-certificate-data": b64(cert),
                            "client-key-data": b64(PEM_KEY),
                        },
                    }
                ],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            }
        )
    )
    s = Streams()
    assert s.run("get", "pods", "--kubeconfig", str(kubeconfig)) == EXIT_ERROR
    lines = s.err_lines()
    assert len(lines) == 1, lines
    assert re.match(r"kubereflector: error: " + message, lines[0]), lines[0]
    assert "internal error" not in lines[0]


def kubeconfig_for(path: Path, server: str, user: dict[str, object] | None = None) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "current-context": "c",
                "clusters": [{"name": "k", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": user or {}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            }
        )
    )
    return str(path)


@pytest.mark.asyncio
async def test_get_timeout_covers_a_server_that_accepts_and_never_answers(tmp_path: Path) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read()  # reads the request, never answers
        finally:
            writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    clock = FakeClock()
    out, err = io.StringIO(), io.StringIO()
    kubeconfig = kubeconfig_for(tmp_path / "config", f"http://127.0.0.1:{port}")
    async with server:
        run = asyncio.create_task(
            amain(
                ["get", "pods", "--timeout", "3s", "--kubeconfig", kubeconfig],
                clock=clock,
                stdout=out,
                stderr=err,
            )
        )
        await clock.wait_for_sleepers()
        await clock.advance(2.9)
        assert not run.done()
        await clock.advance(0.1)
        assert await run == EXIT_ERROR
    assert err.getvalue().splitlines() == [
        "kubereflector: error: timed out after 3s connecting to the API server at "
        f"http://127.0.0.1:{port}"
    ]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX plugin scripts")
@pytest.mark.asyncio
async def test_get_timeout_covers_a_credential_plugin_that_never_exits(tmp_path: Path) -> None:
    gate = Gate(tmp_path)
    try:
        plugin = Plugin(tmp_path, gate.plugin_code(with_helper=True))
        exec_user = {
            "exec": {"apiVersion": V1, "command": str(plugin.path), "interactiveMode": "Never"}
        }
        kubeconfig = kubeconfig_for(tmp_path / "config", "http://127.0.0.1:1", exec_user)
        clock = FakeClock()
        err = io.StringIO()
        run = asyncio.create_task(
            amain(
                ["get", "pods", "--timeout", "3s", "--kubeconfig", kubeconfig],
                clock=clock,
                stdout=io.StringIO(),
                stderr=err,
            )
        )
        await gate.started()
        await clock.advance(3)
        assert await run == EXIT_ERROR
        assert "timed out after 3s" in err.getvalue()
        await gate.ended()  # the plugin and its helper were killed
        await drain()  # and the plugin's run has finished
    finally:
        gate.close()


def test_the_observing_wrapper_passes_on_the_url_the_reflector_logs() -> None:
    class WithUrl:
        url = "https://kube.example:6443/api/v1/pods"

    observer = ListWatchObserver()
    assert ObservedListWatch(WithUrl(), observer).url == WithUrl.url  # type: ignore[arg-type]
    assert ObservedListWatch(object(), observer).url is None  # type: ignore[arg-type]
