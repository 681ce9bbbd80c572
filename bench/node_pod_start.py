"""Benchmark the real node (``localcluster up --node kubelet``): pod start with a present
image, node Ready time, and the node's idle memory and CPU.

Pod start is from the create call to the pod's Ready condition, pods one after another (the
image is imported first, so no pull). Run as root, after ``localcluster build`` and
``localcluster build-node``, with Debian's busybox-static installed:
``python bench/node_pod_start.py --pods 20``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from localcluster import cluster, node, nodebuild, ociimage
from localcluster.nodeagent.kube import Kube

IMAGE = "localcluster.local/busybox:bench"


def _pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sleep", "3600"],
                }
            ],
        },
    }


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def start_one(kube: Kube, name: str, timeout: int = 120) -> float:
    """Seconds from the create call to the pod's Ready condition."""
    pods = "/api/v1/namespaces/default/pods"
    rv = kube.get(pods)["metadata"]["resourceVersion"]
    t0 = time.monotonic()
    kube.post(pods, _pod(name))
    for event in kube.watch(
        pods, timeout_seconds=timeout, fieldSelector=f"metadata.name={name}", resourceVersion=rv
    ):
        if _ready(event.get("object") or {}):
            return time.monotonic() - t0
    raise RuntimeError(f"pod {name} not Ready within {timeout} s")


def _node_processes(state: cluster.State) -> dict[str, list[psutil.Process]]:
    procs = {n: [psutil.Process(state.components[n].pid)] for n in ("containerd", "kubelet")}
    procs["kube-proxy"] = [psutil.Process(state.components["kube-proxy"].pid)]
    pods = [psutil.Process(p) for p in node.pod_processes()]
    procs["coredns"] = [p for p in pods if p.name() == "coredns"]
    return procs


def idle_cost(state: cluster.State, window: float) -> dict[str, tuple[float, float]]:
    """Per component: (RSS MiB, CPU % of one core over ``window`` seconds)."""
    procs = _node_processes(state)

    def cpu(ps: list[psutil.Process]) -> float:
        total = 0.0
        for p in ps:
            with contextlib.suppress(psutil.NoSuchProcess):
                t = p.cpu_times()
                total += t.user + t.system
        return total

    before = {n: cpu(ps) for n, ps in procs.items()}
    time.sleep(window)
    out = {}
    for n, ps in procs.items():
        rss = sum(p.memory_info().rss for p in ps if p.is_running())
        out[n] = (rss / 2**20, 100 * (cpu(ps) - before[n]) / window)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--idle-window", type=float, default=20.0)
    args = parser.parse_args()
    missing = nodebuild.binaries().missing()
    if missing:
        print(f"node binaries missing ({missing}): `localcluster build-node`", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="localcluster-node-bench-") as d:
        t0 = time.monotonic()
        state = cluster.up(Path(d) / "state", node_mode="kubelet", quiet=True, timeout=240)
        ready = time.monotonic() - t0
        try:
            archive = ociimage.write(ociimage.busybox(IMAGE, ("sh", "sleep")), Path(d) / "bb.tar")
            node.load(archive)
            idle = idle_cost(state, args.idle_window)
            kube = Kube(state.kubeconfig)
            times = [start_one(kube, f"bench-{i}") for i in range(args.pods)]
        finally:
            cluster.down(Path(state.state_dir), quiet=True)
    times.sort()
    p50 = statistics.median(times)
    p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
    print(f"real node: up -> node Ready and CoreDNS ready in {ready:.1f} s")
    print(
        f"pod start (present image, create -> Ready), {len(times)} pods: "
        f"p50 {p50:.2f} s, p90 {p90:.2f} s, max {times[-1]:.2f} s"
    )
    print(f"idle over {args.idle_window:.0f} s:")
    for name, (rss, cpu) in idle.items():
        print(f"  {name:<12} RSS {rss:6.1f} MiB  CPU {cpu:4.1f} % of a core")
    total_rss = sum(r for r, _ in idle.values())
    total_cpu = sum(c for _, c in idle.values())
    print(f"  {'total':<12} RSS {total_rss:6.1f} MiB  CPU {total_cpu:4.1f} % of a core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
