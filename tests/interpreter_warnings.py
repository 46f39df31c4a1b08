"""A pytest plugin (``-p interpreter_warnings`` in pyproject's addopts): suite-wide
warning filters that depend on the interpreter.

Python 3.10's asyncio leaves an SSL transport for the garbage collector to close
when a TLS connection is shut down by the peer mid-way (its ``_SSLProtocolTransport``
then warns ``unclosed transport`` from ``__del__``): CPython gh-90476, fixed in 3.11
by the rewritten ``asyncio.sslproto``. The webhook server and the emulator's
webhook client speak TLS to each other in-process, so on 3.10 those warnings come
from asyncio itself, not from code here; on 3.11 and later any such warning still
fails the test (``filterwarnings = ["error"]``).
"""

from __future__ import annotations

import sys

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if sys.version_info < (3, 11):
        config.addinivalue_line(
            "filterwarnings",
            "ignore:Exception ignored in. <function _SSLProtocolTransport.__del__"
            ":pytest.PytestUnraisableExceptionWarning",
        )
