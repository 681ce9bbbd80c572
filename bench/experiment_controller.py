"""experiment-controller figures: reconcile time, RSS and object sizes at scale; control overhead.

Scale (`--trials 1000 10000`): in a fresh namespace, an Experiment (Running, maxTrialCount above
the trial count so it stays running) gets N Trials created directly with Succeeded statuses and
observations, and its Suggestion N assignments (standing in for the algorithm). Then the real
`experiment-controller` process starts (namespace-scoped): time to the first status counting N,
mean reconcile time over `--touches` reconciles (from its /metrics histogram), its RSS, and the
stored sizes of the Experiment and the Suggestion.

Overhead (`--overhead-trials 500 --parallel 50`): an Experiment whose assignments are all handed
out up front, so only the controller is measured. The bench plays the trial-controller: each Trial
"runs" `--run-time` s after it appears and is marked Succeeded. Per trial: time from a trial
finishing to the next Trial being created (p50, p99); the whole Experiment against the sum of the
trials' own run times.

    python bench/experiment_controller.py --kubeconfig $KUBECONFIG [--trials 1000 10000]
        [--overhead-trials 500] [--parallel 50] [--run-time 0.2] [--skip-scale] [--skip-overhead]
        [--kept-names 1000]

Needs the CRDs installed and `experiment-controller` (services/experiment-controller) on PATH or
importable by this Python. Targets (issue 8): overhead p50 < 300 ms; Experiment and Suggestion
< 256 KiB at 10,000 trials; controller < 200 MiB RSS at 10,000 trials.

`--history-bytes 65536` gives every Trial of the scale runs a metric history (three metrics,
10,000 reports each, thinned by kubetune.metrichistory to that bound): run once without and once
with it to see what the history costs the controller (issue 15: RSS may grow by <= 20%).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil

from kubetune import errors, metrichistory, naming
from kubetune.kube import EXPERIMENTS, NAMESPACES, SUGGESTIONS, TRIALS, Kube, connect
from kubetune_testkit import builders
from kubetune_testkit.processes import free_port
from kubetune_testkit.standins.services import trial_status
from kubetune_testkit.waiting import wait_for

Obj = dict[str, Any]


def experiment(name: str, namespace: str, max_trials: int, parallel: int) -> Obj:
    """A random search over `lr` whose trials are Jobs that echo it (never run here)."""
    return builders.experiment(
        name,
        namespace,
        trial_parameters=builders.references(lr="lr"),
        primary_container="main",
        trial_spec=builders.trial_job(["echo", "${trialParameters.lr}"], container="main"),
        parallelTrialCount=parallel,
        maxTrialCount=max_trials,
        resumePolicy="Never",
    )


def assignment(exp: str, index: int) -> Obj:
    return {
        "name": naming.trial_name(exp, str(index)),
        "parameterAssignments": [{"name": "lr", "value": f"{0.01 + (index % 90) / 1000:.3f}"}],
    }


def succeeded_status(value: float) -> Obj:
    now = "2026-01-01T00:00:00Z"
    status = trial_status("Succeeded", round(value, 6))
    return {"startTime": now, "completionTime": now, **status}


def start_controller(kubeconfig: str | None, namespace: str, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubetune_experiment_controller.main",
            *([f"--kubeconfig={kubeconfig}"] if kubeconfig else []),
            f"--watch-namespace={namespace}",
            "--no-leader-elect",
            f"--probe-port={port}",
            "--probe-address=127.0.0.1",
            "--log-level=warning",
        ],
    )


def reconcile_metrics(port: int) -> tuple[float, float]:
    """(sum of seconds, count) of the controller's reconcile histogram."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith("kubetune_reconcile_duration_seconds_sum{"):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith("kubetune_reconcile_duration_seconds_count{"):
            count = float(line.rsplit(" ", 1)[1])
    return total, count


def make_namespace(kube: Kube, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def size(kube: Kube, res: Any, name: str, namespace: str) -> int:
    return len(json.dumps(kube.get(res, name, namespace), separators=(",", ":")))


def cli_get(kubeconfig: str | None, namespace: str, name: str) -> float:
    """Seconds `kubetune get <experiment>` takes (its table of every Trial, to /dev/null)."""
    t0 = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from kubetune_cli.main import main; sys.exit(main())",
            *([f"--kubeconfig={kubeconfig}"] if kubeconfig else []),
            "-n",
            namespace,
            "get",
            name,
        ],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.monotonic() - t0


def history_of(max_bytes: int) -> Obj | None:
    """A full metric history of about `max_bytes` (None for 0): what a long trial leaves."""
    if not max_bytes:
        return None
    history = metrichistory.History(max_bytes=max_bytes)
    for name in ("loss", "accuracy", "val-loss"):
        history.extend(
            name, [f"{0.5 + i * 1e-6:.6f}" for i in range(10_000)], "2026-01-01T00:00:00Z"
        )
    return history.to_wire()


def scale(
    kube: Kube,
    kubeconfig: str | None,
    n: int,
    touches: int,
    kept: int = 1000,
    history_bytes: int = 0,
) -> None:
    namespace = make_namespace(kube, f"bench-exp-{n}")
    name = "bench"
    try:
        created = kube.create(EXPERIMENTS, experiment(name, namespace, n + 10, 5), namespace)
        owner = {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Experiment",
            "name": name,
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        started = time.monotonic()
        history = history_of(history_bytes)

        def one(index: int) -> None:
            a = assignment(name, index)
            body = {
                "apiVersion": "kubeflow.org/v1beta1",
                "kind": "Trial",
                "metadata": {
                    "name": a["name"],
                    "labels": {naming.LABEL_EXPERIMENT: name},
                    "ownerReferences": [owner],
                },
                "spec": {"parameterAssignments": a["parameterAssignments"]},
            }
            kube.create(TRIALS, body, namespace)
            status = {"status": succeeded_status(random.random())}
            if history is not None:
                status["status"][metrichistory.FIELD] = history
            kube.patch(TRIALS, a["name"], status, namespace, subresource="status")

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(one, range(n)))
        # As the algorithm stores it once every Trial exists: the last `kept` names (0 = every
        # assignment whole, as this bench wrote it before the algorithm trimmed the list).
        if kept:
            suggestions = [{"name": naming.trial_name(name, str(i))} for i in range(n)][-kept:]
        else:
            suggestions = [assignment(name, i) for i in range(n)]
        kube.create(
            SUGGESTIONS,
            {
                "apiVersion": "kubeflow.org/v1beta1",
                "kind": "Suggestion",
                "metadata": {
                    "name": name,
                    "labels": {naming.LABEL_EXPERIMENT: name},
                    "ownerReferences": [owner],
                },
                "spec": {"algorithm": {"algorithmName": "random"}, "requests": n},
            },
            namespace,
        )
        kube.patch(
            SUGGESTIONS,
            name,
            {"status": {"suggestions": suggestions, "suggestionCount": n}},
            namespace,
            subresource="status",
        )
        setup = time.monotonic() - started

        port = free_port()
        t0 = time.monotonic()
        process = start_controller(kubeconfig, namespace, port)
        try:
            wait_for(
                f"status counting {n} trials",
                lambda: (
                    ((kube.get(EXPERIMENTS, name, namespace).get("status") or {}).get("trials"))
                    == n
                ),
                timeout=600,
            )
            first = time.monotonic() - t0
            before = reconcile_metrics(port)
            for i in range(touches):
                kube.patch(
                    EXPERIMENTS, name, {"metadata": {"annotations": {"bench": str(i)}}}, namespace
                )

                def reconciled(target: float = before[1] + i + 1) -> bool:
                    return reconcile_metrics(port)[1] >= target

                wait_for("the reconcile", reconciled, timeout=120)
            after = reconcile_metrics(port)
            per = (after[0] - before[0]) / max(1.0, after[1] - before[1])
            rss = psutil.Process(process.pid).memory_info().rss / 2**20
        finally:
            process.terminate()
            process.wait(30)
        exp_size = size(kube, EXPERIMENTS, name, namespace)
        sug_size = size(kube, SUGGESTIONS, name, namespace)
        get = cli_get(kubeconfig, namespace, name)
        print(
            f"trials={n:>6}  history={history_bytes / 1024:4.0f}KiB  "
            f"setup={setup:6.1f}s  start->status={first:5.1f}s  "
            f"reconcile={per * 1000:7.1f}ms (mean of {int(after[1] - before[1])})  "
            f"rss={rss:6.1f}MiB  experiment={exp_size / 1024:6.1f}KiB  "
            f"suggestion={sug_size / 1024:6.1f}KiB  kubetune-get={get:5.2f}s  "
            f"load={' '.join(f'{x:.1f}' for x in os.getloadavg())}",
            flush=True,
        )
    finally:
        kube.delete(NAMESPACES, namespace)


def overhead(kube: Kube, kubeconfig: str | None, n: int, parallel: int, run_time: float) -> None:
    namespace = make_namespace(kube, "bench-overhead")
    name = "over"
    created_at: dict[str, float] = {}
    finished_at: list[float] = []
    done = threading.Event()
    lock = threading.Lock()
    try:
        kube.create(EXPERIMENTS, experiment(name, namespace, n, parallel), namespace)
        port = free_port()
        process = start_controller(kubeconfig, namespace, port)
        try:
            wait_for(
                "the Suggestion",
                lambda: kube.get_or_none(SUGGESTIONS, name, namespace),
                timeout=60,
            )
            rv = kube.list(TRIALS, namespace)["metadata"]["resourceVersion"]
            pending: list[tuple[float, str]] = []

            def finisher() -> None:
                while not done.is_set():
                    now = time.monotonic()
                    with lock:
                        due = [p for p in pending if p[0] <= now]
                        pending[:] = [p for p in pending if p[0] > now]
                    for _, trial in due:
                        kube.patch(
                            TRIALS,
                            trial,
                            {"status": succeeded_status(random.random())},
                            namespace,
                            subresource="status",
                        )
                        with lock:
                            finished_at.append(time.monotonic())
                    time.sleep(0.005)

            worker = threading.Thread(target=finisher, daemon=True)
            worker.start()
            t0 = time.monotonic()
            # Every assignment up front: from here on only the controller is measured.
            kube.patch(
                SUGGESTIONS,
                name,
                {
                    "status": {
                        "suggestions": [assignment(name, i) for i in range(n)],
                        "suggestionCount": n,
                    }
                },
                namespace,
                subresource="status",
            )
            while len(created_at) < n:
                try:
                    for event in kube.watch(TRIALS, namespace, resource_version=rv):
                        obj = event.get("object") or {}
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        if event.get("type") != "ADDED":
                            continue
                        trial = obj["metadata"]["name"]
                        now = time.monotonic()
                        created_at.setdefault(trial, now)
                        with lock:
                            pending.append((now + run_time, trial))
                        if len(created_at) >= n:
                            break
                except errors.Gone:
                    rv = kube.list(TRIALS, namespace)["metadata"]["resourceVersion"]
            wait_for(
                "completion",
                lambda: any(
                    c.get("type") == "Succeeded" and c.get("status") == "True"
                    for c in (kube.get(EXPERIMENTS, name, namespace).get("status") or {}).get(
                        "conditions"
                    )
                    or []
                ),
                timeout=600,
            )
            whole = time.monotonic() - t0
            done.set()
            worker.join(10)
        finally:
            process.terminate()
            process.wait(30)
        creations = sorted(created_at.values())[parallel:]
        finishes = sorted(finished_at)
        gaps = [c - f for c, f in zip(creations, finishes, strict=False) if c >= f]
        gaps.sort()
        p50 = statistics.median(gaps) * 1000 if gaps else float("nan")
        p99 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))] * 1000 if gaps else float("nan")
        serial = n * run_time
        print(
            f"overhead: trials={n} parallel={parallel} run_time={run_time}s  "
            f"finish->next created p50={p50:.0f}ms p99={p99:.0f}ms  "
            f"whole={whole:.1f}s  sum of run times={serial:.1f}s  "
            f"ideal={serial / parallel:.1f}s",
            flush=True,
        )
    finally:
        kube.delete(NAMESPACES, namespace)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), required=False)
    p.add_argument("--trials", type=int, nargs="*", default=[1000, 10000])
    p.add_argument("--touches", type=int, default=10, help="reconciles timed per scale point")
    p.add_argument(
        "--kept-names",
        type=int,
        default=1000,
        help="name-only entries in the Suggestion, as the algorithm keeps them "
        "(its --kept-trial-names); 0 = every assignment whole, the old form",
    )
    p.add_argument("--overhead-trials", type=int, default=500)
    p.add_argument("--parallel", type=int, default=50)
    p.add_argument("--run-time", type=float, default=0.2)
    p.add_argument("--skip-scale", action="store_true")
    p.add_argument("--skip-overhead", action="store_true")
    p.add_argument("--history-bytes", type=int, default=0, help="metric history per Trial")
    args = p.parse_args()
    kube = Kube(connect(args.kubeconfig))
    if not args.skip_overhead:
        overhead(kube, args.kubeconfig, args.overhead_trials, args.parallel, args.run_time)
    if not args.skip_scale:
        for n in args.trials:
            scale(kube, args.kubeconfig, n, args.touches, args.kept_names, args.history_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
