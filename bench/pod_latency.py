"""Pod create-to-Running latency on a cluster run by the localcluster node agent.

Creates ~20 pods one after another in a fresh namespace and times each from the create
request to the first watch event showing ``phase=Running`` (scheduler + node agent +
status write), then prints median and p90. ``--burst`` creates them all at once instead
(the agent under load). Target: median below 1 s. Without a kubeconfig it starts its own
local cluster (``localcluster up`` in a temp dir) and stops it afterwards.

    python bench/pod_latency.py [--kubeconfig $KUBECONFIG] [--count 20] [--burst]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from sigterm import exit_on_sigterm

from localcluster.nodeagent.kube import ApiError, Kube


def _wait_sa(kube: Kube, ns: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            kube.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default")
            return
        except ApiError:
            time.sleep(0.1)
    raise SystemExit(f"no default ServiceAccount in {ns}")


def _pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "python:3.11", "command": ["sleep", "3600"]}],
        },
    }


def one(kube: Kube, ns: str, i: int) -> float:
    """Seconds from POST to the Running event of one pod."""
    name = f"lat-{i}"
    rv = kube.get(f"/api/v1/namespaces/{ns}/pods")["metadata"]["resourceVersion"]
    t0 = time.monotonic()
    kube.post(f"/api/v1/namespaces/{ns}/pods", _pod(name))
    for ev in kube.watch(
        f"/api/v1/namespaces/{ns}/pods",
        timeout_seconds=60,
        fieldSelector=f"metadata.name={name}",
        resourceVersion=rv,
    ):
        if (ev.get("object", {}).get("status") or {}).get("phase") == "Running":
            return time.monotonic() - t0
    raise SystemExit(f"pod {name} did not reach Running within 60s")


def burst(kube: Kube, ns: str, count: int) -> list[float]:
    """Create all pods at once; each one's POST-to-Running time."""
    rv = kube.get(f"/api/v1/namespaces/{ns}/pods")["metadata"]["resourceVersion"]
    created: dict[str, float] = {}
    running: dict[str, float] = {}
    done = threading.Event()

    def watch() -> None:
        for ev in kube.watch(
            f"/api/v1/namespaces/{ns}/pods", timeout_seconds=120, resourceVersion=rv
        ):
            obj = ev.get("object", {})
            name = obj.get("metadata", {}).get("name", "")
            if (obj.get("status") or {}).get("phase") == "Running" and name not in running:
                running[name] = time.monotonic()
                if len(running) == count:
                    break
        done.set()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    for i in range(count):
        created[f"burst-{i}"] = time.monotonic()
        kube.post(f"/api/v1/namespaces/{ns}/pods", _pod(f"burst-{i}"))
    if not done.wait(120):
        raise SystemExit(f"only {len(running)}/{count} pods reached Running")
    return [running[n] - created[n] for n in created]


def measure(kube: Kube, count: int, at_once: bool) -> list[float]:
    """Latencies in a fresh namespace, deleted afterwards."""
    ns = f"bench-latency-{uuid.uuid4().hex[:6]}"
    kube.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    try:
        _wait_sa(kube, ns)
        if at_once:
            return burst(kube, ns, count)
        return [one(kube, ns, i) for i in range(count)]
    finally:
        kube.delete(f"/api/v1/namespaces/{ns}")


def main() -> int:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--burst", action="store_true", help="create all pods at once")
    args = ap.parse_args()
    own_dir: Path | None = None
    if not args.kubeconfig:
        from localcluster import cluster

        own_dir = Path(tempfile.mkdtemp(prefix="bench-latency-"))
        args.kubeconfig = cluster.up(own_dir, quiet=True, bind_to_parent=True).kubeconfig
    try:
        samples = measure(Kube(args.kubeconfig), args.count, args.burst)
    finally:
        if own_dir is not None:
            from localcluster import cluster

            cluster.down(own_dir, quiet=True)
            shutil.rmtree(own_dir, ignore_errors=True)
    samples.sort()
    p90 = samples[min(len(samples) - 1, round(0.9 * len(samples)) - 1)]
    print(f"pods: {len(samples)} ({'burst' if args.burst else 'one after another'})")
    print(f"create-to-Running median: {statistics.median(samples):.3f}s")
    print(f"create-to-Running p90:    {p90:.3f}s")
    print(f"min/max: {samples[0]:.3f}s / {samples[-1]:.3f}s")
    return 0 if statistics.median(samples) < 1.0 else 1


if __name__ == "__main__":
    exit_on_sigterm()
    sys.exit(main())
