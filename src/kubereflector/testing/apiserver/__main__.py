"""``python -m kubereflector.testing.apiserver``: serve the emulator until SIGINT/SIGTERM."""

from __future__ import annotations

import sys

from ._command import main

if __name__ == "__main__":
    sys.exit(main())
