"""Helpers for the config tests: kubeconfig files and exec credential plugins
written to ``tmp_path`` (small Python scripts that record every run)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import yaml

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"

_PLUGIN = """#!{python}
import datetime, json, os, sys

RECORD = {record!r}
with open(RECORD, "a", encoding="utf-8") as _f:
    _f.write(json.dumps({{
        "argv": sys.argv[1:],
        "exec_info": os.environ.get("KUBERNETES_EXEC_INFO"),
        "env": {{k: v for k, v in os.environ.items() if k.startswith("PLUGIN_")}},
        "stdin": sys.stdin.read(),
        "cwd": os.getcwd(),
    }}) + "\\n")
with open(RECORD, encoding="utf-8") as _f:
    RUN = sum(1 for _ in _f)


def expires_in(seconds):
    when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def emit(status, api_version={v1!r}, kind="ExecCredential"):
    print(json.dumps({{"apiVersion": api_version, "kind": kind, "status": status}}))


{body}
"""


class Plugin:
    """An executable Python script acting as an exec credential plugin.

    ``body`` is Python run after the run was recorded; it sees ``RUN`` (1 for
    the first run), ``emit(status, api_version=..., kind=...)`` and
    ``expires_in(seconds)``.
    """

    def __init__(self, directory: Path, body: str, name: str = "plugin") -> None:
        self.path = directory / name
        self.record = directory / f"{name}.runs"
        self.path.write_text(
            _PLUGIN.format(python=sys.executable, record=str(self.record), v1=V1, body=body),
            encoding="utf-8",
        )
        self.path.chmod(self.path.stat().st_mode | stat.S_IXUSR)

    @property
    def runs(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        lines = self.record.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]


def token_plugin(
    directory: Path,
    token: str = "token",
    *,
    expires_in: float | None = None,
    api_version: str = V1,
    name: str = "plugin",
) -> Plugin:
    """A plugin answering ``{token}-{RUN}`` (a new token on every run)."""
    expiry = f', "expirationTimestamp": expires_in({expires_in!r})' if expires_in else ""
    body = f'emit({{"token": {token!r} + "-" + str(RUN){expiry}}}, api_version={api_version!r})'
    return Plugin(directory, body, name)


def write_yaml(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def single(
    *,
    server: str = "https://k8s.example:6443",
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
    name: str = "ctx",
) -> dict[str, Any]:
    """A kubeconfig with one context ``name`` (cluster ``{name}-cluster``, user
    ``{name}-user``) that is the current one."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "clusters": [{"name": f"{name}-cluster", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": f"{name}-user", "user": dict(user or {})}],
        "contexts": [
            {
                "name": name,
                "context": {
                    "cluster": f"{name}-cluster",
                    "user": f"{name}-user",
                    **(context or {}),
                },
            }
        ],
    }


class Gate:
    """Named pipes that let a test see a plugin start, let it finish, and see it
    end, without waiting for wall-clock time (POSIX only).

    The plugin runs ``plugin_code()`` first: it writes its pid (the test's
    ``await gate.started()`` returns it), then blocks until ``gate.release()``.
    ``await gate.ended()`` returns once the plugin process is dead.
    """

    def __init__(self, directory: Path) -> None:
        self.started_path = directory / "started.fifo"
        self.release_path = directory / "release.fifo"
        self.lifeline_path = directory / "lifeline.fifo"
        for path in (self.started_path, self.release_path, self.lifeline_path):
            os.mkfifo(path)
        # Held open for reading and writing so the plugin's open never blocks
        # and our reader never sees end-of-file.
        self._started_fd = os.open(self.started_path, os.O_RDWR | os.O_NONBLOCK)
        # Opened before any writer: Linux reports the end of a FIFO only to a
        # reader that was there when a writer came (and then left).
        self._lifeline_fd = os.open(self.lifeline_path, os.O_RDONLY | os.O_NONBLOCK)

    def plugin_code(self, *, with_helper: bool = False) -> str:
        """``with_helper``: the plugin first starts a helper process that holds the
        lifeline and the plugin's standard output and never ends by itself (as a
        plugin's own helpers may), so ``ended()`` waits for it too."""
        helper = (
            "import subprocess\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
            "pass_fds=(_life,))\n"
        )
        return (
            f"_life = os.open({str(self.lifeline_path)!r}, os.O_RDWR)\n"
            + (helper if with_helper else "")
            + f"_release = os.open({str(self.release_path)!r}, os.O_RDWR)\n"
            f"with open({str(self.started_path)!r}, 'w') as _s:\n"
            "    _s.write(str(os.getpid()) + '\\n')\n"
            "os.read(_release, 1)\n"
        )

    @staticmethod
    async def _read(fd: int, *, line: bool) -> bytes:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb")
        )
        try:
            return await (reader.readline() if line else reader.read())
        finally:
            transport.close()

    async def started(self) -> int:
        return int(await self._read(os.dup(self._started_fd), line=True))

    async def ended(self) -> None:
        """Wait until every writer of the lifeline (the plugin) is gone."""
        assert await self._read(os.dup(self._lifeline_fd), line=False) == b""

    def release(self) -> None:
        fd = os.open(self.release_path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)

    def close(self) -> None:
        os.close(self._started_fd)
        os.close(self._lifeline_fd)


async def drain() -> None:
    """Wait until every other task on the loop has finished (no timers)."""
    current = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not current]
    if others:
        await asyncio.wait(others)
