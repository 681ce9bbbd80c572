"""SIGTERM as an ordinary exit for benches that start their own cluster.

SIGTERM's default action ends the process without running its `finally` blocks, so a bench
killed by `timeout` left its etcd data in /dev/shm and its temporary directories behind (the
components themselves die with it: they are started bound to the bench's process). Raising
SystemExit instead runs the same cleanup as a normal end.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _exit(signum: int, frame: FrameType | None) -> None:
    sys.exit(128 + signum)


def exit_on_sigterm() -> None:
    """From now on SIGTERM raises SystemExit(143) in the main thread."""
    signal.signal(signal.SIGTERM, _exit)
