"""CPU of the training container's wrapper per trial: the `sh` script the webhook puts around
the training command (`kubetune.wrapperscript.wrap_argv`, StdOut: teed into the metrics file).

The command is `true`, so what is measured is the wrapper alone: its shell, the programs it
runs (`mkfifo`, `tee`, ...) and its subshells, in user + system CPU of
the exited children (`RUSAGE_CHILDREN`). Every external program is a fork and exec in every
trial pod. `--before DIR` (a checkout's `shared/src`) measures that checkout's wrapper too,
alternating, so both see the same load. Prints medians in CPU-ms and the load average.

    python bench/wrapper_cost.py [--runs 200] [--before /work/wt/before/shared/src]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ARGV = """
import json, sys
sys.path.insert(0, sys.argv[1])
try:
    from kubetune import wrapperscript
except ImportError:  # a checkout from before the wrapper had its own module
    from kubetune import procwait as wrapperscript
argv = wrapperscript.wrap_argv(["true"], sys.argv[2], metrics_file=sys.argv[2] + "/m.log")
print(json.dumps(argv))
"""


def wrapped(source: Path, log_dir: str) -> list[str]:
    """The wrapped `true` of the checkout whose `shared/src` is `source`."""
    out = subprocess.run(
        [sys.executable, "-c", ARGV, str(source), log_dir],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    argv: list[str] = json.loads(out)
    return argv


def child_cpu_ms(argv: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return used * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--before", type=Path, help="an older checkout's shared/src")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent / "shared" / "src"
    sources = {"this checkout": here}
    if args.before is not None:
        sources["before"] = args.before
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as log_dir:
        argvs = {name: wrapped(source, log_dir) for name, source in sources.items()}
        figures: dict[str, list[float]] = {name: [] for name in sources}
        for _ in range(args.runs):
            for name, argv in argvs.items():
                figures[name].append(child_cpu_ms(argv))
    for name, values in figures.items():
        print(f"{name:14s} wrapper CPU-ms per trial: median {statistics.median(values):.2f}")
    if "before" in figures:
        ratio = statistics.median(figures["this checkout"]) / statistics.median(figures["before"])
        print(f"ratio (this checkout / before): {ratio:.2f}")
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
