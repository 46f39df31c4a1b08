"""Shared settings of the fuzz tests: bounded for CI, longer with ``make fuzz``.

``KUBEREFLECTOR_FUZZ_EXAMPLES`` sets the number of examples per test (200 by
default, a few seconds each; ``make fuzz`` runs 20,000).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("KUBEREFLECTOR_FUZZ_EXAMPLES", "200"))

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Apply to every fuzz test (under @given)."""

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=24)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=16,
)
"""Anything JSON or YAML can hold (NaN and huge integers included)."""
