"""Chaos against a real kube-apiserver: does the operator example converge each time?

    python tools/chaos.py --kubeconfig KUBECONFIG --apiserver-home DIR
                          [--scenarios compaction,apiserver-kill,etcd-restart,stall]
                          [--rounds 3] [--rate 4] [--converge-within 300] [--json OUT]

DIR is where the real server's control scripts live (``start.sh``, ``stop.sh``,
``config.env``, ``run/*.pid``, ``bin/``, as ``shared/real-apiserver/setup.sh``
prepares it). THE SCENARIOS KILL AND RESTART THAT SERVER: point them at an
instance of your own, never at one others use. KUBECONFIG must reach that
instance (its port is checked against ``config.env``).

examples/configmap_replicator.py runs here, in this process (the example's own
Manager, with leader election unless ``--no-leader-election``; restarted when it
ends, as a pod would be: a silent connection may cost it its lease),
reaching the server through a loopback TCP proxy; churn writes parents and
copies directly, ``--rate`` a second. Each round of a scenario injects its
fault under churn, then stops the churn and waits until the operator has
converged: every parent with its copies and finalizer, no stray copy, and the
operator's cache equal to the server's ConfigMaps (names and
resourceVersions). The scenarios:

* ``compaction``: the server restarted with etcd compaction every few seconds
  (``KR_COMPACTION_INTERVAL``) and without its watch cache (so that etcd serves
  the watches); each round the operator's connections go silent for
  ``--silence`` seconds of churn (its lease renewals retry on new connections),
  then are reset: its watches resume from a compacted resourceVersion, get 410
  Expired and relist. (At the end the server is restarted as it was.)
* ``apiserver-kill``: kube-apiserver SIGKILLed mid-stream, restarted a few
  seconds later (etcd keeps running).
* ``etcd-restart``: etcd stopped (SIGTERM) and started again under a running
  kube-apiserver.
* ``stall``: every connection of the operator goes silent for good without
  closing (new ones work): only its stall detection (the Reflector's idle
  timeout, the client's request timeout, the lease's renew deadline) recovers.

It prints, per scenario, the rounds that converged, the worst and the median
time to converge (from the end of the fault), the relists, watch restarts and
stalls the operator's informers counted, and the operator's restarts. The exit
status is 0 when every round converged within ``--converge-within`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import faulthandler
import json
import logging
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from _replicator import REFUSED, Churn, load_example, unconverged

from kubereflector.client import Client, load_config
from kubereflector.runtime import Manager
from kubereflector.testing._tcp_proxy import TcpProxy

SCENARIOS = ("compaction", "apiserver-kill", "etcd-restart", "stall")


# -- the server's control scripts ---------------------------------------------------------------


class Server:
    """The real server's home: its control scripts and the processes they started."""

    def __init__(self, home: Path) -> None:
        self.home = home.resolve()
        for part in ("start.sh", "stop.sh", "config.env", "bin/kube-apiserver", "bin/etcd"):
            if not (self.home / part).exists():
                raise SystemExit(f"chaos: {self.home / part} is missing: not a server's home")

    def config(self) -> dict[str, str]:
        """config.env's settings (the ports)."""
        values = {}
        for line in (self.home / "config.env").read_text(encoding="utf-8").splitlines():
            name, sep, value = line.partition("=")
            if sep and not name.startswith("#"):
                values[name.strip()] = value.strip()
        return values

    def pid(self, name: str) -> int | None:
        """The pid of ``name`` (``kube-apiserver`` or ``etcd``) as start.sh recorded it,
        if that process still runs that binary (as stop.sh checks)."""
        try:
            pid = int((self.home / "run" / f"{name}.pid").read_text().strip())
            exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
        except (OSError, ValueError):
            return None
        return pid if exe == str(self.home / "bin" / name) else None

    async def kill(self, name: str, sig: signal.Signals) -> None:
        """Send ``sig`` to ``name`` and wait until it has exited (at most 60 s)."""
        pid = self.pid(name)
        if pid is None:
            raise RuntimeError(f"{name} does not run")
        os.kill(pid, sig)
        for _ in range(600):
            if not _alive(pid):
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{name} (pid {pid}) did not exit after {sig.name}")

    async def script(self, *argv: str, **env: str) -> None:
        """Run one of the control scripts; raise if it fails."""
        proc = await asyncio.create_subprocess_exec(
            str(self.home / argv[0]),
            *argv[1:],
            env={**os.environ, **env},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {out.decode(errors='replace')}")

    async def start(self, **env: str) -> None:
        await self.script("start.sh", **env)

    async def restart_apiserver(self, **env: str) -> None:
        await self.script("stop.sh", "--apiserver-only")
        await self.start(**env)


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


# -- the operator -------------------------------------------------------------------------------


@dataclass
class Counters:
    relists: int = 0
    watch_restarts: int = 0
    stalls: int = 0
    restarts: int = 0

    def add(self, manager: Manager) -> None:
        for informer in manager.factory.informers().values():
            stats = informer.stats()
            self.relists += stats.relists
            self.watch_restarts += stats.watch_restarts
            self.stalls += stats.stalls


class Operator:
    """The example's Manager in this process, restarted whenever it ends."""

    def __init__(self, kubeconfig: str, namespace: str, *, leader_elect: bool) -> None:
        self.example = load_example()
        election = ["--leader-elect", "--lease-name", "chaos", "--lease-namespace", namespace]
        self.args = self.example.parse_args(
            [
                *("--kubeconfig", kubeconfig, "--namespace", namespace),
                *(election if leader_elect else []),
                *("--metrics-port", "0", "--health-port", "0"),
            ]
        )
        self.manager: Manager | None = None
        self.counters = Counters()
        self.last_error = ""

    async def run(self) -> None:
        """Run the operator until cancelled, restarting it when it ends."""
        while True:
            manager: Manager = self.example.build(self.args)
            self.manager = manager
            try:
                async with manager:
                    await manager.run(handle_signals=False)
            except Exception as err:  # lost lease, server down at its start, ...
                self.last_error = f"{type(err).__name__}: {err}"
            finally:
                self.counters.add(manager)
                self.manager = None
            self.counters.restarts += 1
            print(f"  operator restarts ({self.last_error or 'it stopped'})", flush=True)
            await asyncio.sleep(1.0)

    def total(self) -> Counters:
        """The counters of every incarnation so far, the running one's included."""
        total = dataclasses.replace(self.counters)
        if self.manager is not None:
            total.add(self.manager)
        return total

    def cache(self) -> dict[str, str] | None:
        """The operator's cached ConfigMaps (name: resourceVersion), once it leads and
        its cache synced; else None."""
        manager = self.manager
        if manager is None or not manager.is_leader():
            return None
        informer = manager.informer_for("configmaps")
        if not informer.has_synced():
            return None
        return {
            o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.list()
        }


# -- a round ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    scenario: str
    seconds: list[float] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)


class Chaos:
    def __init__(self, args: argparse.Namespace, server: Server) -> None:
        self.args = args
        self.server = server
        self.namespace = f"kr-chaos-{uuid.uuid4().hex[:6]}"
        self.proxy: TcpProxy | None = None
        self.client: Client | None = None
        self.operator: Operator | None = None
        self.churn: Churn | None = None
        self._churning: asyncio.Task[None] | None = None

    # -- churn --------------------------------------------------------------------------

    def churn_on(self) -> None:
        assert self.churn is not None
        if self._churning is None:
            self._churning = asyncio.create_task(self.churn.run())

    async def churn_off(self) -> None:
        task, self._churning = self._churning, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def churn_for(self, seconds: float) -> None:
        self.churn_on()
        await asyncio.sleep(seconds)

    # -- convergence --------------------------------------------------------------------

    async def problems(self) -> list[str]:
        assert self.client is not None
        assert self.operator is not None
        try:
            listed = await self.client.resource("configmaps", namespace=self.namespace).list()
        except REFUSED as err:
            return [f"cannot list: {err}"]
        items = list(listed.items)
        problems = unconverged(items)
        server = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in items}
        cache = self.operator.cache()
        if cache is None:
            problems.append("the operator does not lead, or its cache has not synced")
        elif cache != server:
            missing = sorted(set(server) - set(cache))
            extra = sorted(set(cache) - set(server))
            stale = sorted(k for k in set(cache) & set(server) if cache[k] != server[k])
            problems.append(
                f"the operator's cache differs from the server (missing {missing}, "
                f"extra {extra}, stale {stale})"
            )
        return problems

    async def converge(self, outcome: Outcome, since: float) -> None:
        """Stop the churn; wait until the operator converged; note how long it took
        since ``since`` (the end of the fault)."""
        await self.churn_off()
        deadline = since + self.args.converge_within
        problems = await self.problems()
        while problems and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            problems = await self.problems()
        took = time.monotonic() - since
        if problems:
            outcome.failed.append(f"not converged after {took:.0f}s: {problems[:5]}")
            print(f"  NOT converged after {took:.1f}s: {problems[:5]}", flush=True)
        else:
            outcome.seconds.append(took)
            print(f"  converged in {took:.1f}s", flush=True)

    # -- the scenarios ------------------------------------------------------------------

    async def compaction(self, outcome: Outcome) -> None:
        every = self.args.compaction_interval
        print(f"  restarting kube-apiserver: etcd compaction every {every}, no watch cache")
        # Without the watch cache, watches are served by etcd: one resumed from a
        # compacted revision gets 410 (with it, from a window of ~75 s of events).
        await self.server.restart_apiserver(
            KR_COMPACTION_INTERVAL=every, KR_APISERVER_EXTRA_ARGS="--watch-cache=false"
        )
        await self.converge(Outcome("(restart)"), time.monotonic())
        assert self.proxy is not None
        try:
            for n in range(self.args.rounds):
                print(f" compaction round {n + 1}", flush=True)
                self.churn_on()
                self.proxy.stall()  # the operator's watches hear nothing meanwhile
                await asyncio.sleep(self.args.silence)
                self.proxy.cut()  # they resume from a resourceVersion compacted since
                cut = time.monotonic()
                await self.churn_for(5.0)
                await self.converge(outcome, cut)
        finally:
            print("  restarting kube-apiserver with its usual settings", flush=True)
            await self.server.restart_apiserver()

    async def apiserver_kill(self, outcome: Outcome) -> None:
        for n in range(self.args.rounds):
            print(f" apiserver-kill round {n + 1}", flush=True)
            await self.churn_for(8.0)
            await self.server.kill("kube-apiserver", signal.SIGKILL)
            await asyncio.sleep(3.0)  # writes are refused meanwhile
            await self.server.start()
            back = time.monotonic()
            await self.churn_for(5.0)
            await self.converge(outcome, back)

    async def etcd_restart(self, outcome: Outcome) -> None:
        for n in range(self.args.rounds):
            print(f" etcd-restart round {n + 1}", flush=True)
            await self.churn_for(8.0)
            await self.server.kill("etcd", signal.SIGTERM)
            await asyncio.sleep(3.0)
            await self.server.start()
            back = time.monotonic()
            await self.churn_for(5.0)
            await self.converge(outcome, back)

    async def stall(self, outcome: Outcome) -> None:
        assert self.proxy is not None
        for n in range(self.args.rounds):
            print(f" stall round {n + 1}", flush=True)
            await self.churn_for(8.0)
            self.proxy.stall()
            stalled = time.monotonic()
            await self.churn_for(10.0)
            await self.converge(outcome, stalled)

    # -- the run ------------------------------------------------------------------------

    async def run(self) -> list[Outcome]:
        args, server = self.args, self.server
        config = load_config(args.kubeconfig)
        port = urlsplit(config.server).port
        if str(port) != server.config().get("KR_APISERVER_PORT"):
            raise SystemExit(
                f"chaos: {args.kubeconfig} reaches port {port}, but {server.home} runs its "
                f"kube-apiserver on {server.config().get('KR_APISERVER_PORT')}"
            )
        # kill -USR1: where each task is (a run that does not end says why).
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, _print_tasks)
        await server.start()  # idempotent: ready, or started
        async with contextlib.AsyncExitStack() as stack:
            self.client = await stack.enter_async_context(Client(config))
            await self.client.resource("namespaces").create({"metadata": {"name": self.namespace}})
            assert port is not None
            self.proxy = await stack.enter_async_context(TcpProxy("127.0.0.1", port))
            proxied = _proxied_kubeconfig(args.kubeconfig, self.proxy.port)
            stack.callback(os.unlink, proxied)
            self.operator = Operator(proxied, self.namespace, leader_elect=args.leader_elect)
            self.churn = Churn(self.client, self.namespace, args.parents, args.rate)
            running = asyncio.create_task(self.operator.run())
            print(f"chaos: namespace {self.namespace}, operator through {self.proxy.port}")
            outcomes = []
            try:
                await self.churn_for(10.0)
                await self.converge(Outcome("(start)"), time.monotonic())
                for name in args.scenarios:
                    outcome = Outcome(name)
                    before = self.operator.total()
                    scenario = getattr(self, name.replace("-", "_"))
                    await scenario(outcome)
                    self._count(outcome, before)
                    outcomes.append(outcome)
            finally:
                await self.churn_off()
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
            return outcomes

    def _count(self, outcome: Outcome, before: Counters) -> None:
        assert self.operator is not None
        now = self.operator.total()
        outcome.counters = {
            f.name: getattr(now, f.name) - getattr(before, f.name)
            for f in dataclasses.fields(Counters)
        }


def _print_tasks() -> None:
    for task in asyncio.all_tasks():
        task.print_stack(file=sys.stderr)


def _proxied_kubeconfig(path: str, port: int) -> str:
    """A copy of the kubeconfig at ``path`` whose servers are the proxy on ``port``
    (same scheme, 127.0.0.1: the server's certificate names it)."""
    with open(path, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    for cluster in config.get("clusters", []):
        url = urlsplit(cluster["cluster"]["server"])
        cluster["cluster"]["server"] = f"{url.scheme}://127.0.0.1:{port}"
    fd, name = tempfile.mkstemp(prefix="kr-chaos-", suffix=".kubeconfig")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)
    return name


def report(outcomes: list[Outcome], limit: float) -> tuple[str, bool]:
    lines = [
        f"{'scenario':<16} {'converged':>9} {'worst s':>8} {'median s':>8} "
        f"{'relists':>7} {'watch restarts':>14} {'stalls':>6} {'op. restarts':>12}"
    ]
    ok = True
    for o in outcomes:
        rounds = len(o.seconds) + len(o.failed)
        worst = f"{max(o.seconds):.1f}" if o.seconds else "-"
        median = f"{statistics.median(o.seconds):.1f}" if o.seconds else "-"
        c = o.counters
        lines.append(
            f"{o.scenario:<16} {len(o.seconds):>4}/{rounds:<4} {worst:>8} {median:>8} "
            f"{c.get('relists', 0):>7} {c.get('watch_restarts', 0):>14} "
            f"{c.get('stalls', 0):>6} {c.get('restarts', 0):>12}"
        )
        lines += [f"  {failure}" for failure in o.failed]
        ok = ok and not o.failed
    every = [s for o in outcomes for s in o.seconds]
    if every:
        lines.append(f"worst convergence: {max(every):.1f}s (limit {limit:g}s)")
    return "\n".join(lines), ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--kubeconfig", required=True, help="reaches the server of --apiserver-home"
    )
    parser.add_argument("--apiserver-home", required=True, help="its start.sh, stop.sh, run/")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per scenario")
    parser.add_argument("--rate", type=float, default=4.0, help="churn writes per second")
    parser.add_argument("--parents", type=int, default=12)
    parser.add_argument("--converge-within", type=float, default=300.0, help="seconds")
    parser.add_argument("--compaction-interval", default="3s", help="etcd's, for compaction")
    parser.add_argument(
        "--silence",
        type=float,
        default=40.0,
        help="seconds the operator hears nothing (compaction)",
    )
    parser.add_argument(
        "--no-leader-election",
        dest="leader_elect",
        action="store_false",
        help="run the operator without (a silent connection then cannot cost it its lease,"
        " so its watches must notice by themselves)",
    )
    parser.add_argument("--json", help="write the outcomes there")
    parser.add_argument(
        "--log", help="write the library's log there (INFO and up, the Reflector's DEBUG too)"
    )
    args = parser.parse_args(argv)
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = sorted(set(args.scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}")
    if args.rounds < 1 or args.rate <= 0 or args.parents < 1 or args.converge_within <= 0:
        parser.error("--rounds, --rate, --parents and --converge-within must be positive")
    server = Server(Path(args.apiserver_home))
    if args.log:
        logging.basicConfig(
            filename=args.log,
            level=logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s %(message)s",
        )
        logging.getLogger("kubereflector.reflector").setLevel(logging.DEBUG)  # its cycles
    faulthandler.register(signal.SIGUSR2, all_threads=True)  # kill -USR2: its threads
    outcomes = asyncio.run(Chaos(args, server).run())
    text, ok = report(outcomes, args.converge_within)
    print(text)
    if args.json:
        data: list[dict[str, Any]] = [dataclasses.asdict(o) for o in outcomes]
        Path(args.json).write_text(json.dumps(data, indent=1), encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
