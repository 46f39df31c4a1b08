"""Where a watch event's time goes: the informer's pipeline stage by stage, in-process.

    .venv/bin/python benchmarks/pipeline.py [--events 20000] [--repeat 3]

No HTTP and no server: the same pre-encoded watch stream (``--events`` MODIFIED
events of ~5.5 KB Pods over 1,000 keys, in 64 KiB chunks, the loop given a turn
between chunks) is fed to each stage through ``decode_watch_stream``, in dict
and in compact mode, each case in a fresh process, ``--repeat`` runs
interleaved, the median kept. Measured: CPU time per event (all threads), and
the collector's time.

- **bare, GC off** / **bare**: decode ~4 KB batches of lines with msgspec and
  keep the newest object per key in a dict (``benchmarks/informers.py``'s bare
  watch loop, which runs with the collector off), with the collector off, and on;
- **Reflector into a Cache**: a ``Reflector`` over a ListerWatcher serving the
  stream, writing straight into a ``Cache``;
- **informer, no handler**: a ``SharedIndexInformer`` (queue, cache, processor);
- **informer + async def** / **+ def**: the same with one no-op handler, a
  coroutine one (on the loop) or a plain one (on its own thread).

Each stage's cost is the difference to the one above it. Printed: a markdown
table. Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KEYS = 1_000
CHUNK = 64 * 1024
KINDS = {
    "bare-nogc": "bare loop, GC off",
    "bare": "bare loop",
    "reflector": "Reflector into a Cache",
    "informer": "informer, no handler",
    "async": "informer + one `async def` handler",
    "def": "informer + one plain `def` handler",
}
MODES = ("dict", "compact")


def _chunks(events: int) -> list[bytes]:
    import msgspec

    sys.path.insert(0, str(HERE))
    from _pods import make_pod

    encode = msgspec.json.encode
    data = b"".join(
        encode({"type": "MODIFIED", "object": make_pod(i % KEYS, namespace="s", rv=i + 2)}) + b"\n"
        for i in range(events)
    )
    return [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]


class _Stream:
    """A ListerWatcher: an empty list at RV 1, then a watch serving the chunks
    (and then nothing, without ending)."""

    def __init__(self, chunks: list[bytes], mode: str = "dict") -> None:
        self.chunks = chunks
        self.mode = mode

    def with_object_mode(self, mode: str) -> _Stream:
        return _Stream(self.chunks, mode)

    async def list(self, options: Any) -> Any:
        from kubereflector import ListResult

        return ListResult([], "1")

    def watch(self, options: Any) -> Any:
        from kubereflector.client._lines import decode_watch_stream

        feed = iter(self.chunks)

        async def read() -> bytes:
            chunk = next(feed, None)
            if chunk is None:
                await asyncio.Event().wait()
            await asyncio.sleep(0)  # a socket read's loop turn
            return chunk or b""

        stream = self

        class _Watch:
            async def __aenter__(self) -> Any:
                return decode_watch_stream(read, "http://pipeline", object_mode=stream.mode)

            async def __aexit__(self, *exc: object) -> None:
                return None

        return _Watch()


async def _bare(chunks: list[bytes], mode: str) -> None:
    import msgspec

    from kubereflector import CompactObject

    obj_type = CompactObject if mode == "compact" else dict[str, Any]
    event_type = msgspec.defstruct("Event", [("type", str), ("object", obj_type)])
    decode_lines = msgspec.json.Decoder(event_type).decode_lines
    store: dict[tuple[str, str], Any] = {}
    tail = b""
    for chunk in chunks:
        await asyncio.sleep(0)
        data = tail + chunk if tail else chunk
        end = data.rfind(b"\n") + 1
        tail = data[end:]
        view = memoryview(data)
        start = 0
        while start < end:  # batches of ~4 KB, as the bare watch loop of informers.py
            stop = data.find(b"\n", start + 4096, end) + 1 or end
            for event in decode_lines(view[start:stop]):
                obj = event.object
                meta = obj["metadata"]
                store[(meta["namespace"], meta["name"])] = obj
            start = stop


async def _reflector(chunks: list[bytes], mode: str, events: int) -> None:
    from kubereflector import Cache, Reflector, ReflectorOptions

    options = ReflectorOptions(use_watch_list=False, idle_timeout=None)
    reflector = Reflector(_Stream(chunks, mode), Cache(), options=options)
    task = asyncio.create_task(reflector.run())
    while reflector.last_sync_resource_version != str(events + 1):  # noqa: ASYNC110 (no event)
        await asyncio.sleep(0.001)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _informer(chunks: list[bytes], mode: str, kind: str, events: int) -> None:
    from kubereflector import ReflectorOptions, ResourceEventHandlerFuncs, SharedIndexInformer

    done = threading.Event()
    seen = [0]

    def on_add(obj: Any) -> None:
        seen[0] += 1
        if seen[0] == events:
            done.set()

    def on_update(old: Any, new: Any) -> None:
        on_add(new)

    async def on_add_async(obj: Any) -> None:
        on_add(obj)

    async def on_update_async(old: Any, new: Any) -> None:
        on_add(new)

    informer: Any = SharedIndexInformer(
        _Stream(chunks),
        reflector_options=ReflectorOptions(use_watch_list=False, idle_timeout=None),
        object_mode=mode,  # type: ignore[arg-type]
    )
    if kind == "async":
        informer.add_event_handler(ResourceEventHandlerFuncs(on_add_async, on_update_async))
    elif kind == "def":
        informer.add_event_handler(ResourceEventHandlerFuncs(on_add, on_update))
    task = asyncio.create_task(informer.run())
    while not done.is_set():
        await asyncio.sleep(0.001)
        if kind == "informer" and informer.last_sync_resource_version() == str(events + 1):
            break
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def run_case(mode: str, kind: str, events: int) -> dict[str, float]:
    import kubereflector.client  # noqa: F401 - imports are not what is measured

    chunks = _chunks(events)
    collected = [0.0, 0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collected[1] = time.perf_counter()
        else:
            collected[0] += time.perf_counter() - collected[1]

    gc.collect()
    gc.callbacks.append(on_gc)
    if kind == "bare-nogc":
        gc.disable()
    start = time.process_time()
    if kind.startswith("bare"):
        asyncio.run(_bare(chunks, mode))
    elif kind == "reflector":
        asyncio.run(_reflector(chunks, mode, events))
    else:
        asyncio.run(_informer(chunks, mode, kind, events))
    cpu = time.process_time() - start
    gc.enable()
    gc.callbacks.remove(on_gc)
    return {"us": cpu / events * 1e6, "gc_us": collected[0] / events * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        mode, kind = args.case.split(":")
        print(json.dumps(run_case(mode, kind, args.events)))
        return

    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.repeat):  # interleaved: each round runs every case once
        for mode in MODES:
            for kind in KINDS:
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--case",
                        f"{mode}:{kind}",
                        "--events",
                        f"{args.events}",
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                runs.setdefault((mode, kind), []).append(json.loads(out.strip().splitlines()[-1]))
    sys.path.insert(0, str(HERE))
    from _measure import machine

    print(
        f"\n{machine()}; {args.events:,} events of ~5.5 KB Pods over {KEYS:,} keys; "
        f"CPU per event, medians of {args.repeat} interleaved runs.\n"
    )
    print("| stage | dict (µs) | + | GC (µs) | compact (µs) | + | GC (µs) |")
    print("|---|---|---|---|---|---|---|")
    # "+": the stage's own cost, against the stage it adds to (a handler: the
    # informer without one; the Reflector: the bare loop with the collector on).
    base = {"reflector": "bare", "informer": "reflector", "async": "informer", "def": "informer"}
    for kind, label in KINDS.items():
        cells = [label]
        for mode in MODES:
            median = {
                name: statistics.median(r[name] for r in runs[(mode, kind)])
                for name in ("us", "gc_us")
            }
            step = ""
            if kind in base:
                below = statistics.median(r["us"] for r in runs[(mode, base[kind])])
                step = f"{median['us'] - below:+.1f}"
            cells += [f"{median['us']:.1f}", step, f"{median['gc_us']:.1f}"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
