"""Python code run in a child process with a cap on the address space it may add.

For tests of bounds: code that would materialise something huge (a grid of 9e18 points) dies
there of MemoryError within the cap, so the test fails instead of eating a shared machine.
"""

from __future__ import annotations

import subprocess
import sys

_PRELUDE = """
import os, resource
_used = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
resource.setrlimit(resource.RLIMIT_AS, (_used + {extra},) * 2)
"""


def run(
    setup: str, code: str, stdin: str = "", extra: int = 512 << 20, timeout: float = 120
) -> str:
    """Run `setup` (imports), then `code` with at most `extra` more bytes of address space;
    its stdout. Fails (AssertionError with the child's stderr) when the child does not exit 0,
    and raises subprocess.TimeoutExpired after `timeout` seconds."""
    script = f"{setup}\n{_PRELUDE.format(extra=extra)}\n{code}\n"
    result = subprocess.run(
        [sys.executable, "-c", script],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout
