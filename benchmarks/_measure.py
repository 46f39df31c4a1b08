"""Measuring helpers shared by the benchmark scripts: GC pauses, RSS, the machine line."""

from __future__ import annotations

import gc
import os
import platform
import threading
import time
from typing import Any

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class GcRecorder:
    """Records every collection of the cyclic GC (generation, seconds) via ``gc.callbacks``."""

    def __init__(self) -> None:
        self.events: list[tuple[int, float, float]] = []  # (generation, start, seconds)
        self._start = 0.0

    def __enter__(self) -> GcRecorder:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            now = time.perf_counter()
            self.events.append((info["generation"], self._start, now - self._start))

    def between(self, start: float, end: float) -> dict[str, float]:
        """Seconds and counts of the collections that started in [start, end)."""
        young = [s for g, t, s in self.events if start <= t < end and g < 2]
        full = [s for g, t, s in self.events if start <= t < end and g == 2]
        return {
            "gc_young": sum(young),
            "gc_full": sum(full),
            "gc_full_count": len(full),
            "gc_total": sum(young) + sum(full),
        }


def rss_bytes() -> int:
    """The resident set size of this process now (Linux: /proc/self/statm)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:  # pragma: no cover - not Linux
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def machine_cpu() -> tuple[int, int] | None:
    """The whole machine's CPU time so far, busy and total, in clock ticks (Linux:
    /proc/stat; ``None`` elsewhere). Two readings give how busy every core was between."""
    try:
        with open("/proc/stat", "rb") as f:
            ticks = [int(t) for t in f.readline().split()[1:]]
    except OSError:  # pragma: no cover - not Linux
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def busy_fraction(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """How busy the machine's cores were between two :func:`machine_cpu` readings (1.0: every
    core all the time)."""
    if before is None or after is None or after[1] == before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


class RssSampler:
    """Samples RSS every ``interval`` seconds in a thread; ``peak`` is the highest seen."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_bytes())


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            mem_kb = int(f.readline().split()[1])
        memory = f", {mem_kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        memory = ""
    return (
        f"{cpu}, {os.cpu_count()} cores{memory}, {platform.system()} {platform.machine()}, "
        f"{platform.python_implementation()} {platform.python_version()}"
    )


def versions() -> str:
    from importlib.metadata import version

    names = ("kubereflector", "aiohttp", "msgspec", "kubernetes")
    return ", ".join(f"{n} {version(n)}" for n in names)
