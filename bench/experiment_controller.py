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
        [--kept-names 1000] [--grow] [--create-threads 16] [--run-spec] [--trial-controller]
        [--no-old-get] [--keep-namespace] [--time-get NAMESPACE/EXPERIMENT --repeat 5]

The curve (issue 18): `--skip-overhead --grow --trials 10000 30000 100000 --touches 5
--trial-controller` grows one Experiment and measures at each size, so 100,000 Trials are
created once (two writes each, `--create-threads` at once; the API server's CPU is the limit:
~25-50 Trials/s on this machine). At each size it also times `kubetune get EXPERIMENT` (the
default view: the Experiment's status and its active Trials) and `--sort-by created` (the old
default, every Trial listed), with their CPU time and the floor of starting Python and importing
the CLI (the kubernetes client, pydantic): on a loaded machine the wall time is mostly waiting
for a core. `--trial-controller` adds the trial-controller's RSS with the namespace's Trials in
its cache. `--run-spec` gives every Trial its rendered Job, as the controller creates them
(bigger objects, about half the creation rate).

Needs the CRDs installed and `experiment-controller` (services/experiment-controller) on PATH or
importable by this Python. Targets (issue 8): overhead p50 < 300 ms; Experiment and Suggestion
< 256 KiB at 10,000 trials; controller < 200 MiB RSS at 10,000 trials.

`--history-bytes 65536` gives every Trial of the scale runs a metric history (three metrics,
10,000 reports each, thinned by kubetune.metrichistory to that bound): run once without and once
with it to see what the history costs the controller (issue 15: RSS may grow by <= 20%).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
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
from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import TrialAssignment
from kubetune.kube import EXPERIMENTS, NAMESPACES, SUGGESTIONS, TRIALS, Kube, connect
from kubetune_experiment_controller import rendering
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


def _timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+system) of a child process run to the end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cli_get(kubeconfig: str | None, namespace: str, name: str, *extra: str) -> tuple[float, float]:
    """(wall, CPU) seconds `kubetune get <experiment> [extra]` takes, output to /dev/null.
    Without `extra` the default view (the Experiment's status and its active Trials);
    `--sort-by created` is the old default (every Trial listed, sorted by creation)."""
    return _timed(
        [
            sys.executable,
            "-c",
            "import sys; from kubetune_cli.main import main; sys.exit(main())",
            *([f"--kubeconfig={kubeconfig}"] if kubeconfig else []),
            "-n",
            namespace,
            "get",
            name,
            *extra,
        ]
    )


def cli_floor() -> tuple[float, float]:
    """(wall, CPU) seconds of starting Python and importing the CLI (the kubernetes client
    and the pydantic models): what any `kubetune` command costs before its first request."""
    return _timed([sys.executable, "-c", "import kubetune_cli.main"])


def time_get(kubeconfig: str | None, target: str, repeat: int, old: bool) -> None:
    """Medians over `repeat` runs of `kubetune get` on an existing Experiment (NAMESPACE/NAME):
    the default view, the first 20 of `--all` and (`old`) the whole sorted table, against the
    import floor."""
    namespace, _, name = target.partition("/")
    runs: dict[str, list[tuple[float, float]]] = {
        "floor": [],
        "get": [],
        "all-limit-20": [],
        "old-get": [],
    }
    for _ in range(repeat):
        runs["floor"].append(cli_floor())
        runs["get"].append(cli_get(kubeconfig, namespace, name))
        runs["all-limit-20"].append(cli_get(kubeconfig, namespace, name, "--all", "--limit", "20"))
        if old:
            runs["old-get"].append(cli_get(kubeconfig, namespace, name, "--sort-by", "created"))
    status = (Kube(connect(kubeconfig)).get(EXPERIMENTS, name, namespace).get("status")) or {}
    parts = [f"{target}: trials={status.get('trials')}"]
    for what, values in runs.items():
        if values:
            wall = statistics.median(v[0] for v in values)
            cpu = statistics.median(v[1] for v in values)
            parts.append(f"{what}={wall:.2f}s (cpu {cpu:.2f}s)")
    parts.append(f"median of {repeat}; load={' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("  ".join(parts), flush=True)


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


class Scale:
    """One Experiment in a fresh namespace that `grow` takes to N finished Trials (created
    directly, as if the experiment-controller had and the trial-controller had finished them),
    and `measure` times the real controller at that size."""

    def __init__(
        self,
        kube: Kube,
        kubeconfig: str | None,
        max_trials: int,
        *,
        threads: int = 16,
        run_spec: bool = False,
        history_bytes: int = 0,
    ) -> None:
        self.kube = kube
        self.kubeconfig = kubeconfig
        self.threads = threads
        self.run_spec = run_spec
        self.history_bytes = history_bytes
        self.history = history_of(history_bytes)
        self.namespace = make_namespace(kube, f"bench-exp-{max_trials}")
        self.name = "bench"
        self.obj = kube.create(
            EXPERIMENTS, experiment(self.name, self.namespace, max_trials + 10, 5), self.namespace
        )
        self.model = Experiment.model_validate(self.obj)
        self.trials = 0
        self.setup_seconds = 0.0

    def body(self, index: int) -> Obj:
        """The Trial the experiment-controller would create for assignment `index`: with
        `run_spec`, the whole Trial rendered from the template (its Job included)."""
        a = TrialAssignment.model_validate(assignment(self.name, index))
        run = None
        if self.run_spec:
            run = rendering.render_run_spec(self.model, a, self.namespace, None)
        trial = rendering.build_trial(self.obj, self.model, a, run)
        if not self.run_spec:
            # Only what the controller reads (the bench's old, smaller Trials).
            trial["spec"] = {"parameterAssignments": trial["spec"]["parameterAssignments"]}
        return trial

    def one(self, index: int) -> None:
        body = self.body(index)
        name = body["metadata"]["name"]
        self.kube.create(TRIALS, body, self.namespace)
        status = {"status": succeeded_status(random.random())}
        if self.history is not None:
            status["status"][metrichistory.FIELD] = self.history
        self.kube.patch(TRIALS, name, status, self.namespace, subresource="status")

    def grow(self, n: int, kept: int) -> None:
        """Trials up to `n` (two writes each: create, status), then the Suggestion as the
        algorithm leaves it: the last `kept` names (0 = every assignment whole, the old form)."""
        started = time.monotonic()
        done = self.trials
        lock = threading.Lock()
        mark = time.monotonic()

        def counted(index: int) -> None:
            nonlocal done, mark
            self.one(index)
            with lock:
                done += 1
                if done % 5000 == 0:
                    now = time.monotonic()
                    print(
                        f"  created {done} trials ({5000 / (now - mark):.0f}/s, "
                        f"load {os.getloadavg()[0]:.1f})",
                        file=sys.stderr,
                        flush=True,
                    )
                    mark = now

        with ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(counted, range(self.trials, n)))
        self.trials = n
        if kept:
            suggestions = [{"name": naming.trial_name(self.name, str(i))} for i in range(n)][-kept:]
        else:
            suggestions = [assignment(self.name, i) for i in range(n)]
        body = {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Suggestion",
            "metadata": {
                "name": self.name,
                "labels": {naming.LABEL_EXPERIMENT: self.name},
                "ownerReferences": [rendering.owner_reference(self.obj)],
            },
            "spec": {"algorithm": {"algorithmName": "random"}, "requests": n},
        }
        with contextlib.suppress(errors.AlreadyExists):
            self.kube.create(SUGGESTIONS, body, self.namespace)
        self.kube.patch(
            SUGGESTIONS,
            self.name,
            {"status": {"suggestions": suggestions, "suggestionCount": n}},
            self.namespace,
            subresource="status",
        )
        self.setup_seconds += time.monotonic() - started

    def measure(self, touches: int, old_get: bool, trial_controller: bool) -> None:
        """Start the controller on the namespace, wait for a status counting every Trial, time
        `touches` reconciles, read its RSS; then object sizes and `kubetune get` both ways."""
        kube, name, namespace, n = self.kube, self.name, self.namespace, self.trials
        port = free_port()
        t0 = time.monotonic()
        process = start_controller(self.kubeconfig, namespace, port)
        try:
            wait_for(
                f"status counting {n} trials",
                lambda: (
                    ((kube.get(EXPERIMENTS, name, namespace).get("status") or {}).get("trials"))
                    == n
                ),
                timeout=1800,
            )
            first = time.monotonic() - t0
            before = reconcile_metrics(port)
            for i in range(touches):
                kube.patch(
                    EXPERIMENTS, name, {"metadata": {"annotations": {"bench": str(i)}}}, namespace
                )

                def reconciled(target: float = before[1] + i + 1) -> bool:
                    return reconcile_metrics(port)[1] >= target

                wait_for("the reconcile", reconciled, timeout=600)
            after = reconcile_metrics(port)
            per = (after[0] - before[0]) / max(1.0, after[1] - before[1])
            rss = psutil.Process(process.pid).memory_info().rss / 2**20
        finally:
            process.terminate()
            process.wait(30)
        exp_size = size(kube, EXPERIMENTS, name, namespace)
        sug_size = size(kube, SUGGESTIONS, name, namespace)
        trial_size = size(kube, TRIALS, naming.trial_name(name, str(n - 1)), namespace)
        floor = cli_floor()
        get = cli_get(self.kubeconfig, namespace, name)
        old = cli_get(self.kubeconfig, namespace, name, "--sort-by", "created") if old_get else None
        tc = trial_controller_rss(self.kubeconfig, namespace) if trial_controller else 0.0
        print(
            f"trials={n:>6}  history={self.history_bytes / 1024:4.0f}KiB  "
            f"setup={self.setup_seconds:6.1f}s  start->status={first:5.1f}s  "
            f"reconcile={per * 1000:7.1f}ms (mean of {int(after[1] - before[1])})  "
            f"rss={rss:6.1f}MiB  experiment={exp_size / 1024:6.1f}KiB  "
            f"suggestion={sug_size / 1024:6.1f}KiB  trial={trial_size / 1024:5.1f}KiB  "
            f"kubetune-get={get[0]:5.2f}s (cpu {get[1]:.2f}s, import floor {floor[0]:.2f}s "
            f"cpu {floor[1]:.2f}s)  "
            + (f"old-get={old[0]:6.2f}s (cpu {old[1]:.2f}s)  " if old is not None else "")
            + (f"trial-controller-rss={tc:6.1f}MiB  " if trial_controller else "")
            + f"load={' '.join(f'{x:.1f}' for x in os.getloadavg())}",
            flush=True,
        )

    def delete(self) -> None:
        self.kube.delete(NAMESPACES, self.namespace)


def trial_controller_rss(kubeconfig: str | None, namespace: str, settle: float = 10.0) -> float:
    """The trial-controller's peak RSS (MiB) over `settle` s after its caches synced: it
    watches every Trial of the namespace (the finished ones have nothing left to do)."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubetune_trial_controller.main",
            *([f"--kubeconfig={kubeconfig}"] if kubeconfig else []),
            f"--watch-namespace={namespace}",
            "--no-leader-elect",
            f"--probe-port={port}",
            "--probe-address=127.0.0.1",
            "--log-level=warning",
        ],
    )
    try:

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                    return bool(r.status == 200)
            except OSError:
                return False

        wait_for("the trial-controller's caches", ready, timeout=1800)
        peak = 0.0
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            peak = max(peak, psutil.Process(process.pid).memory_info().rss / 2**20)
            time.sleep(0.5)
        return peak
    finally:
        process.terminate()
        process.wait(30)


def scale(
    kube: Kube,
    kubeconfig: str | None,
    sizes: list[int],
    touches: int,
    kept: int = 1000,
    *,
    history_bytes: int = 0,
    grow: bool = False,
    threads: int = 16,
    run_spec: bool = False,
    old_get: bool = True,
    trial_controller: bool = False,
    keep: bool = False,
) -> None:
    """Each size in a namespace of its own, or (`grow`) one Experiment grown through the sizes
    and measured at each: 100,000 Trials created once instead of 140,000."""
    runs = [sorted(sizes)] if grow else [[n] for n in sizes]
    for run in runs:
        bench = Scale(
            kube,
            kubeconfig,
            max(run),
            threads=threads,
            run_spec=run_spec,
            history_bytes=history_bytes,
        )
        try:
            for n in run:
                bench.grow(n, kept)
                bench.measure(touches, old_get, trial_controller)
        finally:
            if keep:
                print(f"kept namespace {bench.namespace}", file=sys.stderr, flush=True)
            else:
                bench.delete()


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
    p.add_argument(
        "--grow",
        action="store_true",
        help="one Experiment grown through the --trials sizes, measured at each",
    )
    p.add_argument(
        "--create-threads", type=int, default=16, help="Trials created at once (connections)"
    )
    p.add_argument(
        "--run-spec",
        action="store_true",
        help="Trials as the controller renders them (with their Job), not the slim form",
    )
    p.add_argument(
        "--no-old-get",
        action="store_true",
        help="skip timing `kubetune get --sort-by created` (every Trial listed: minutes at 100k)",
    )
    p.add_argument(
        "--trial-controller",
        action="store_true",
        help="also the trial-controller's RSS with every Trial of the experiment in its cache",
    )
    p.add_argument(
        "--keep-namespace",
        action="store_true",
        help="leave the scale namespace (to run `kubetune get` on it again); delete it yourself",
    )
    p.add_argument(
        "--time-get",
        metavar="NAMESPACE/EXPERIMENT",
        help="only time `kubetune get` on this existing Experiment (--repeat runs, medians)",
    )
    p.add_argument("--repeat", type=int, default=5, help="runs of --time-get")
    args = p.parse_args()
    if args.time_get:
        time_get(args.kubeconfig, args.time_get, args.repeat, not args.no_old_get)
        return 0
    kube = Kube(connect(args.kubeconfig, pool_size=max(10, args.create_threads)))
    if not args.skip_overhead:
        overhead(kube, args.kubeconfig, args.overhead_trials, args.parallel, args.run_time)
    if not args.skip_scale:
        scale(
            kube,
            args.kubeconfig,
            args.trials,
            args.touches,
            args.kept_names,
            history_bytes=args.history_bytes,
            grow=args.grow,
            threads=args.create_threads,
            run_spec=args.run_spec,
            old_get=not args.no_old_get,
            trial_controller=args.trial_controller,
            keep=args.keep_namespace,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
