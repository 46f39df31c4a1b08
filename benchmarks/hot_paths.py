"""Each compiled module's gain: the per-event operations of the modules mypyc compiles,
timed in this interpreter's form of kubereflector, and optionally beside another's.

    .venv/bin/python benchmarks/hot_paths.py [--against .venv-compiled/bin/python]
                                             [--repeat 7] [--objects 1000]

``make bench`` runs it on the pure form, ``make bench-compiled`` on the compiled one
(``KUBEREFLECTOR_MYPYC=1``; ``make bench-compiled MYPYC_MODULES="cache/store.py"``
compiles one module alone). With ``--against PYTHON`` each case also runs under that
interpreter (another virtualenv: the other form), the two taking turns, and the table
gains its ratio. Per case: ``--objects`` distinct ~0.3 KB objects over 10 namespaces,
the operation applied to each of them 20 times; the best of ``--repeat`` runs, each in a
fresh process; nanoseconds per operation. The pipeline of a whole informer, stage by
stage, is ``benchmarks/pipeline.py``'s. Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROUNDS = 20

# case -> (the module whose code it times, what one operation is)
CASES = {
    "keys": ("cache/keys.py", "meta_namespace_key_func(obj)"),
    "store": ("cache/store.py", "Cache.update(obj), one namespace index"),
    "fifo": ("cache/fifo.py, _aio/wakeup.py", "RealFIFO.update(obj) + pop_nowait"),
    "delta_fifo": ("cache/delta_fifo.py", "DeltaFIFO.update(obj) + pop_nowait"),
    "workqueue": ("workqueue/queue.py", "WorkQueue add + get_nowait + done"),
}


def _objects(count: int) -> list[dict[str, Any]]:
    return [
        {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": f"pod-{i}",
                "namespace": f"ns-{i % 10}",
                "uid": f"uid-{i}",
                "resourceVersion": str(i + 1),
                "labels": {"app": f"app-{i % 7}"},
            },
            "spec": {"nodeName": f"node-{i % 5}"},
        }
        for i in range(count)
    ]


def _case(name: str, objs: list[dict[str, Any]]) -> Callable[[], None]:
    """One run of ``name``: ROUNDS operations on each object."""
    import kubereflector as kr
    from kubereflector.workqueue import WorkQueue

    if name == "keys":
        key = kr.meta_namespace_key_func

        def run() -> None:
            for _ in range(ROUNDS):
                for obj in objs:
                    key(obj)

    elif name == "store":
        cache = kr.Cache(indexers={kr.NAMESPACE_INDEX: kr.meta_namespace_index_func})

        def run() -> None:
            for _ in range(ROUNDS):
                for obj in objs:
                    cache.update(obj)

    elif name in ("fifo", "delta_fifo"):
        known = kr.Cache()
        queue: Any = kr.RealFIFO(known_objects=known) if name == "fifo" else kr.DeltaFIFO()

        def drop(item: object, initial: bool) -> None:
            return None

        def run() -> None:
            for _ in range(ROUNDS):
                for obj in objs:
                    queue.update(obj)
                while len(queue):
                    queue.pop_nowait(drop)

    elif name == "workqueue":
        work: WorkQueue[str] = WorkQueue()
        names = [obj["metadata"]["name"] for obj in objs]

        def run() -> None:
            for _ in range(ROUNDS):
                for item in names:
                    work.add(item)
                for _ in names:
                    work.done(work.get_nowait())

    else:
        raise ValueError(f"unknown case {name!r}")
    return run


def run_case(name: str, count: int) -> dict[str, Any]:
    """Time one case in this process: nanoseconds per operation."""
    import kubereflector

    run = _case(name, _objects(count))
    run()  # warm up (and fill the store: later runs update, as an informer does)
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    return {
        "ns": seconds / (ROUNDS * count) * 1e9,
        "compiled": list(kubereflector.__compiled__),
    }


def _measure(python: str, name: str, count: int) -> dict[str, Any]:
    out = subprocess.run(
        [python, __file__, "--case", name, "--objects", str(count)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def _form(compiled: list[str]) -> str:
    return f"compiled ({len(compiled)} modules)" if compiled else "pure Python"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--against", metavar="PYTHON", help="another interpreter (form) too")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.objects)))
        return

    pythons = [sys.executable] + ([args.against] if args.against else [])
    best: dict[tuple[str, str], float] = {}
    forms: dict[str, str] = {}
    for _ in range(args.repeat):  # interleaved: each round runs every case in each form
        for name in CASES:
            for python in pythons:
                result = _measure(python, name, args.objects)
                forms[python] = _form(result["compiled"])
                key = (python, name)
                best[key] = min(best.get(key, float("inf")), result["ns"])

    sys.path.insert(0, str(HERE))
    from _measure import machine

    print(
        f"\n{machine()}; {args.objects:,} objects x {ROUNDS} per run, "
        f"best of {args.repeat} runs in fresh processes; ns per operation.\n"
    )
    # The ratio is pure / compiled when the two forms are one of each (above 1: the
    # compiled form is faster), else this interpreter's time / the other's.
    slow, fast = pythons[0], pythons[-1]
    if forms[slow] != "pure Python" and forms[fast] == "pure Python":
        slow, fast = fast, slow
    header = ["case", "module", "operation", *(forms[python] for python in pythons)]
    if args.against:
        header.append(f"{forms[slow]} / {forms[fast]}")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, (module, operation) in CASES.items():
        cells = [name, module, operation, *(f"{best[(python, name)]:.0f}" for python in pythons)]
        if args.against:
            cells.append(f"{best[(slow, name)] / best[(fast, name)]:.2f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
