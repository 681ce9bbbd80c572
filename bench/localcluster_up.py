"""Benchmark ``localcluster up`` from cached binaries: time to Ready and RSS per component.

Targets: Ready in < 20 s, every component < 1.5 GiB RSS. Run:
``python bench/localcluster_up.py --runs 3`` (needs ``localcluster build`` done first).
Exit code 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

from localcluster import build, cluster

READY_TARGET_S = 20.0
RSS_TARGET_BYTES = int(1.5 * 1024**3)


def _tree_rss(pid: int) -> int:
    """RSS of a component including its children (the node agent runs pods as children)."""
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def one_run(settle: float) -> tuple[float, dict[str, int]]:
    with tempfile.TemporaryDirectory(prefix="localcluster-bench-") as d:
        t0 = time.monotonic()
        state = cluster.up(Path(d) / "state", quiet=True, bind_to_parent=True)
        ready = time.monotonic() - t0
        try:
            time.sleep(settle)  # let controllers finish their initial sync before measuring
            rss = {n: _tree_rss(c.pid) for n, c in state.components.items()}
        finally:
            cluster.down(Path(state.state_dir), quiet=True)
    return ready, rss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--settle", type=float, default=5.0, help="seconds to wait after Ready before sampling RSS"
    )
    args = parser.parse_args()
    if not build.have_binaries():
        print("binaries missing: run `localcluster build` first", file=sys.stderr)
        return 2
    times: list[float] = []
    rss_runs: list[dict[str, int]] = []
    for i in range(args.runs):
        ready, rss = one_run(args.settle)
        times.append(ready)
        rss_runs.append(rss)
        print(
            f"run {i + 1}: ready in {ready:.2f}s; "
            + ", ".join(f"{n}={v / 2**20:.0f}MiB" for n, v in rss.items()),
            flush=True,
        )
    med = statistics.median(times)
    names = sorted({n for r in rss_runs for n in r})
    med_rss = {n: int(statistics.median([r.get(n, 0) for r in rss_runs])) for n in names}
    print(
        f"\nlocalcluster {build.K8S_VERSION}: up -> Ready median {med:.2f}s "
        f"(min {min(times):.2f}s, max {max(times):.2f}s, {args.runs} runs; "
        f"target < {READY_TARGET_S:.0f}s)"
    )
    for n in names:
        print(f"  {n:<24} RSS median {med_rss[n] / 2**20:8.1f} MiB")
    print(
        f"  {'total':<24} RSS median {sum(med_rss.values()) / 2**20:8.1f} MiB "
        f"(target per component < {RSS_TARGET_BYTES / 2**30:.1f} GiB)"
    )
    ok = med < READY_TARGET_S and all(v < RSS_TARGET_BYTES for v in med_rss.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
