"""Reading and merging kubeconfig files the way kubectl does. File reads only.

Merging (``KUBECONFIG=a:b``): clusters, contexts and users are keyed by name and
the first file that defines a name wins; ``current-context`` comes from the first
file that sets it; files that do not exist are skipped. Each entry remembers the
file that defined it, because relative paths in it resolve against that file's
directory.

Errors are :class:`KubeconfigError` with a message that names files, entries and
fields, never a value: ``config.py`` turns them into ``ConfigError``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ._exec import API_VERSIONS, INTERACTIVE_MODES

_SECTIONS = (("clusters", "cluster"), ("contexts", "context"), ("users", "user"))


class KubeconfigError(Exception):
    """A kubeconfig cannot be used (safe message: no values, only names)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One named cluster, context or user and the file that defined it."""

    kind: str  # "cluster" | "context" | "user"
    name: str
    body: Mapping[str, Any]
    source: Path

    @property
    def base_dir(self) -> Path:
        return self.source.parent

    def what(self) -> str:
        return f"{self.kind} {self.name!r}"

    def string(self, key: str) -> str | None:
        """A string field; ``None`` when absent or empty.

        Anything but a string is refused, as kubectl refuses it (``server: 6443``
        and ``token: 12345`` are YAML numbers, not strings), naming the type only.
        """
        value = self.body.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise KubeconfigError(
                f"{self.what()} in {self.source}: {key} must be a string, "
                f"not {type(value).__name__}"
            )
        return value

    def flag(self, key: str) -> bool:
        value = self.body.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise KubeconfigError(f"{self.what()} in {self.source}: {key} must be true or false")
        return value

    def path(self, key: str) -> Path | None:
        """A path field, resolved against the directory of the defining file."""
        value = self.string(key)
        return None if value is None else resolve(self.base_dir, value)

    def data_or_file(self, key: str) -> bytes | None:
        """``<key>-data`` (base64, wins when set) or the content of the ``<key>`` file."""
        # Errors are raised outside ``except`` blocks so that no exception that
        # saw the data is chained to them.
        data = self.string(f"{key}-data")
        if data is not None:
            decoded: bytes | None = None
            with contextlib.suppress(binascii.Error, ValueError):
                decoded = base64.b64decode("".join(data.split()), validate=True)
            if decoded is None:
                raise KubeconfigError(
                    f"{self.what()} in {self.source}: {key}-data is not valid base64"
                )
            return decoded
        path = self.path(key)
        if path is None:
            return None
        content, problem = read_file(path)
        if content is None:
            raise KubeconfigError(
                f"{self.what()} in {self.source}: cannot read {key} file {str(path)!r} ({problem})"
            )
        return content


@dataclass(slots=True)
class Kubeconfig:
    """The merged view of one or more kubeconfig files."""

    files: list[Path] = field(default_factory=list)
    clusters: dict[str, Entry] = field(default_factory=dict)
    contexts: dict[str, Entry] = field(default_factory=dict)
    users: dict[str, Entry] = field(default_factory=dict)
    current_context: str | None = None

    def is_empty(self) -> bool:
        return not (self.clusters or self.contexts or self.users or self.current_context)

    def where(self) -> str:
        return ", ".join(str(f) for f in self.files) or "no file"


def resolve(base_dir: Path, value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else base_dir / path


def read(paths: Sequence[Path], *, must_exist: bool) -> Kubeconfig:
    """Read and merge ``paths`` in order. A missing file is an error when
    ``must_exist`` (an explicit path), else skipped (``KUBECONFIG`` entries)."""
    merged = Kubeconfig()
    for path in paths:
        if not must_exist and not path.exists():
            continue
        doc = _load_yaml(path)
        merged.files.append(path)
        for section, kind in _SECTIONS:
            target: dict[str, Entry] = getattr(merged, section)
            for entry in _entries(doc, section, kind, path):
                target.setdefault(entry.name, entry)
        current = doc.get("current-context")
        if merged.current_context is None and isinstance(current, str) and current:
            merged.current_context = current
    return merged


def read_file(path: Path) -> tuple[bytes | None, str]:
    """``(content, "")`` or ``(None, why it cannot be read)``."""
    try:
        return path.read_bytes(), ""
    except OSError as exc:
        return None, exc.strerror or type(exc).__name__
    except ValueError:  # a NUL in the path, which no file name can hold
        return None, "the path holds a NUL character"


def _load_yaml(path: Path) -> Mapping[str, Any]:
    # Errors are raised outside ``except`` blocks: the YAML error's text quotes
    # the offending line, and a decoding error holds the file's bytes.
    raw, problem = read_file(path)
    if raw is None:
        raise KubeconfigError(f"kubeconfig {str(path)!r} cannot be read ({problem})")
    text: str | None = None
    with contextlib.suppress(UnicodeDecodeError):
        text = raw.decode("utf-8")
    if text is None:
        raise KubeconfigError(f"kubeconfig {str(path)!r} is not UTF-8 text")
    doc: Any = None
    where: str | None = None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    if where is not None:
        raise KubeconfigError(f"kubeconfig {str(path)!r} is not valid YAML{where}")
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise KubeconfigError(f"kubeconfig {str(path)!r} is not a mapping at the top level")
    return doc


def _entries(doc: Mapping[str, Any], section: str, kind: str, path: Path) -> list[Entry]:
    items = doc.get(section)
    if items is None:
        return []
    if not isinstance(items, list):
        raise KubeconfigError(f"kubeconfig {str(path)!r}: {section} must be a list")
    entries: list[Entry] = []
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name:
            raise KubeconfigError(f"kubeconfig {str(path)!r}: {section}[{index}] has no name")
        body = item.get(kind)
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            raise KubeconfigError(f"kubeconfig {str(path)!r}: {kind} {name!r} must be a mapping")
        entries.append(Entry(kind, name, body, path))
    return entries


@dataclass(frozen=True, slots=True)
class ExecSettings:
    """A user's ``exec`` section, validated as clientcmd validates it."""

    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    api_version: str
    interactive_mode: str
    provide_cluster_info: bool
    install_hint: str | None


def exec_settings(user: Entry) -> ExecSettings:
    raw = user.body.get("exec")
    where = f"{user.what()} in {user.source}"
    if not isinstance(raw, Mapping):
        raise KubeconfigError(f"{where}: exec must be a mapping")
    exec_entry = Entry("user", user.name, raw, user.source)
    command = exec_entry.string("command")
    if command is None:
        raise KubeconfigError(f"{where}: exec needs a command")
    # A command with a path separator is relative to the kubeconfig's directory;
    # a bare name is looked up on PATH.
    if os.sep in command or (os.altsep is not None and os.altsep in command):
        command = str(resolve(user.base_dir, command))
    api_version = exec_entry.string("apiVersion")
    if api_version is None:
        raise KubeconfigError(f"{where}: exec needs an apiVersion")
    if api_version not in API_VERSIONS:
        raise KubeconfigError(
            f"{where}: exec apiVersion {api_version!r} is not supported "
            f"(use one of {', '.join(API_VERSIONS)})"
        )
    args_raw = raw.get("args") or []
    if not isinstance(args_raw, list) or not all(isinstance(a, str) for a in args_raw):
        raise KubeconfigError(f"{where}: exec args must be a list of strings")
    env: dict[str, str] = {}
    env_raw = raw.get("env") or []
    if not isinstance(env_raw, list):
        raise KubeconfigError(f"{where}: exec env must be a list of name/value pairs")
    for item in env_raw:
        name = item.get("name") if isinstance(item, Mapping) else None
        value = item.get("value", "") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name or not isinstance(value, str | int | float):
            raise KubeconfigError(f"{where}: exec env entries need a name and a string value")
        env[name] = str(value)
    mode = exec_entry.string("interactiveMode")
    if mode is None:
        if api_version.endswith("/v1"):
            raise KubeconfigError(f"{where}: exec interactiveMode must be set for {api_version}")
        mode = "IfAvailable"  # the v1beta1 default
    if mode not in INTERACTIVE_MODES:
        raise KubeconfigError(
            f"{where}: exec interactiveMode {mode!r} is not one of {', '.join(INTERACTIVE_MODES)}"
        )
    return ExecSettings(
        command=command,
        args=tuple(args_raw),
        env=env,
        api_version=api_version,
        interactive_mode=mode,
        provide_cluster_info=exec_entry.flag("provideClusterInfo"),
        install_hint=exec_entry.string("installHint"),
    )
