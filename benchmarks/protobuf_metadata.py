"""Should compact mode ask kube-apiserver for protobuf? A measured answer for built-in kinds.

    .venv/bin/python benchmarks/protobuf_metadata.py --kubeconfig PATH [--pods 10000] [--repeat 5]

Needs a real cluster (the emulator serves no protobuf) with the namespace
``kr-bench-<pods>`` that ``benchmarks/informers.py --kubeconfig`` creates (its
Pods carry managedFields, as real ones do). Without ``--kubeconfig`` it says so
and measures nothing.

Compact mode decodes a list's metadata and keeps each object's spec and status
as raw JSON (``msgspec.Raw``). The protobuf alternative the issue asks about:
request ``application/vnd.kubernetes.protobuf``, decode ``ObjectMeta`` from it,
keep the rest as raw protobuf. Both halves are measured:

1. **the server's share**: the list at resourceVersion "0" read to its last
   byte, nothing decoded, in each encoding (wall seconds, the median of
   ``--repeat``);
2. **the client's share**: decoding that body (CPU seconds, median): JSON with
   compact mode's own decoder (``msgspec``, compiled), JSON into plain dicts,
   and protobuf with a prototype decoder of ``ObjectMeta`` in pure Python (a
   wire-format walker: the scalar fields, labels, annotations, owner references
   and finalizers decoded, managedFields, spec and status kept as bytes). The
   prototype's metadata is checked against the JSON's, object for object, so
   its figure is the cost of a correct decode.

What the prototype leaves out, and a real one would need: reading ``spec`` or
``status`` of a protobuf object means decoding it by the schema of its kind (a
generated table per built-in kind, with Kubernetes' special types: Time,
Quantity, IntOrString, RawExtension); CRDs stay JSON (the server has no
protobuf for them).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import ssl
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _measure import machine  # noqa: E402

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# -- the prototype: ObjectMeta from the protobuf wire format --------------------------------


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    b = buf[i]
    if b < 0x80:
        return b, i + 1
    result, shift, i = b & 0x7F, 7, i + 1
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def _fields(buf: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(field number, value or start, end) of each field of ``buf[start:end]``: a varint's
    value (end -1), or a length-delimited field's bounds."""
    i = start
    while i < end:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 2:
            n, i = _varint(buf, i)
            yield number, i, i + n
            i += n
        elif wire == 0:
            value, i = _varint(buf, i)
            yield number, value, -1
        elif wire in (1, 5):  # fixed64 / fixed32: no ObjectMeta field uses them
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire} at byte {i}")


def _text(buf: memoryview, a: int, b: int) -> str:
    return str(buf[a:b], "utf-8")


def _time(buf: memoryview, a: int, b: int) -> str:
    seconds = next((value for number, value, _ in _fields(buf, a, b) if number == 1), 0)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _pair(buf: memoryview, a: int, b: int) -> tuple[str, str]:
    key = value = ""
    for number, c, d in _fields(buf, a, b):
        if number == 1:
            key = _text(buf, c, d)
        elif number == 2:
            value = _text(buf, c, d)
    return key, value


_OWNER_TEXT = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion"}
_OWNER_BOOL = {6: "controller", 7: "blockOwnerDeletion"}


def _owner(buf: memoryview, a: int, b: int) -> dict[str, Any]:
    ref: dict[str, Any] = {}
    for number, c, d in _fields(buf, a, b):
        if number in _OWNER_TEXT:
            ref[_OWNER_TEXT[number]] = _text(buf, c, d)
        elif number in _OWNER_BOOL:
            ref[_OWNER_BOOL[number]] = bool(c)
    return ref


_META_TEXT = {1: "name", 2: "generateName", 3: "namespace", 4: "selfLink", 5: "uid"}


def _object_meta(buf: memoryview, a: int, b: int) -> dict[str, Any]:
    """k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta (generated.proto's field numbers)."""
    meta: dict[str, Any] = {}
    for number, c, d in _fields(buf, a, b):
        if number in _META_TEXT:
            if d > c:  # proto2 sends "" where JSON's omitempty leaves the field out
                meta[_META_TEXT[number]] = _text(buf, c, d)
        elif number == 6:
            meta["resourceVersion"] = _text(buf, c, d)
        elif number == 7:
            if c:  # likewise 0
                meta["generation"] = c
        elif number == 8:
            meta["creationTimestamp"] = _time(buf, c, d)
        elif number == 9:
            meta["deletionTimestamp"] = _time(buf, c, d)
        elif number == 10:
            meta["deletionGracePeriodSeconds"] = c
        elif number == 11:
            key, value = _pair(buf, c, d)
            meta.setdefault("labels", {})[key] = value
        elif number == 12:
            key, value = _pair(buf, c, d)
            meta.setdefault("annotations", {})[key] = value
        elif number == 13:
            meta.setdefault("ownerReferences", []).append(_owner(buf, c, d))
        elif number == 14:
            meta.setdefault("finalizers", []).append(_text(buf, c, d))
        elif number == 17:
            meta.setdefault("managedFields", []).append(bytes(buf[c:d]))  # kept raw
    return meta


def decode_protobuf_list(data: bytes) -> list[tuple[dict[str, Any], bytes, bytes]]:
    """A protobuf list body (the ``k8s\\0`` envelope, a runtime.Unknown around the
    list): each item's ObjectMeta decoded, its spec and status kept as bytes."""
    buf = memoryview(data)
    if bytes(buf[:4]) != MAGIC:
        raise ValueError("not a Kubernetes protobuf body")
    raw = next((c, d) for number, c, d in _fields(buf, 4, len(buf)) if number == 2)
    items = []
    for number, a, b in _fields(buf, *raw):
        if number != 2:  # 1: the ListMeta
            continue
        meta: dict[str, Any] = {}
        spec = status = b""
        for field, c, d in _fields(buf, a, b):
            if field == 1:
                meta = _object_meta(buf, c, d)
            elif field == 2:
                spec = bytes(buf[c:d])
            elif field == 3:
                status = bytes(buf[c:d])
        items.append((meta, spec, status))
    return items


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


def _check(protobuf: list[tuple[dict[str, Any], bytes, bytes]], items: list[Any]) -> None:
    """The prototype's metadata equals the JSON's, object for object (managedFields aside)."""
    if len(protobuf) != len(items):
        raise SystemExit(f"protobuf gave {len(protobuf)} items, JSON {len(items)}")
    for (meta, spec, status), obj in zip(protobuf, items, strict=True):
        expected = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
        got = {k: v for k, v in meta.items() if k != "managedFields"}
        if got != expected:
            raise SystemExit(f"metadata differs for {expected.get('name')}: {got} != {expected}")
        if not spec or not status:
            raise SystemExit(f"{expected.get('name')}: spec or status missing from protobuf")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kubeconfig", help="the cluster (required: the emulator has no protobuf)")
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not args.kubeconfig:
        print("protobuf_metadata.py measures a real cluster: give --kubeconfig (nothing measured)")
        return

    import msgspec

    from kubereflector.client._compact_list import decode_compact_list as _decode_compact_list

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
    _check(decode_protobuf_list(pb_body), items)
    del items

    rows = [
        (
            "JSON, compact mode's decoder",
            json_reads,
            _cpu(_decode_compact_list, json_body, args.repeat),
        ),
        ("JSON, plain dicts", json_reads, _cpu(msgspec.json.decode, json_body, args.repeat)),
        (
            "protobuf, ObjectMeta (prototype)",
            pb_reads,
            _cpu(decode_protobuf_list, pb_body, args.repeat),
        ),
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


if __name__ == "__main__":
    main()
