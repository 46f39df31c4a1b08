"""Run first by every Python program the tests start (``tests/programs.py`` puts
this directory at the front of ``PYTHONPATH``), before the program's own code.

* **Ctrl-C as from a terminal.** A process started with SIGINT ignored keeps it
  ignored, and Python then installs no ``KeyboardInterrupt`` handler: a shell
  without job control (``sh -c 'make test &'``, a CI step run in the background)
  starts its background jobs that way, and every process they start inherits it.
  A test that sends SIGINT to a program means Ctrl-C, so the program gets
  Python's usual SIGINT handler back (and SIGTERM its default action) whatever
  the test runner inherited.
* **Stacks on demand.** With ``KUBEREFLECTOR_TEST_STACKS=<file>`` in the
  environment, :mod:`faulthandler` writes every thread's stack to that file when
  the program gets SIGABRT (a test that gave up waiting sends it), and the
  program ends without a core dump. The variable is removed from the program's
  environment, so programs it starts do not write over the same file.
"""

from __future__ import annotations

import faulthandler
import os
import resource
import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

_path = os.environ.pop("KUBEREFLECTOR_TEST_STACKS", None)
if _path:
    _soft, _hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, _hard))
    # A bare descriptor, open for the process' life (a file object would be
    # reported unclosed at exit, under -W default).
    faulthandler.enable(file=os.open(_path, os.O_WRONLY | os.O_TRUNC), all_threads=True)
