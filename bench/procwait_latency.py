"""Benchmark the multi-PID waiter: latency from the last training process's exit to its return.

Each run starts three wrapped training processes (the protocol's real sh wrapper) ending at
different times plus an unregistered sidecar that never exits, and measures from the moment the
last wrapper exits (seen by a thread blocked in waitpid) to ``wait_for_training`` returning.
Target: median < 100 ms. Run: ``python bench/procwait_latency.py --runs 30``.
Exit code 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kubetune import procwait, wrapperscript

TARGET_S = 0.100


def one_run(log_dir: Path, poll: float) -> float:
    """Latency of one run, in seconds (0 when the waiter returned before the reaper saw exit)."""
    sidecar = subprocess.Popen(["sleep", "60"])
    procs = [
        subprocess.Popen(["sh", "-c", wrapperscript.sh_wrap(f"sleep {s}", str(log_dir))])
        for s in ("0.05", "0.15", "0.30")
    ]
    exits: dict[int, float] = {}

    def reap(p: subprocess.Popen[bytes]) -> None:
        p.wait()
        exits[p.pid] = time.monotonic()

    threads = [threading.Thread(target=reap, args=(p,)) for p in procs]
    for t in threads:
        t.start()
    try:
        result = procwait.wait_for_training(
            log_dir, timeout=10, register_timeout=5, poll=poll, expected=len(procs)
        )
        returned = time.monotonic()
        for t in threads:
            t.join(5)
        assert result.succeeded and len(result.processes) == len(procs), result
        return max(0.0, returned - max(exits.values()))
    finally:
        sidecar.kill()
        sidecar.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--poll", type=float, default=0.02, help="waiter poll interval (s)")
    args = parser.parse_args()
    latencies = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            d = Path(tmp) / str(i)
            d.mkdir()
            latencies.append(one_run(d, args.poll))
    latencies.sort()
    median = statistics.median(latencies)
    p90 = latencies[min(len(latencies) - 1, int(0.9 * len(latencies)))]
    print(
        f"procwait latency over {args.runs} runs (poll {args.poll * 1000:g} ms): "
        f"median {median * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms, "
        f"max {latencies[-1] * 1000:.1f} ms (target median < {TARGET_S * 1000:g} ms)"
    )
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
