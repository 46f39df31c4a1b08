"""Metric families recorded with plain attribute arithmetic, exported through
prometheus-client at scrape time (private to :mod:`kubereflector.metrics`).

prometheus-client's own metric objects take a lock and run checks on every
``inc``/``observe`` (about 1-2 µs each); a reconcile touches a dozen of them,
which made them the largest cost of an idle reconcile. Here a child is a tiny
object whose ``inc``, ``dec``, ``set`` and ``observe`` are a few bytecodes, and a
:class:`Families` collector turns them into prometheus-client metric families
when the registry is scraped (the exposition format stays prometheus-client's).

Thread-safety: making a child (``labels``) takes a lock; updating one does not.
Each child must be updated by one thread at a time (the runtime updates its
children on its event loop, and a work queue updates its own with the queue's
lock held); under CPython's GIL a lost update is not possible for these
single-statement updates on 3.10-3.13, but they are not documented as atomic.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Sequence
from typing import Literal

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

__all__ = ["Counter", "Families", "Family", "Gauge", "Histogram"]


class Counter:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class Gauge:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)


class Histogram:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value


Kind = Literal["counter", "gauge", "histogram"]


class Family:
    """One metric name with its label names and children."""

    def __init__(
        self,
        kind: Kind,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        buckets: Sequence[float] = (),
    ) -> None:
        self.kind = kind
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.buckets = tuple(sorted(b for b in buckets if not math.isinf(b)))
        self._children: dict[tuple[str, ...], Counter | Gauge | Histogram] = {}
        self._lock = threading.Lock()

    def _child(self, values: tuple[str, ...]) -> Counter | Gauge | Histogram:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(
                    f"{self.name} has labels {self.labelnames}, got {len(values)} values"
                )
            with self._lock:
                child = self._children.get(values)
                if child is None:
                    if self.kind == "counter":
                        child = Counter()
                    elif self.kind == "gauge":
                        child = Gauge()
                    else:
                        child = Histogram(self.buckets)
                    self._children[values] = child
        return child

    def counter(self, *values: str) -> Counter:
        child = self._child(values)
        assert isinstance(child, Counter)
        return child

    def gauge(self, *values: str) -> Gauge:
        child = self._child(values)
        assert isinstance(child, Gauge)
        return child

    def histogram(self, *values: str) -> Histogram:
        child = self._child(values)
        assert isinstance(child, Histogram)
        return child

    def export(self) -> Metric:
        with self._lock:
            children = list(self._children.items())
        labels = list(self.labelnames)
        if self.kind == "counter":
            counter = CounterMetricFamily(self.name, self.documentation, labels=labels)
            for values, child in children:
                assert isinstance(child, Counter)
                counter.add_metric(list(values), child.value)
            return counter
        if self.kind == "gauge":
            gauge = GaugeMetricFamily(self.name, self.documentation, labels=labels)
            for values, child in children:
                assert isinstance(child, Gauge)
                gauge.add_metric(list(values), child.value)
            return gauge
        histogram = HistogramMetricFamily(self.name, self.documentation, labels=labels)
        bounds = [*(repr(float(b)) for b in self.buckets), "+Inf"]
        for values, child in children:
            assert isinstance(child, Histogram)
            cumulative: list[tuple[str, float]] = []
            total = 0
            for bound, count in zip(bounds, list(child.counts), strict=True):
                total += count
                cumulative.append((bound, float(total)))
            histogram.add_metric(list(values), cumulative, child.sum)
        return histogram


class Families(Collector):
    """A prometheus-client collector exporting :class:`Family` objects."""

    def __init__(self) -> None:
        self._families: list[Family] = []

    def add(self, family: Family) -> Family:
        self._families.append(family)
        return family

    def collect(self) -> Iterable[Metric]:
        return [family.export() for family in self._families]

    def describe(self) -> Iterable[Metric]:
        """The families (the registry checks their names against the others')."""
        return self.collect()
