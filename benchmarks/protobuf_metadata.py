"""compact-protobuf against compact mode: what kube-apiserver's protobuf saves in a
list, and what it costs to read.

    .venv/bin/python benchmarks/protobuf_metadata.py --kubeconfig PATH [--pods 10000] [--repeat 5]

Needs a real cluster with the namespace ``kr-bench-<pods>`` that
``benchmarks/informers.py --kubeconfig`` creates (its Pods carry managedFields, as
real ones do). Without ``--kubeconfig`` it says so and measures nothing.

Compact mode decodes a list's metadata and keeps each object's spec and status as
raw JSON; ``object_mode="compact-protobuf"`` asks for protobuf instead, decodes
``ObjectMeta`` from it and keeps the rest as the server's protobuf
(``kubereflector.protobuf``). Measured:

1. **the server's share**: the list at resourceVersion "0" read to its last byte,
   nothing decoded, in each encoding (wall seconds, the median of ``--repeat``);
2. **the client's share**: decoding that body (CPU seconds, median): JSON with
   compact mode's decoder, JSON into plain dicts, protobuf with compact-protobuf's;
3. **the price of a read**: ``obj["spec"]``, ``obj["status"]`` and
   ``obj.to_dict()`` of each kind of compact object (microseconds per object,
   over the first 2,000 Pods), and what a cache keeps (tracemalloc, per Pod).

Every compact-protobuf object is checked against the JSON's, object for object
(``obj == the dict``), so the figures are those of a correct decode.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import ssl
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import machine  # noqa: E402

PROTOBUF = "application/vnd.kubernetes.protobuf"


# -- the measurements ---------------------------------------------------------------------------


async def _read(kubeconfig: str, url: str, accept: str, repeat: int) -> tuple[bytes, list[float]]:
    """The body of ``url`` in ``accept``, read ``repeat`` times: the last body, each read's
    wall seconds."""
    import aiohttp

    from kubereflector.client import load_config

    config = load_config(kubeconfig)
    context = ssl.create_default_context()
    if config.ca_data:
        context.load_verify_locations(cadata=config.ca_data.decode())
    auth = await config.auth.authorize()
    headers = {**auth.headers, "Accept": accept, "User-Agent": "kubereflector-bench"}
    seconds = []
    body = b""
    async with aiohttp.ClientSession(
        base_url=config.server, connector=aiohttp.TCPConnector(ssl=context), headers=headers
    ) as session:
        for _ in range(repeat):
            start = time.perf_counter()
            async with session.get(url, params={"resourceVersion": "0"}) as response:
                if response.status != 200:
                    raise SystemExit(f"{url}: {response.status} {await response.text()}")
                body = await response.read()
            seconds.append(time.perf_counter() - start)
    return body, seconds


def _cpu(decode: Callable[[bytes], object], data: bytes, repeat: int) -> float:
    """The median CPU seconds of ``decode(data)``, the collector paused (as the informer's
    sync window keeps full collections out)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.process_time()
            result = decode(data)
            times.append(time.process_time() - start)
        finally:
            gc.enable()
        del result
    return statistics.median(times)


def _compact_json(body: bytes) -> list[Any]:
    """Compact mode's decode of a JSON list body (as Client.list does it)."""
    from yarl import URL

    from kubereflector.client._compact_list import compact_items, decode_compact_list

    decoded = decode_compact_list(body)
    return compact_items(decoded, decoded.items or [], URL("http://bench"))


def _compact_protobuf(body: bytes) -> list[Any]:
    """compact-protobuf's decode of a protobuf list body (as Client.list does it)."""
    from kubereflector.cache._compact_protobuf import decode_protobuf_list

    return decode_protobuf_list(body).items


def _read_cost(objects: list[Any], read: Callable[[Any], object]) -> float:
    """Microseconds per ``read(obj)`` over ``objects``."""
    start = time.perf_counter()
    for obj in objects:
        read(obj)
    return (time.perf_counter() - start) / len(objects) * 1e6


def _kept(decode: Callable[[bytes], list[Any]], body: bytes) -> float:
    """Bytes per object that ``decode(body)``'s objects keep (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    objects = decode(body)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return held / len(objects)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kubeconfig", help="the cluster (required: a real kube-apiserver)")
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not args.kubeconfig:
        print("protobuf_metadata.py measures a real cluster: give --kubeconfig (nothing measured)")
        return

    import msgspec

    url = f"/api/v1/namespaces/kr-bench-{args.pods}/pods"
    json_body, json_reads = asyncio.run(
        _read(args.kubeconfig, url, "application/json", args.repeat)
    )
    pb_body, pb_reads = asyncio.run(_read(args.kubeconfig, url, PROTOBUF, args.repeat))
    items = msgspec.json.decode(json_body)["items"]
    if len(items) != args.pods:
        raise SystemExit(
            f"{url} has {len(items)} Pods, not {args.pods}: run benchmarks/informers.py "
            f"--kubeconfig {args.kubeconfig} --pods {args.pods} first"
        )
    from_json, from_protobuf = _compact_json(json_body), _compact_protobuf(pb_body)
    for obj, expected in zip(from_protobuf, items, strict=True):
        expected.setdefault("kind", "Pod")
        expected.setdefault("apiVersion", "v1")
        if obj != expected:
            raise SystemExit(f"{expected['metadata']['name']}: protobuf and JSON differ")
    del items

    rows = [
        ("JSON, compact mode", json_reads, _cpu(_compact_json, json_body, args.repeat)),
        ("JSON, plain dicts", json_reads, _cpu(msgspec.json.decode, json_body, args.repeat)),
        ("protobuf, compact-protobuf", pb_reads, _cpu(_compact_protobuf, pb_body, args.repeat)),
    ]
    print(f"\nmachine: {machine()}")
    print(
        f"{args.pods} Pods listed at resourceVersion 0: JSON {len(json_body) / 1e6:.1f} MB, "
        f"protobuf {len(pb_body) / 1e6:.1f} MB; medians of {args.repeat}\n"
    )
    print("| encoding, decoder | server: read to the last byte | client: decode (CPU) | sum |")
    print("| --- | ---: | ---: | ---: |")
    for label, reads, cpu in rows:
        read = statistics.median(reads)
        print(f"| {label} | {read:.3f} s | {cpu:.3f} s | {read + cpu:.3f} s |")

    print("\nReading a compact object (us per Pod, first 2,000 Pods) and what it keeps:\n")
    print('| mode | obj["spec"] | obj["status"] | obj.to_dict() | kept per Pod |')
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, objects, decode, body in (
        ("compact (JSON)", from_json, _compact_json, json_body),
        ("compact-protobuf", from_protobuf, _compact_protobuf, pb_body),
    ):
        sample = objects[:2000]
        spec = _read_cost(sample, lambda obj: obj["spec"])
        status = _read_cost(sample, lambda obj: obj["status"])
        whole = _read_cost(sample, lambda obj: obj.to_dict())
        kept = _kept(decode, body) / 1000
        print(f"| {label} | {spec:.1f} | {status:.1f} | {whole:.1f} | {kept:.1f} KB |")


if __name__ == "__main__":
    main()
