"""The tables ``informers.py`` prints from its results: one function per table.

``print_tables`` prints them in order: the run's header, the summary, the
initial sync, the watch, the memory, the relist, the scale rows (with
``--scale-pods``), the real cluster's sync and memory (with ``--kubeconfig``),
the GC variants (with ``--gc``), and last the targets: a ``Report`` holds the
results and collects the targets as they are judged (the scale and real-cluster
ones by their tables, the others by the two ``_targets_*`` functions), in the
order the targets table lists them. Printing only: nothing here measures or
asserts.
"""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from _informer_cases import GC_CASES, WORKLOAD
from _measure import machine, versions


class Report:
    """One run's results, read by the tables, and the targets they judged.

    ``results``: each case's median run (a dict of figures), keyed as the
    driver's ``Runner`` keeps them: ``case``, ``f"{pods}:case"`` for the scale
    rows, ``"real:case"`` for the real cluster. A missing case raises
    ``KeyError`` where a table reads it. ``targets`` keeps (name, met, shown)
    in the order they were judged. Not thread-safe; one per printing.
    """

    def __init__(self, results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
        self.results = results
        self.pods: int = args.pods
        self.events: int = args.events
        self.repeat: int = args.repeat
        self.official_repeat: int = args.official_repeat
        self.scale_pods: int = args.scale_pods
        self.kubeconfig: str | None = args.kubeconfig
        self.targets: list[tuple[str, bool, str]] = []

    def __getitem__(self, key: str) -> dict[str, Any]:
        return self.results[key]

    def __contains__(self, key: str) -> bool:
        return key in self.results

    def target(self, name: str, ok: bool, shown: str) -> None:
        """Keep a target, whether it was met, and the figure shown for it."""
        self.targets.append((name, ok, shown))

    def sec(self, key: str) -> float:
        return float(self.results[key]["seconds"])

    def rate(self, key: str) -> float:
        return float(self.results[key]["rate"])

    def kb(self, key: str) -> float:
        return float(self.results[key]["per_object"]) / 1000


def print_tables(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    """Print every table of the run (``args``: the driver's command line)."""
    report = Report(results, args)
    _header(report)
    _summary(report)
    _sync(report)
    _watch(report)
    _memory(report)
    _relist(report)
    if report.scale_pods:
        _scale(report)
    if report.kubeconfig:
        _real_sync(report)
        _real_memory(report)
    if all(case in report for case in GC_CASES):
        _gc_variants(report)
    _targets_against_bare(report)
    _targets_round_one(report)
    _targets_round_three(report)
    _targets(report)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]]) -> None:
    print(_row(header))
    print("|" + "---|" * len(header))
    for row in rows:
        print(_row(row))
    print()


def _header(report: Report) -> None:
    today = datetime.date.today().isoformat()
    print(f"\n{today}; {machine()}; {versions()}.")
    print(
        f"Medians of {report.repeat} interleaved runs ({report.official_repeat} for the "
        "official client, 1 for memory), each case in a fresh process; servers in their own "
        "processes over HTTP (the ApiServerEmulator for sync, memory and relist; the recorded "
        "server for the watch); Pods of ~5.5 KB of JSON with managedFields. The machine is "
        "shared: trust the ratios within a run more than the absolute figures.\n"
    )


def _summary(report: Report) -> None:
    """One row per measure: bare, kubereflector dict and compact, official, ratios."""
    sec, rate, kb = report.sec, report.rate, report.kb
    pods, events = report.pods, report.events
    w_bare, w_official = rate("watch-bare"), rate("watch-official")
    s_bare_wl, s_bare_list = sec("sync-bare-watchlist"), sec("sync-bare-list")
    m_bare = kb("memory-bare-tracemalloc")
    rows = []
    for label, bare, suffix, official_note in (
        ("watch-list", s_bare_wl, "", " (list)"),
        ("list at RV 0", s_bare_list, "-list", ""),
    ):
        dict_, compact = "sync-kubereflector" + suffix, "sync-kubereflector-compact" + suffix
        rows.append(
            [
                f"initial sync, {pods:,} pods, {label} (s)",
                f"{bare:.2f}",
                f"{sec(dict_):.2f}",
                f"{sec(compact):.2f}",
                f"{sec('sync-official'):.2f}{official_note}",
                f"{bare / sec(dict_):.2f}",
                f"{bare / sec(compact):.2f}",
            ]
        )
    for kind, suffix in (("`async def`", "-async"), ("plain `def`", "")):
        dict_, compact = "watch-kubereflector" + suffix, "watch-kubereflector-compact" + suffix
        rows.append(
            [
                f"watch, {events:,} events, {kind} handler (events/s)",
                f"{w_bare:,.0f}",
                f"{rate(dict_):,.0f}",
                f"{rate(compact):,.0f}",
                f"{w_official:,.0f}",
                f"{rate(dict_) / w_bare:.2f}",
                f"{rate(compact) / w_bare:.2f}",
            ]
        )
    rows.append(
        [
            "memory per cached pod, tracemalloc (KB)",
            f"{m_bare:.1f}",
            f"{kb('memory-dicts-tracemalloc'):.1f}",
            f"{kb('memory-compact-tracemalloc'):.1f}",
            f"{kb('memory-official-tracemalloc'):.1f}",
            f"{kb('memory-dicts-tracemalloc') / m_bare:.2f}",
            f"{kb('memory-compact-tracemalloc') / m_bare:.2f}",
        ]
    )
    for kind, suffix in (("plain `def`", ""), ("`async def`", "-async")):
        dict_, compact = "relist-kubereflector" + suffix, "relist-kubereflector-compact" + suffix
        rows.append(
            [
                f"relist after a 410, {pods:,} pods, {kind} handler (s, backoff excluded)",
                f"{sec('relist-bare'):.2f}",
                f"{sec(dict_):.2f}",
                f"{sec(compact):.2f}",
                f"{sec('relist-official'):.2f}",
                f"{sec(dict_) / sec('relist-bare'):.2f}",
                f"{sec(compact) / sec('relist-bare'):.2f}",
            ]
        )
    print(
        "Summary (sync times: bare / ours, higher is better; relist times: ours / bare, as "
        "the target reads, lower is better; rates and memory: ours / bare):\n"
    )
    _table(
        [
            "measure",
            "bare aiohttp+msgspec (dicts)",
            "kubereflector, dict",
            "kubereflector, compact",
            "official client",
            "dict vs bare",
            "compact vs bare",
        ],
        rows,
    )


def _sync(report: Report) -> None:
    """The initial sync of each contender, against the bare loop of its protocol."""
    print(
        "Initial sync in detail (s until has_synced; each informer against the bare loop of "
        "the same protocol; GC: collections during the sync):\n"
    )
    s_bare_wl, s_bare_list = report.sec("sync-bare-watchlist"), report.sec("sync-bare-list")
    rows = []
    for name, key, bare in (
        ("bare, watch-list stream, GC off + freeze", "sync-bare-watchlist", None),
        ("kubereflector, dict, watch-list (the default)", "sync-kubereflector", s_bare_wl),
        ("kubereflector, compact, watch-list", "sync-kubereflector-compact", s_bare_wl),
        ("bare, one list at RV 0, GC off + freeze", "sync-bare-list", None),
        ("kubereflector, dict, list at RV 0", "sync-kubereflector-list", s_bare_list),
        ("kubereflector, compact, list at RV 0", "sync-kubereflector-compact-list", s_bare_list),
        (
            "kubereflector, compact-protobuf, list at RV 0",
            "sync-kubereflector-compact-protobuf",
            s_bare_list,
        ),
        ("official SharedInformer (one list)", "sync-official", None),
    ):
        if key not in report:
            continue
        res = report[key]
        rows.append(
            [
                name,
                f"{res['seconds']:.2f}",
                "" if bare is None else f"{bare / res['seconds']:.2f}",
                f"{res['gc_young']:.3f}",
                f"{res['gc_full']:.3f} ({res['gc_full_count']})",
                "" if "after_gc_total" not in res else f"{res['after_gc_total']:.3f}",
            ]
        )
    _table(
        [
            "contender",
            "has_synced (s)",
            "bare / this",
            "GC young (s)",
            "GC full (s, n)",
            f"GC while allocating {WORKLOAD:,} after (s)",
        ],
        rows,
    )


def _watch(report: Report) -> None:
    """Events per second of each contender, against the bare loop and the official client."""
    print(f"Watch throughput in detail ({report.events:,} MODIFIED events, GC during them):\n")
    w_bare, w_official = report.rate("watch-bare"), report.rate("watch-official")
    rows = []
    for name, key in (
        ("bare (GC off)", "watch-bare"),
        ("kubereflector, dict, `async def` handler", "watch-kubereflector-async"),
        ("kubereflector, dict, plain `def` handler (its own thread)", "watch-kubereflector"),
        ("kubereflector, compact, `async def` handler", "watch-kubereflector-compact-async"),
        ("kubereflector, compact, plain `def` handler", "watch-kubereflector-compact"),
        ("official SharedInformer", "watch-official"),
        ("client-go SharedIndexInformer, protobuf (`--client-go`)", "watch-client-go"),
    ):
        if key not in report:
            continue
        res = report[key]
        rows.append(
            [
                name,
                f"{res['rate']:,.0f}",
                f"{res['rate'] / w_bare:.2f}",
                f"{res['rate'] / w_official:.1f}x",
                f"{res['gc_young']:.3f}" if "gc_young" in res else "",
                f"{res['gc_full']:.3f} ({res['gc_full_count']})" if "gc_full" in res else "",
            ]
        )
    _table(
        ["contender", "events/s", "/ bare", "/ official", "GC young (s)", "GC full (s, n)"], rows
    )


def _memory(report: Report) -> None:
    """Bytes per cached object of each cache, by tracemalloc and by RSS."""
    print("Memory per cached object after the sync, after gc.collect() (KB):\n")
    official = report.kb("memory-official-tracemalloc")
    rows = []
    for name, key in (
        ("bare dict of decoded dicts", "bare"),
        ("kubereflector, dict", "dicts"),
        ("kubereflector, dict + strip_managed_fields", "strip"),
        ("kubereflector, compact", "compact"),
        ("kubereflector, compact + strip_managed_fields", "compact-strip"),
        ("kubereflector, metadata-only", "metadata"),
        ("kubereflector, metadata-only + strip_managed_fields", "metadata-strip"),
        ("official SharedInformer (models)", "official"),
    ):
        traced = report.kb(f"memory-{key}-tracemalloc")
        rss = report.kb(f"memory-{key}-rss")
        rows.append([name, f"{traced:.1f}", f"{rss:.1f}", f"{traced / official:.2f}"])
    _table(["cache", "tracemalloc", "RSS delta", "vs official (tracemalloc)"], rows)


def _relist(report: Report) -> None:
    """The relist after a 410: time, backoff, CPU, RSS peak and the collector's work."""
    print(
        f"Relist after a 410 on {report.pods:,} synced pods (until the handler has seen the "
        "whole relist; GC after: while the application then allocates "
        f"{WORKLOAD:,} containers, i.e. collection work deferred, not saved):\n"
    )
    rows = []
    for name, key in (
        ("bare: list again into a new dict (GC off)", "relist-bare"),
        ("kubereflector, dict, plain `def` handler", "relist-kubereflector"),
        ("kubereflector, dict, `async def` handler", "relist-kubereflector-async"),
        ("kubereflector, compact, plain `def` handler", "relist-kubereflector-compact"),
        ("kubereflector, compact, `async def` handler", "relist-kubereflector-compact-async"),
        ("official", "relist-official"),
    ):
        res = report[key]
        rows.append(
            [
                name,
                f"{res['wall']:.2f}",
                f"{res['backoff']:.2f}",
                f"{res['seconds']:.2f}",
                f"{res['seconds'] / report.sec('relist-bare'):.2f}",
                f"{res['cpu']:.2f}",
                f"{res['peak'] / 1e6:.0f}",
                f"{res.get('gc_total', 0.0):.2f}",
                f"{res.get('after_gc_total', 0.0):.2f}",
            ]
        )
    _table(
        [
            "contender",
            "caught up (s)",
            "of it backoff (s)",
            "relist (s)",
            "/ bare",
            "CPU (s)",
            "RSS peak above synced (MB)",
            "GC in relist (s)",
            "GC after (s)",
        ],
        rows,
    )


def _scale(report: Report) -> None:
    """The sync of --pods and of --scale-pods Pods, its RSS, and the scale targets."""
    sec, pods, big = report.sec, report.pods, report.scale_pods
    print(
        f"Scale: the informer's watch-list sync of {pods:,} and {big:,} pods from the "
        "recorded server (RSS of the whole process: before, peak during the sync, and "
        "steady once synced, after gc.collect()), beside the bare watch-list loop (GC off), "
        "whose own growth shows what the machine adds:\n"
    )
    bare_small = sec(f"{pods}:sync-bare-watchlist")
    bare_growth = sec(f"{big}:sync-bare-watchlist") / bare_small
    rows = [
        [
            f"bare loop, {count:,} pods",
            f"{sec(f'{count}:sync-bare-watchlist'):.2f}",
            f"{sec(f'{count}:sync-bare-watchlist') / bare_small:.2f}",
            *[""] * 5,
        ]
        for count in (pods, big)
    ]
    for mode in ("dict", "compact"):
        small_s = sec(f"{pods}:scale-{mode}")
        for count in (pods, big):
            res = report[f"{count}:scale-{mode}"]
            rows.append(
                [
                    f"{mode}, {count:,} pods",
                    f"{res['seconds']:.2f}",
                    f"{res['seconds'] / small_s:.2f}",
                    f"{res['base'] / 1e6:.0f}",
                    f"{res['peak'] / 1e6:.0f}",
                    f"{res['steady'] / 1e6:.0f}",
                    f"{res['peak_over_steady']:.2f}",
                    f"{res['growth_peak_over_steady']:.2f}",
                ]
            )
        growth = sec(f"{big}:scale-{mode}") / small_s
        report.target(
            f"{mode}: {big:,}-pod sync <= {big / pods * 1.1:.1f}x the {pods:,}-pod one",
            growth <= big / pods * 1.1,
            f"{growth:.2f}x (bare loop: {bare_growth:.2f}x)",
        )
        # What the machine adds (caches, page faults) shows in the bare loop's own
        # growth: judged against it, the informer's growth is its own doing.
        report.target(
            f"{mode}: grows no faster than the bare loop (growth / bare growth <= 1.1)",
            growth <= bare_growth * 1.1,
            f"{growth / bare_growth:.2f} ({growth:.2f}x / {bare_growth:.2f}x)",
        )
        ratio = report[f"{big}:scale-{mode}"]["peak_over_steady"]
        report.target(
            f"{mode}: peak RSS during the {big:,}-pod sync <= 1.3x the steady state",
            ratio <= 1.3,
            f"{ratio:.2f}",
        )
    _table(
        [
            "informer",
            "sync (s)",
            f"/ {pods:,}-pod sync",
            "RSS before (MB)",
            "peak (MB)",
            "steady (MB)",
            "peak / steady",
            "growth: peak / steady",
        ],
        rows,
    )


def _real_sync(report: Report) -> None:
    """The initial sync against the real cluster (``--kubeconfig``), and its targets."""
    print(
        f"Against a real cluster ({report.kubeconfig}; {report.pods:,} Pods created there "
        "once, ~7 KB each with their status and managedFields):\n"
    )
    rb_wl, rb_list = report.sec("real:sync-bare-watchlist"), report.sec("real:sync-bare-list")
    rows = []
    for name, key, bare in (
        ("bare, watch-list stream", "real:sync-bare-watchlist", None),
        ("kubereflector, dict, watch-list", "real:sync-kubereflector", rb_wl),
        ("kubereflector, compact, watch-list", "real:sync-kubereflector-compact", rb_wl),
        ("bare, one list at RV 0", "real:sync-bare-list", None),
        ("kubereflector, dict, list at RV 0", "real:sync-kubereflector-list", rb_list),
        ("kubereflector, compact, list at RV 0", "real:sync-kubereflector-compact-list", rb_list),
        (
            "kubereflector, compact-protobuf, list at RV 0",
            "real:sync-kubereflector-compact-protobuf",
            rb_list,
        ),
        ("official SharedInformer (one list)", "real:sync-official", None),
        ("client-go, protobuf (one list)", "real:sync-client-go", None),
        ("client-go, JSON (one list)", "real:sync-client-go-json", None),
    ):
        if key not in report:
            continue
        res = report[key]
        rows.append(
            [name, f"{res['seconds']:.2f}", "" if bare is None else f"{bare / res['seconds']:.2f}"]
        )
    _table(["initial sync", "has_synced (s)", "bare (same protocol) / this"], rows)
    _protocol_floor(report)
    for label, key, bare in (
        ("watch-list", "real:sync-kubereflector", rb_wl),
        ("list", "real:sync-kubereflector-list", rb_list),
    ):
        ratio = bare / report.sec(key)
        report.target(
            f"real cluster: initial sync ({label}) >= 0.75 of the bare {label} loop",
            ratio >= 0.75,
            f"{ratio:.2f}",
        )
    for label, key, bare in (
        ("watch-list", "real:sync-kubereflector-compact", rb_wl),
        ("list", "real:sync-kubereflector-compact-list", rb_list),
    ):
        ratio = report.sec(key) / bare
        report.target(
            f"real cluster: compact sync ({label}) <= 0.8x the bare dict {label} loop",
            ratio <= 0.8,
            f"{ratio:.2f}x",
        )


def _protocol_floor(report: Report) -> None:
    """The server's share of each sync, per protocol (raw readers: every byte read, nothing
    decoded), and what requesting protobuf could save at most."""
    rows = []
    for name, key in (
        ("list at RV 0, JSON", "real:sync-raw-list-json"),
        ("list at RV 0, protobuf", "real:sync-raw-list-protobuf"),
        ("watch-list, JSON", "real:sync-raw-watchlist-json"),
        ("watch-list, protobuf", "real:sync-raw-watchlist-protobuf"),
    ):
        res = report[key]
        rows.append([name, f"{res['seconds']:.2f}", f"{res['bytes'] / 1e6:.1f}"])
    _table(["raw reader (the server's encoding + transfer)", "last byte (s)", "MB"], rows)
    json_floor = report.sec("real:sync-raw-list-json")
    saving = json_floor - report.sec("real:sync-raw-list-protobuf")
    compact = report.sec("real:sync-kubereflector-compact-list") - json_floor
    print(
        f"list at RV 0: protobuf would save at most {saving:.2f} s of the server's time; the"
        f" client's own share of the compact sync is {compact:.2f} s, which a protobuf decoder"
        " would have to match\n"
    )


def _real_memory(report: Report) -> None:
    """Memory per cached Pod from the real cluster (printed under ``_real_sync``'s heading),
    and client-go's heap per Pod beside it when it ran."""
    kb = report.kb
    header = ["memory per cached pod (KB)", "bare dicts", "dict", "compact", "compact-protobuf"]
    row = [
        "real cluster (tracemalloc; client-go: Go heap after GC)",
        f"{kb('real:memory-bare-tracemalloc'):.1f}",
        f"{kb('real:memory-dicts-tracemalloc'):.1f}",
        f"{kb('real:memory-compact-tracemalloc'):.1f}",
        f"{kb('real:memory-compact-protobuf-tracemalloc'):.1f}",
    ]
    for protocol, key in (
        ("protobuf", "real:sync-client-go"),
        ("JSON", "real:sync-client-go-json"),
    ):
        if key in report:
            header.append(f"client-go, {protocol}")
            row.append(f"{report[key]['heap_per_object'] / 1000:.1f}")
    _table(header, [row])


def _gc_variants(report: Report) -> None:
    """Round one's GC variants of the initial sync (``--gc``)."""
    print(
        f"The garbage collector in the informer's initial sync of {report.pods:,} pods, then "
        f"while the application allocates {WORKLOAD:,} containers (what was deferred, not "
        "saved):\n"
    )
    rows = []
    for name, key in (
        ("default (no remedy)", "gc-none"),
        ("**full collections deferred during the sync (shipped)**", "sync-kubereflector"),
        ("gc.disable() during the sync", "gc-pause"),
        ("gen-0 threshold x100 during the sync", "gc-gen0"),
        ("shipped + the application's gc.freeze() after the sync", "gc-freeze"),
    ):
        res = report[key]
        rows.append(
            [
                name,
                f"{res['seconds']:.2f}",
                f"{res['gc_total']:.3f}",
                str(res["gc_full_count"]),
                f"{res['after_gc_total']:.3f}",
                f"{res['gc_total'] + res['after_gc_total']:.3f}",
            ]
        )
    _table(
        [
            "GC handling",
            "has_synced (s)",
            "GC in sync (s)",
            "full collections in sync",
            "GC after (s)",
            "GC in sync + after (s)",
        ],
        rows,
    )


def _targets_against_bare(report: Report) -> None:
    """Judge the targets set against the bare loops (and compact's memory per Pod)."""
    sec, rate = report.sec, report.rate
    s_bare_wl, s_bare_list = sec("sync-bare-watchlist"), sec("sync-bare-list")
    w_bare = rate("watch-bare")
    for label, key, bare in (
        ("watch-list", "sync-kubereflector", s_bare_wl),
        ("list at RV 0", "sync-kubereflector-list", s_bare_list),
    ):
        ratio = bare / sec(key)
        report.target(
            f"initial sync ({label}) >= 0.75 of the bare {label} loop",
            ratio >= 0.75,
            f"{ratio:.2f}",
        )
    for kind, key in (
        ("`async def`", "watch-kubereflector-async"),
        ("plain `def`", "watch-kubereflector"),
    ):
        ratio = rate(key) / w_bare
        report.target(
            f"watch events/s >= 0.75 of the bare loop, {kind} handler",
            ratio >= 0.75,
            f"{ratio:.2f}",
        )
    for kind, suffix in (("plain `def`", ""), ("`async def`", "-async")):
        ratio = sec("relist-kubereflector" + suffix) / sec("relist-bare")
        report.target(
            f"relist <= 1.5x the bare loop's, {kind} handler", ratio <= 1.5, f"{ratio:.2f}x"
        )
    compact_kb = report.kb("memory-compact-tracemalloc")
    report.target(
        "compact: memory per pod <= 10 KB (tracemalloc)", compact_kb <= 10, f"{compact_kb:.1f} KB"
    )
    for label, key, bare in (
        ("watch-list", "sync-kubereflector-compact", s_bare_wl),
        ("list", "sync-kubereflector-compact-list", s_bare_list),
    ):
        ratio = sec(key) / bare
        report.target(
            f"compact: initial sync ({label}) <= 0.8x the bare dict {label} loop",
            ratio <= 0.8,
            f"{ratio:.2f}x",
        )
    for kind, key in (
        ("`async def`", "watch-kubereflector-compact-async"),
        ("plain `def`", "watch-kubereflector-compact"),
    ):
        ratio = rate(key) / w_bare
        report.target(
            f"compact: watch events/s >= 2x the bare dict loop, {kind} handler",
            ratio >= 2,
            f"{ratio:.2f}x",
        )


def _targets_round_one(report: Report) -> None:
    """Judge round one's targets, set against the official client."""
    sec, rate, kb = report.sec, report.rate, report.kb
    ratio = sec("sync-official") / sec("sync-kubereflector")
    report.target(
        "initial sync >= 8x faster than official (round one)", ratio >= 8, f"{ratio:.1f}x"
    )
    w_official = rate("watch-official")
    for kind, key in (
        ("`async def`", "watch-kubereflector-async"),
        ("plain `def`", "watch-kubereflector"),
    ):
        ratio = rate(key) / w_official
        report.target(
            f"watch events/s >= 6x official, {kind} handler (round one)",
            ratio >= 6,
            f"{ratio:.1f}x",
        )
    ratio = kb("memory-dicts-tracemalloc") / kb("memory-official-tracemalloc")
    report.target("memory per pod <= 0.5 of official (round one)", ratio <= 0.5, f"{ratio:.2f}")
    strip = kb("memory-strip-tracemalloc")
    report.target(
        "memory per pod <= 20 KB with strip_managed_fields (round one)",
        strip <= 20,
        f"{strip:.1f} KB",
    )


def _targets_round_three(report: Report) -> None:
    """Judge issue 27's targets: the dict sync against the real cluster's bare loops, and
    compact mode against dict mode and client-go protobuf (those with ``--client-go``)."""
    sec, rate, kb = report.sec, report.rate, report.kb
    if report.kubeconfig:
        for label, suffix in (("watch-list", "watchlist"), ("list", "list")):
            dict_key = "real:sync-kubereflector" + ("-list" if suffix == "list" else "")
            ratio = sec(f"real:sync-bare-{suffix}") / sec(dict_key)
            report.target(
                f"real cluster: dict sync ({label}) >= 0.85 of the bare {label} loop (round 3)",
                ratio >= 0.85,
                f"{ratio:.2f}",
            )
            compact_key = dict_key.replace("kubereflector", "kubereflector-compact")
            ratio = sec(compact_key) / sec(dict_key)
            report.target(
                f"real cluster: compact sync ({label}) no slower than dict (round 3)",
                ratio <= 1,
                f"{ratio:.2f}x",
            )
    if report.kubeconfig and "real:sync-client-go" in report:
        go = report["real:sync-client-go"]
        fastest = min(
            sec("real:sync-kubereflector-compact"), sec("real:sync-kubereflector-compact-list")
        )
        floor = sec("real:sync-raw-list-json")
        report.target(
            "real cluster: compact sync <= client-go protobuf's (round 3; the JSON list's "
            f"raw read, the floor, {floor:.2f} s)",
            fastest <= go["seconds"],
            f"{fastest:.2f} s vs {go['seconds']:.2f} s",
        )
        with_protobuf = sec("real:sync-kubereflector-compact-protobuf")
        report.target(
            "real cluster: compact-protobuf sync <= client-go protobuf's (round 3; the "
            f"protobuf list's raw read, the floor, {sec('real:sync-raw-list-protobuf'):.2f} s)",
            with_protobuf <= go["seconds"],
            f"{with_protobuf:.2f} s vs {go['seconds']:.2f} s",
        )
        for mode in ("compact", "compact-protobuf"):
            ratio = kb(f"real:memory-{mode}-tracemalloc") / (go["heap_per_object"] / 1000)
            report.target(
                f"real cluster: {mode} memory per pod <= 0.6 of client-go protobuf's heap "
                "(round 3)",
                ratio <= 0.6,
                f"{ratio:.2f}",
            )
    if "watch-client-go" in report:
        w_go = rate("watch-client-go")
        for kind, key in (
            ("`async def`", "watch-kubereflector-compact-async"),
            ("plain `def`", "watch-kubereflector-compact"),
        ):
            ratio = rate(key) / w_go
            report.target(
                f"compact: watch events/s >= 1.5x client-go protobuf, {kind} handler (round 3)",
                ratio >= 1.5,
                f"{ratio:.2f}x",
            )


def _targets(report: Report) -> None:
    """Every target judged above, in the order judged, and whether it was met."""
    print("Targets (this machine, this run):\n")
    _table(
        ["target", "measured", "met"],
        [[name, shown, "yes" if ok else "**no**"] for name, ok, shown in report.targets],
    )
