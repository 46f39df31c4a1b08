"""The ``kubereflector`` command line against the bundled emulator.

``get``, the user errors and the output formats run in-process (``amain`` on
the test's event loop, next to the emulator, with a ``stop`` event for Ctrl-C);
``watch`` with SIGINT/SIGTERM, ``emulator`` and ``demo`` run as subprocesses,
waited on through their output lines, never by sleeping. These tests always use
their own emulator (user errors such as a wrong token need one), also when the
suite targets a real cluster.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from kubereflector.cli._dispatch import amain
from kubereflector.testing import FakeClock
from kubereflector.testing.apiserver import ApiServerEmulator
from programs import PROGRAM_TEST_TIMEOUT, STEP, ProgramHung, finish, running, step

pytestmark = pytest.mark.asyncio

TIMEOUT = 10.0


def pod(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
    }


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServerEmulator]:
    emulator = ApiServerEmulator()
    emulator.create("namespaces", {"metadata": {"name": "shop"}})
    emulator.create("pods", pod("web-1", app="web"))
    emulator.create("pods", pod("web-2", app="web"))
    emulator.create("pods", pod("db-0", app="db"))
    emulator.create("pods", pod("cart-0", "shop", app="cart"))
    async with emulator:
        yield emulator


class LiveStream(io.StringIO):
    """A text stream whose readers can wait for what is written to it."""

    def __init__(self) -> None:
        super().__init__()
        self._written = asyncio.Event()

    def write(self, text: str) -> int:
        self._written.set()
        return super().write(text)

    def lines(self) -> list[str]:
        return self.getvalue().splitlines()

    async def wait_until(
        self, predicate: Callable[[list[str]], Any], what: str, timeout: float = TIMEOUT
    ) -> Any:
        """The first true ``predicate(lines)``, waiting for writes until then."""

        async def scan() -> Any:
            while True:
                self._written.clear()
                result = predicate(self.lines())
                if result:
                    return result
                await self._written.wait()

        try:
            return await asyncio.wait_for(scan(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"{what} never came: {self.lines()}") from None

    async def wait_for(self, pattern: str, timeout: float = TIMEOUT) -> str:
        """The first line matching ``pattern``, waiting for it to be written."""

        def match(lines: list[str]) -> str | None:
            return next((line for line in lines if re.search(pattern, line)), None)

        line: str = await self.wait_until(match, f"a line matching {pattern!r}", timeout)
        return line


@asynccontextmanager
async def in_process(*argv: str, clock: Any = None) -> AsyncIterator[Running]:
    """Run ``amain(argv)`` as a task on this loop; leaving stops it (like Ctrl-C)."""
    running = Running(argv, clock)
    try:
        yield running
    finally:
        running.stop.set()
        await asyncio.wait_for(asyncio.shield(running.task), TIMEOUT)


class Running:
    def __init__(self, argv: tuple[str, ...], clock: Any) -> None:
        self.out = LiveStream()
        self.err = LiveStream()
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(
            amain(list(argv), stdout=self.out, stderr=self.err, stop=self.stop, clock=clock)
        )

    async def finish(self) -> int:
        self.stop.set()
        return await asyncio.wait_for(asyncio.shield(self.task), TIMEOUT)


async def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.wait_for(amain(list(argv), stdout=out, stderr=err), TIMEOUT)
    return code, out.getvalue(), err.getvalue()


# -- get ------------------------------------------------------------------------------------------


async def test_get_table_in_the_contexts_namespace(server: ApiServerEmulator) -> None:
    code, out, err = await run("get", "pods", "--kubeconfig", server.kubeconfig_path)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    rows = [line.split() for line in lines[1:]]
    assert [row[:4] for row in rows] == [
        ["db-0", "0/1", "Pending", "0"],
        ["web-1", "0/1", "Pending", "0"],
        ["web-2", "0/1", "Pending", "0"],
    ]
    assert re.fullmatch(r"\d+s", rows[1][4])


async def test_get_wide_shows_ip_and_node_and_kubectl_statuses(server: ApiServerEmulator) -> None:
    running = {
        **server.get("pods", "web-1"),
        "status": {
            "phase": "Running",
            "podIP": "10.244.0.7",
            "containerStatuses": [
                {
                    "name": "c",
                    "ready": False,
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                }
            ],
        },
    }
    running["spec"] = {**running["spec"], "nodeName": "node-a"}
    server.update("pods", running)
    code, out, _ = await run(
        "get", "pods", "-o", "wide", "-l", "app=web", "--kubeconfig", server.kubeconfig_path
    )
    assert code == 0
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert lines[1][:4] == ["web-1", "0/1", "CrashLoopBackOff", "4"]
    assert lines[1][5:] == ["10.244.0.7", "node-a"]
    assert lines[2][5:] == ["<none>", "<none>"]


async def test_get_tables_of_other_kinds(server: ApiServerEmulator) -> None:
    kc = ("--kubeconfig", server.kubeconfig_path)
    server.create("configmaps", {"metadata": {"name": "cfg"}, "data": {"a": "1", "b": "2"}})
    code, out, _ = await run("get", "cm", *kc)
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()] == [["NAME", "DATA"], ["cfg", "2"]]
    code, out, _ = await run("get", "ns", *kc)
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["NAME", "STATUS", "AGE"]
    assert ["shop", "Active"] in [line[:2] for line in lines]
    server.create(
        "deployments",
        {
            "metadata": {"name": "web"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
        },
    )
    code, out, _ = await run("get", "deploy", *kc)
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert lines[1][:4] == ["web", "2/3", "3", "2"]


async def test_get_name_and_yaml_as_kubectl(server: ApiServerEmulator) -> None:
    kc = ("--kubeconfig", server.kubeconfig_path)
    code, out, _ = await run("get", "pods", "-o", "name", "-l", "app=web", *kc)
    assert (code, out) == (0, "pod/web-1\npod/web-2\n")
    server.register_resource("example.com", "v1", "widgets", "Widget")
    server.create("widgets.example.com", {"metadata": {"name": "w"}})
    code, out, _ = await run("get", "widgets", "-o", "name", *kc)
    assert (code, out) == (0, "widget.example.com/w\n")
    code, out, _ = await run("get", "pods", "-o", "yaml", "-l", "app=db", *kc)
    doc = yaml.safe_load(out)
    assert doc["kind"] == "List"
    assert doc["items"] == [server.get("pods", "db-0")]


async def test_get_watch_prints_the_listing_then_each_change(server: ApiServerEmulator) -> None:
    argv = ("get", "pods", "-w", "-l", "app=web", "--kubeconfig", server.kubeconfig_path)
    async with in_process(*argv) as cmd:
        await cmd.out.wait_for(r"^web-2 ")
        assert cmd.out.lines()[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        await server.wait_for_watches(1, "pods")
        server.create("pods", pod("web-3", app="web"))
        await cmd.out.wait_for(r"^web-3 +0/1 +Pending +0 +\d+s$")
        server.update("pods", {**server.get("pods", "web-1"), "status": {"phase": "Running"}})
        await cmd.out.wait_for(r"^web-1 +0/1 +Running ")
        server.delete("pods", "web-2")
        assert await cmd.finish() == 0
    rows = [line.split()[0] for line in cmd.out.lines()]
    assert rows[:4] == ["NAME", "web-1", "web-2", "web-3"]  # the listing, then the add
    assert rows[4] == "web-1"

    argv = ("get", "pods", "-w", "-o", "name", "-n", "shop", "--kubeconfig", server.kubeconfig_path)
    async with in_process(*argv) as cmd:
        await cmd.out.wait_for(r"^pod/cart-0$")
        await server.wait_for_watches(1, "pods")
        server.create("pods", pod("cart-1", "shop", app="cart"))
        await cmd.out.wait_for(r"^pod/cart-1$")
        assert await cmd.finish() == 0
    assert cmd.out.lines() == ["pod/cart-0", "pod/cart-1"]


async def test_get_shows_a_crds_printer_columns(server: ApiServerEmulator) -> None:
    columns = [
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Colour", "type": "string", "jsonPath": ".spec.colour", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    crd = {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }
    server.create("customresourcedefinitions", crd)
    server.create("widgets", {"metadata": {"name": "w1"}, "spec": {"size": 3, "colour": "red"}})
    server.create("widgets", {"metadata": {"name": "w2"}, "spec": {}})
    kc = ("--kubeconfig", server.kubeconfig_path)
    code, out, _ = await run("get", "wd", *kc)
    assert code == 0
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["NAME", "SIZE", "AGE"]
    assert lines[1][:2] == ["w1", "3"]
    assert lines[2][:2] == ["w2", "<none>"]
    assert re.fullmatch(r"\d+s", lines[1][2])
    code, out, _ = await run("get", "wd", "-o", "wide", *kc)
    assert [line.split()[:3] for line in out.splitlines()] == [
        ["NAME", "SIZE", "COLOUR"],
        ["w1", "3", "red"],
        ["w2", "<none>", "<none>"],
    ]


async def test_all_namespaces_wins_over_namespace(server: ApiServerEmulator) -> None:
    kc = ("--kubeconfig", server.kubeconfig_path)
    code, out, err = await run("get", "pods", "-A", "-n", "shop", "-o", "names", *kc)
    assert (code, err) == (0, "")
    assert out.splitlines() == ["default/db-0", "default/web-1", "default/web-2", "shop/cart-0"]
    code, out, _ = await run("get", "pods", "-n", "shop", "-A", *kc)
    assert out.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]


async def test_get_all_namespaces_names(server: ApiServerEmulator) -> None:
    code, out, _ = await run(
        "get", "po", "-A", "-o", "names", "--kubeconfig", server.kubeconfig_path
    )
    assert code == 0
    assert out.splitlines() == ["default/db-0", "default/web-1", "default/web-2", "shop/cart-0"]
    code, out, _ = await run("get", "pods", "-A", "--kubeconfig", server.kubeconfig_path)
    assert out.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert out.splitlines()[-1].split()[:2] == ["shop", "cart-0"]


async def test_get_namespace_and_label_selector(server: ApiServerEmulator) -> None:
    kc = ("--kubeconfig", server.kubeconfig_path)
    code, out, _ = await run("get", "pods", "-n", "shop", "-o", "names", *kc)
    assert (code, out.splitlines()) == (0, ["shop/cart-0"])
    code, out, _ = await run("get", "pods", "-l", "app=web", "-o", "names", *kc)
    assert (code, out.splitlines()) == (0, ["default/web-1", "default/web-2"])
    code, out, _ = await run("get", "pods", "-A", "-l", "app notin (web)", "-o", "names", *kc)
    assert (code, out.splitlines()) == (0, ["default/db-0", "shop/cart-0"])
    code, out, _ = await run(
        "get", "pods", "--field-selector", "metadata.name=db-0", "-o", "names", *kc
    )
    assert (code, out.splitlines()) == (0, ["default/db-0"])


async def test_get_uses_the_contexts_namespace(server: ApiServerEmulator, tmp_path: Path) -> None:
    config = server.kubeconfig()
    config["contexts"][0]["context"]["namespace"] = "shop"
    path = tmp_path / "kc.yaml"
    path.write_text(yaml.safe_dump(config))
    code, out, _ = await run("get", "pods", "-o", "names", "--kubeconfig", str(path))
    assert (code, out.splitlines()) == (0, ["shop/cart-0"])
    code, out, _ = await run(
        "get", "pods", "-n", "default", "-o", "names", "--kubeconfig", str(path)
    )
    assert (code, out.splitlines()) == (0, ["default/db-0", "default/web-1", "default/web-2"])


async def test_get_a_custom_resource_by_plural_and_short_name(server: ApiServerEmulator) -> None:
    name = server.register_resource("example.com", "v1", "widgets", "Widget", short_names=["wd"])
    server.create(
        name, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}}
    )
    for resource in ("widgets", "wd", "widgets.example.com"):
        code, out, err = await run(
            "get", resource, "-o", "names", "--kubeconfig", server.kubeconfig_path
        )
        assert (code, out, err) == (0, "default/w1\n", ""), resource


async def test_get_json_is_a_list_of_the_cached_objects(server: ApiServerEmulator) -> None:
    code, out, _ = await run("get", "pods", "-o", "json", "--kubeconfig", server.kubeconfig_path)
    assert code == 0
    doc = json.loads(out)
    assert doc["kind"] == "List"
    assert doc["metadata"]["resourceVersion"] == server.resource_version
    assert [item["metadata"]["name"] for item in doc["items"]] == ["db-0", "web-1", "web-2"]
    assert doc["items"][0] == server.get("pods", "db-0")


async def test_get_cluster_scoped_and_empty(server: ApiServerEmulator) -> None:
    kc = ("--kubeconfig", server.kubeconfig_path)
    code, out, _ = await run("get", "ns", "-n", "ignored", "-o", "names", *kc)
    assert code == 0
    assert "shop" in out.splitlines()
    code, out, err = await run("get", "deploy", *kc)
    assert (code, out, err) == (0, "", "No resources found in default namespace.\n")


# -- user errors ---------------------------------------------------------------------------------


def write_kubeconfig(path: Path, server: ApiServerEmulator, **changes: Any) -> str:
    config = server.kubeconfig()
    if "url" in changes:
        config["clusters"][0]["cluster"]["server"] = changes["url"]
    if "token" in changes:
        config["users"][0]["user"]["token"] = changes["token"]
    path.write_text(yaml.safe_dump(config))
    return str(path)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


UserError = Callable[[ApiServerEmulator, Path], list[str]]

USER_ERRORS: dict[str, tuple[UserError, str]] = {
    "missing kubeconfig": (
        lambda s, tmp: ["get", "pods", "--kubeconfig", str(tmp / "nope.yaml")],
        r"kubeconfig '.*nope\.yaml' cannot be read",
    ),
    "unknown context": (
        lambda s, tmp: ["get", "pods", "--kubeconfig", s.kubeconfig_path, "--context", "prod"],
        r"context 'prod' not found .*known contexts: 'emulator'",
    ),
    "unknown resource": (
        lambda s, tmp: ["watch", "podz", "--kubeconfig", s.kubeconfig_path],
        r"does not serve a resource named 'podz'; did you mean .*pods",
    ),
    "unreachable server": (
        lambda s, tmp: [
            "get",
            "pods",
            "--kubeconfig",
            write_kubeconfig(tmp / "kc", s, url=f"http://127.0.0.1:{closed_port()}"),
        ],
        r"cannot reach the API server at http://127\.0\.0\.1:\d+: connection refused",
    ),
    "401": (
        lambda s, tmp: [
            "watch",
            "pods",
            "--kubeconfig",
            write_kubeconfig(tmp / "kc", s, token="x"),
        ],
        r"rejected the credentials of context 'emulator' \(401 Unauthorized\)",
    ),
    "malformed selector": (
        lambda s, tmp: ["get", "pods", "-l", "app in (a", "--kubeconfig", s.kubeconfig_path],
        r"invalid label selector",
    ),
    "unsupported field selector": (
        lambda s, tmp: [
            "get",
            "pods",
            "--field-selector",
            "spec.x=1",
            "--kubeconfig",
            s.kubeconfig_path,
        ],
        r"400 BadRequest: .*spec\.x",
    ),
}


@pytest.mark.parametrize("case", list(USER_ERRORS))
async def test_user_errors_are_one_line(
    server: ApiServerEmulator, tmp_path: Path, case: str
) -> None:
    make_argv, pattern = USER_ERRORS[case]
    code, out, err = await run(*make_argv(server, tmp_path))
    assert code != 0
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("kubereflector: error: ")
    assert re.search(pattern, lines[0]), lines[0]
    assert out == ""

    code, _, err = await run(*make_argv(server, tmp_path), "--debug")
    assert code != 0
    assert "Traceback (most recent call last)" in err
    assert re.search(r"^kubereflector: error: .*" + pattern, err, re.M)


async def test_403_is_one_line(server: ApiServerEmulator) -> None:
    server.fail_next(1, 403)
    code, out, err = await run("get", "pods", "--kubeconfig", server.kubeconfig_path)
    assert (code, out) == (1, "")
    assert err.splitlines() == ["kubereflector: error: 403 Forbidden: injected fault: forbidden"]


# -- watch ---------------------------------------------------------------------------------------


TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def event(type_: str, key: str, rv: str) -> str:
    """The event log line: ISO time, the type padded, the key, the resourceVersion."""
    return f"^{TIME}  {re.escape(f'{type_:<8}')}  {re.escape(key)}  {rv}$"


async def test_watch_shows_a_tombstone_for_a_delete_it_missed(server: ApiServerEmulator) -> None:
    async with in_process("watch", "pods", "--kubeconfig", server.kubeconfig_path) as cmd:
        await cmd.out.wait_for(event("ADDED", "default/web-2", r"\d+"))
        await server.wait_for_watches(1, "pods")
        server.stall_watches()
        server.delete("pods", "web-2")
        server.compact()
        server.drop_watches()  # the re-watch gets 410; the relist finds web-2 gone
        await cmd.out.wait_for(event("DELETED (missed; from relist)", "default/web-2", r"\d+"))
        assert await cmd.finish() == 0
    assert re.match(
        r"2 objects cached, 4 events, 1 relists, \d+ watch restarts, first sync in \d+\.\d\ds$",
        cmd.err.lines()[-1],
    )


async def test_watch_says_when_the_server_is_unreachable_and_back(
    server: ApiServerEmulator,
) -> None:
    async with in_process("watch", "pods", "--kubeconfig", server.kubeconfig_path) as cmd:
        await cmd.out.wait_for("default/web-2")
        await server.stop()  # the Reflector re-watches at once: connection refused
        await cmd.err.wait_for(
            r"^kubereflector: warning: cannot reach the API server at http://127\.0\.0\.1:\d+: "
            r"connection refused; retrying$"
        )
        await server.start()  # same port, same token, same data
        await cmd.err.wait_for(r"^kubereflector: the API server at \S+ is reachable again$")
        server.create("pods", pod("web-3"))
        await cmd.out.wait_for(event("ADDED", "default/web-3", r"\d+"))
    assert len(cmd.err.lines()) == 3  # the two notices and the summary


async def test_watch_json_and_yaml_print_each_object(server: ApiServerEmulator) -> None:
    kc = ("--kubeconfig", server.kubeconfig_path)
    async with in_process("watch", "pods", "-l", "app=db", "-o", "json", *kc) as cmd:
        line = await cmd.out.wait_for(r'"name":"db-0"')
        assert json.loads(line) == {"type": "ADDED", "object": server.get("pods", "db-0")}
        server.patch("pods", "db-0", {"metadata": {"labels": {"app": "db", "v": "2"}}})
        line = await cmd.out.wait_for(r'"v":"2"')
        event = json.loads(line)
        assert event["type"] == "MODIFIED"
        assert event["object"]["metadata"]["resourceVersion"] == server.resource_version
        deleted = server.delete("pods", "db-0")
        line = await cmd.out.wait_for(r'"type":"DELETED"')
        assert json.loads(line) == {"type": "DELETED", "object": deleted}
        assert await cmd.finish() == 0
    assert len(cmd.out.lines()) == 3

    async with in_process("watch", "pods", "-n", "shop", "-o", "yaml", *kc) as cmd:
        await cmd.out.wait_for(r"^    name: cart-0$")
        assert await cmd.finish() == 0
    docs = list(yaml.safe_load_all(cmd.out.getvalue()))
    assert docs == [{"type": "ADDED", "object": server.get("pods", "cart-0", "shop")}]


async def test_watch_names_marks_deletions(server: ApiServerEmulator) -> None:
    argv = ("watch", "pods", "-n", "shop", "-o", "names", "--kubeconfig", server.kubeconfig_path)
    async with in_process(*argv) as cmd:
        await cmd.out.wait_for(r"^shop/cart-0$")
        await server.wait_for_watches(1, "pods")
        server.delete("pods", "cart-0", "shop")
        await cmd.out.wait_for(r"^shop/cart-0 \(deleted\)$")
        assert await cmd.finish() == 0
    assert cmd.out.lines() == ["shop/cart-0", "shop/cart-0 (deleted)"]

    argv = ("watch", "pods", "-n", "shop", "-o", "name", "--kubeconfig", server.kubeconfig_path)
    async with in_process(*argv) as cmd:
        server.create("pods", pod("cart-1", "shop"))
        await cmd.out.wait_for(r"^pod/cart-1$")
        await server.wait_for_watches(1, "pods")
        server.delete("pods", "cart-1", "shop")
        await cmd.out.wait_for(r"^pod/cart-1 \(deleted\)$")
        assert await cmd.finish() == 0
    assert cmd.out.lines() == ["pod/cart-1", "pod/cart-1 (deleted)"]


async def test_watch_strips_managed_fields_unless_asked(server: ApiServerEmulator) -> None:
    managed = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:metadata": {}}}]
    server.patch("pods", "db-0", {"metadata": {"managedFields": managed}})
    assert server.get("pods", "db-0")["metadata"].get("managedFields") == managed
    argv = ("watch", "pods", "-l", "app=db", "-o", "json", "--kubeconfig", server.kubeconfig_path)
    async with in_process(*argv) as cmd:
        line = await cmd.out.wait_for("db-0")
    assert "managedFields" not in json.loads(line)["object"]["metadata"]
    async with in_process(*argv, "--no-strip-managed-fields") as cmd:
        line = await cmd.out.wait_for("db-0")
    assert json.loads(line)["object"]["metadata"]["managedFields"] == managed


async def test_watch_metadata_only(server: ApiServerEmulator) -> None:
    argv = ("watch", "pods", "-l", "app=db", "-o", "json", "--metadata-only")
    async with in_process(*argv, "--kubeconfig", server.kubeconfig_path) as cmd:
        line = await cmd.out.wait_for("db-0")
    obj = json.loads(line)["object"]
    assert obj["kind"] == "PartialObjectMetadata"
    assert "spec" not in obj


async def test_watch_every_prints_the_keys_on_the_clock(server: ApiServerEmulator) -> None:
    clock = FakeClock()
    argv = ("watch", "pods", "--every", "30s", "--kubeconfig", server.kubeconfig_path)

    def ticks(lines: list[str]) -> int:
        return sum(1 for line in lines if line.startswith("# "))

    async with in_process(*argv, clock=clock) as cmd:
        await cmd.out.wait_for(r"^default/web-2$")  # the first tick comes at the sync
        header, *keys = cmd.out.lines()
        assert re.fullmatch(r"# \d{4}-\d\d-\d\dT[\d:.]+Z: 3 pods", header)
        assert keys == ["default/db-0", "default/web-1", "default/web-2"]
        await clock.wait_for_sleepers(2)  # the interval, and the Reflector's idle watchdog
        await clock.advance(29.9)
        assert ticks(cmd.out.lines()) == 1
        await clock.advance(0.1)
        await cmd.out.wait_until(lambda lines: ticks(lines) == 2, "the second tick")
        await cmd.out.wait_until(lambda lines: len(lines) == 8, "its keys")
        assert cmd.out.lines()[5:] == keys
    assert cmd.task.result() == 0
    assert re.match(r"3 objects cached, 3 events, 0 relists", cmd.err.lines()[-1])


# -- subprocesses -------------------------------------------------------------------------------


class Process:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    async def expect(self, pattern: str, timeout: float = STEP) -> str:
        """Read stdout until a line matches ``pattern``; a program that prints none
        within ``timeout`` fails the test with its stacks (see tests/programs.py)."""

        async def scan() -> str:
            assert self.proc.stdout is not None
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    raise AssertionError(f"output ended before {pattern!r}: {self.lines}")
                line = raw.decode().rstrip("\n")
                self.lines.append(line)
                if re.search(pattern, line):
                    return line

        try:
            return await step(self.proc, scan(), f"a line matching {pattern!r}", timeout)
        except ProgramHung as err:
            raise ProgramHung(f"{err}\nits output until then: {self.lines}") from None

    async def finish(
        self, sig: int | None = signal.SIGINT, timeout: float = STEP
    ) -> tuple[int, str, str]:
        """Send ``sig`` (if any) and collect the rest of the output and the exit status."""
        if sig is not None:
            self.proc.send_signal(sig)
        out, err = await finish(self.proc, timeout)
        self.lines.extend(out.splitlines())
        assert self.proc.returncode is not None
        return self.proc.returncode, "\n".join(self.lines), err


@asynccontextmanager
async def subprocess(*argv: str, command: tuple[str, ...] | None = None) -> AsyncIterator[Process]:
    async with running(*(command or (sys.executable, "-m", "kubereflector")), *argv) as proc:
        yield Process(proc)


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_watch_subprocess_logs_events_and_stops_on_sigint(server: ApiServerEmulator) -> None:
    async with subprocess("watch", "pods", "--kubeconfig", server.kubeconfig_path) as proc:
        rv = server.get("pods", "web-1")["metadata"]["resourceVersion"]
        await proc.expect(event("ADDED", "default/web-1", rv))
        await proc.expect(event("ADDED", "default/web-2", r"\d+"))
        created = server.create("pods", pod("api-0"))
        await proc.expect(event("ADDED", "default/api-0", created["metadata"]["resourceVersion"]))
        patched = server.patch("pods", "api-0", {"metadata": {"labels": {"v": "2"}}})
        await proc.expect(
            event("MODIFIED", "default/api-0", patched["metadata"]["resourceVersion"])
        )
        deleted = server.delete("pods", "web-1")
        await proc.expect(event("DELETED", "default/web-1", deleted["metadata"]["resourceVersion"]))
        code, _, err = await proc.finish(signal.SIGINT)
    assert code == 0
    assert "Traceback" not in err
    assert re.search(
        r"^3 objects cached, 6 events, 0 relists, 0 watch restarts, first sync in \d+\.\d\ds$",
        err,
        re.M,
    ), err


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_watch_every_subprocess_prints_keys_until_sigterm(server: ApiServerEmulator) -> None:
    argv = ("watch", "pods", "-A", "--every", "200ms", "-o", "names")
    async with subprocess(*argv, "--kubeconfig", server.kubeconfig_path) as proc:
        await proc.expect(r"^shop/cart-0$")
        server.create("pods", pod("late-0", "shop"))
        await proc.expect(r"^shop/late-0$")
        code, out, err = await proc.finish(signal.SIGTERM)
    assert code == 0
    assert "ADDED" not in out
    assert re.search(r"^5 objects cached, 5 events, ", err, re.M), err


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_emulator_subprocess_serves_https_and_writes_a_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    script = Path(sys.executable).parent / "kubereflector"
    command = (str(script),) if script.exists() else None
    argv = ("emulator", "--write-kubeconfig", str(kubeconfig), "--seed-pods", "3")
    async with subprocess(*argv, command=command) as proc:
        url = await proc.expect(r"^https://127\.0\.0\.1:\d+$")
        assert kubeconfig.exists()
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        assert cluster["server"] == url
        assert (
            "BEGIN CERTIFICATE" in base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        assert config["users"][0]["user"]["token"]
        code, out, err = await run("get", "pods", "-o", "json", "--kubeconfig", str(kubeconfig))
        assert (code, err) == (0, "")
        pods = json.loads(out)["items"]
        assert sorted(p["metadata"]["labels"]["app"] for p in pods) == ["api", "web", "worker"]
        for p in pods:  # they look like a real cluster's
            assert p["spec"]["nodeName"].startswith("node-")
            assert p["status"]["phase"] == "Running"
            assert all(c["ready"] for c in p["status"]["containerStatuses"])
        code, _, err = await proc.finish(signal.SIGINT)
    assert code == 0
    assert f"kubeconfig: {kubeconfig}" in err


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_emulator_no_tls_serves_plain_http(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    argv = ("emulator", "--no-tls", "--no-auth", "--write-kubeconfig", str(kubeconfig))
    async with subprocess(*argv) as proc:
        url = await proc.expect(r"^http://127\.0\.0\.1:\d+$")
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["clusters"][0]["cluster"] == {"server": url}
        assert config["users"][0]["user"] == {}
        code, _, err = await run("get", "pods", "--kubeconfig", str(kubeconfig))
        assert (code, err) == (0, "No resources found in default namespace.\n")
        code, _, err = await proc.finish(signal.SIGINT)
    assert code == 0


async def test_emulator_without_its_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "trustme", None)  # as if not installed
    code, out, err = await run("emulator", "--port", "0")
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert "pip install 'kubereflector[emulator]'" in err
    assert "--no-tls" in err


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_demo_subprocess_recovers_from_every_fault() -> None:
    async with subprocess("demo", "--duration", "4") as proc:
        code, out, err = await proc.finish(sig=None)
    assert code == 0, (out, err)
    assert "Traceback" not in err
    assert re.search(r"^verdict: consistent \(\d+ pods, cache == server\)$", out, re.M), out
    for narration in (
        r"\] watch dropped by the server; re-watching from resourceVersion \d+$",
        r"\] history expired \(410\): relisting$",
        r"\] relisted \d+ pods at resourceVersion \d+",
        r"\] tombstone: default/\S+ was deleted while we were not watching$",
        r"\] server said 429 Too Many Requests: backing off$",
        r"\] server error 500: retrying$",
        r"\] backing off \d+\.\d\ds",
    ):
        assert re.search(narration, out, re.M), (narration, out)


async def test_demo_in_process_stops_early_and_still_verifies() -> None:
    out = LiveStream()
    stop = asyncio.Event()
    task = asyncio.create_task(
        amain(["demo", "--forever"], stdout=out, stderr=io.StringIO(), stop=stop)
    )
    await out.wait_for(r"\] churn: ")
    stop.set()
    assert await asyncio.wait_for(task, TIMEOUT) == 0
    assert out.lines()[-1].startswith("verdict: consistent (")


@pytest.mark.timeout(PROGRAM_TEST_TIMEOUT)
async def test_python_dash_m_runs_the_cli() -> None:
    async with subprocess("--help") as proc:
        code, out, _ = await proc.finish(sig=None)
    assert code == 0
    assert "usage: kubereflector" in out
