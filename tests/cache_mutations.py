"""A pytest plugin (``-p cache_mutations`` in pyproject's addopts): the whole suite runs
with the cache mutation detector on (client-go's KUBE_CACHE_MUTATION_DETECTOR), so a
test whose code changes an object an informer cached fails, naming the object and the
paths changed."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("KUBEREFLECTOR_CACHE_MUTATION_DETECTOR", "1")

from kubereflector.testing import check_cache_mutations


@pytest.fixture(autouse=True)
def _no_cache_mutations() -> Iterator[None]:
    """After each test: no informer's cached object was changed in place."""
    yield
    check_cache_mutations()
