"""CPU of kubetune's service processes while nothing happens: what an idle install costs, and
what each Experiment pays for every second it runs, whatever its trials do.

Starts a local cluster with the `local` overlay (e2e_throughput's `kubetune_cluster`: the
services are processes of this environment, run by the node agent), waits `--settle` seconds,
then reads each service process's user + system CPU from /proc over `--seconds`. Prints CPU-ms
per second per service (median of `--repeat` windows) and the load average. The lease
renewals (every 2 s for the four leader-elected processes) and the kubelet-style probes of the
node agent are part of it, as on a cluster.

    python bench/controller_idle.py [--seconds 30] [--repeat 3] [--settle 20]

Run from an environment with every service installed (e.g. `.tox/type/bin/python`), as
bench/e2e_throughput.py. Prints figures; no asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from e2e_throughput import kubetune_cluster

SERVICES = (
    "experiment-controller",
    "suggestion-controller",
    "trial-controller",
    "webhook",
    "db-manager",
    "ui",
)
TICK = os.sysconf("SC_CLK_TCK")


def service_cpu(bin_dir: str) -> dict[str, float]:
    """CPU-s so far of each service process started from `bin_dir`, by service."""
    out: dict[str, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        script = argv[1].decode(errors="replace") if len(argv) > 1 else ""  # python <script>
        name = script.rsplit("/", 1)[1] if script.startswith(bin_dir + "/") else ""
        if name in SERVICES:
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICK
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--settle", type=float, default=20.0)
    args = parser.parse_args()
    bin_dir = str(Path(sys.prefix) / "bin")  # where the node agent runs the services from
    with tempfile.TemporaryDirectory() as work, kubetune_cluster(Path(work) / "cluster"):
        time.sleep(args.settle)
        print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        windows: dict[str, list[float]] = {name: [] for name in SERVICES}
        for _ in range(args.repeat):
            start, began = service_cpu(bin_dir), time.monotonic()
            time.sleep(args.seconds)
            end, took = service_cpu(bin_dir), time.monotonic() - began
            for name in SERVICES:
                if name in end:
                    windows[name].append(1000 * (end[name] - start.get(name, 0.0)) / took)
        print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    total = 0.0
    for name, values in windows.items():
        if values:
            median = statistics.median(values)
            total += median if name != "ui" else 0.0
            print(f"{name:24s} {median:6.2f} CPU-ms/s")
    print(f"{'all but the UI':24s} {total:6.2f} CPU-ms/s")


if __name__ == "__main__":
    main()
