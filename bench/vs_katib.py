"""kubetune against upstream Katib v0.19.0, side by side: the same Experiment on each, interleaved.

Each run starts a local cluster of its own (the control plane, the node agent) for one system:
Katib from its own `katib-standalone-postgres` manifests and binaries built from its Go module
(`localcluster build-katib`, `katibinstall`; PostgreSQL from Debian), or kubetune's `local`
overlay. Both run e2e_throughput's Experiment: random search over one double, a batch Job
trial that sleeps S s and prints `loss=`, StdOut collector, N trials at parallelism P.
Repeats alternate, Katib then kubetune, so both see the same load; one cluster runs at a time
(Katib's goptuna binds 0.0.0.0:6789, which kubetune's db-manager forwarder holds on its
loopback address).

CPU is counted per process group with cgroup v1 cpuacct (bench/cpuacct.py), exited
processes included: kube-apiserver + etcd, KCM + scheduler, the node agent, and the pods
sorted by component (controllers, db-manager, PostgreSQL, collector, algorithm, trial; each
container's program the moment it execs; kubetune's controllers also each on its own line).
"Own CPU" is the sum of the system's pods, trials' own processes included, and `other`: pod
processes no rule names, the trial wrappers' helpers (both systems' `tee`, kubetune's `mkfifo`
and `rm`); the node agent's per-container machinery (sandbox, nsenter, launcher) is shown apart
as `runtime`. Counters are
read when the Experiment is created and when it is Succeeded. `--audit` also prints the API
requests per trial by client (e2e_throughput's audit-log count).

    python bench/vs_katib.py --trials 40 --seconds 3 --parallel 8 --repeat 3
    python bench/vs_katib.py --trials 20 --seconds 1 --parallel 1 --repeat 3
    python bench/vs_katib.py --systems kubetune --audit --trials 40 --seconds 1 --parallel 8

Run as root from an environment with every service installed (e.g. `.tox/type/bin/python`),
as bench/e2e_throughput.py. Prints figures; no asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
from cpuacct import RUNTIME, CpuGroups, PodSorter
from e2e_throughput import (
    BENCH_CLIENT,
    TRAINING_FILE,
    audited_requests,
    bench_kubeconfig,
    kubetune_cluster,
    measure,
    print_requests,
)

from kubetune.kube import NAMESPACES, Kube, connect
from localcluster import katibinstall

Obj = dict[str, Any]
SYSTEMS = ("katib", "kubetune")
# Command-line substring -> component, first match wins: the trial's own processes first (their
# command lines, Katib's `sh -c` wrapper's too, name the training script), then the sidecar
# collector and the algorithm (their arguments name the db-manager's Service).
TRIAL = (TRAINING_FILE, "trial")
RULES = {
    "katib": [
        TRIAL,
        ("file-metricscollector", "collector"),
        ("suggestion-goptuna", "algorithm"),
        ("katib-controller", "controllers"),
        ("katib-db-manager", "db-manager"),
        ("postgres", "postgresql"),
    ],
    "kubetune": [
        TRIAL,
        ("pns-collector", "collector"),
        ("suggestion-algorithm", "algorithm"),
        ("experiment-controller", "controllers.experiment"),
        ("suggestion-controller", "controllers.suggestion"),
        ("trial-controller", "controllers.trial"),
        ("bin/webhook", "controllers.webhook"),
        ("db-manager", "db-manager"),
    ],
}
POD = "pod-"


@contextlib.contextmanager
def katib_cluster(state_dir: Path, audit: bool = False) -> Iterator[Any]:
    with katibinstall.running(state_dir, audit=audit) as (state, _):
        yield state


CLUSTERS: dict[str, Callable[..., contextlib.AbstractContextManager[Any]]] = {
    "katib": katib_cluster,
    "kubetune": kubetune_cluster,
}


@contextlib.contextmanager
def accounted(groups: CpuGroups, system: str, state: Any) -> Iterator[None]:
    """Put the cluster's processes in `system`'s groups and sort its pods while inside."""
    comps = state.components
    for name in ("etcd", "kube-apiserver"):
        groups.add(f"{system}/apiserver-etcd", comps[name].pid)
    for name in ("kube-controller-manager", "kube-scheduler"):
        groups.add(f"{system}/control", comps[name].pid)
    agent = comps["nodeagent"].pid
    sorter = PodSorter(groups, f"{system}/nodeagent", agent, RULES[system], f"{system}/{POD}")
    groups.add(f"{system}/nodeagent", agent)
    # What runs already (the installed system's pods) is sorted once by its command line.
    for child in psutil.Process(agent).children(recursive=True):
        group = sorter.classify(child.pid)
        if group is not None:
            groups.add(group, child.pid)
    sorter.start()
    if not sorter.on_exec:
        print("no process events (root needed): pods sorted by a 50 ms poll only", flush=True)
    try:
        yield
    finally:
        sorter.stop()


def _wait_gone(kube: Kube, namespace: str, timeout: float = 180) -> None:
    """The next run starts once this one's pods (and their ports) are gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kube.get(NAMESPACES, namespace)
        except Exception:  # noqa: BLE001 - NotFound (or the cluster going away) ends the wait
            return
        time.sleep(0.5)
    print(f"[vs_katib] namespace {namespace} still there after {timeout:.0f} s", file=sys.stderr)


def figures(system: str, result: Obj, trials: int) -> Obj:
    """One run's figures; CPU-s per trial by group."""
    counted: dict[str, float] = result["counted"]
    prefix = f"{system}/"
    per_trial = {
        k.removeprefix(prefix): v / trials for k, v in counted.items() if k.startswith(prefix)
    }
    pods = {k.removeprefix(POD): v for k, v in per_trial.items() if k.startswith(POD)}
    own = sum(v for k, v in pods.items() if k != RUNTIME)
    # A component of several processes (`controllers.<process>`) is shown summed and by process.
    for part, value in list(pods.items()):
        whole, dot, process = part.partition(".")
        if dot:
            pods[whole] = pods.get(whole, 0.0) + value
            pods[f"{whole}: {process}"] = pods.pop(part)
    return {
        "wall / ideal": result["ratio"],
        "overhead p50 s": result["overhead_p50"],
        "Experiment -> first Trial s": result["first_trial"],
        "own CPU-s / trial": own,
        "apiserver+etcd CPU-s / trial": per_trial.get("apiserver-etcd", 0.0),
        **{f"  {k} CPU-s / trial": v for k, v in sorted(pods.items())},
        "  KCM+scheduler CPU-s / trial": per_trial.get("control", 0.0),
        "  node agent CPU-s / trial": per_trial.get("nodeagent", 0.0),
        "machine busy": result["busy"],
        "load before": result["load"][0],
        "load after": result["load"][1],
    }


def table(runs: dict[str, list[Obj]]) -> None:
    """Medians per system and kubetune/Katib."""
    keys: list[str] = []
    for system in SYSTEMS:
        for run in runs[system]:
            after = -1  # a figure only one system has goes right after the one before it
            for k in run:
                if k not in keys:
                    keys.insert(after + 1, k)
                after = keys.index(k)
    print(f"\n{'figure (median)':<40}{'Katib':>10}{'kubetune':>10}{'kt/Katib':>10}")
    for key in keys:
        if key.startswith("load"):
            continue
        values = {s: [r[key] for r in runs[s] if isinstance(r.get(key), float)] for s in SYSTEMS}
        med = {s: statistics.median(v) if v else float("nan") for s, v in values.items()}
        ratio = med["kubetune"] / med["katib"] if med["katib"] else float("nan")
        print(f"{key:<40}{med['katib']:>10.3f}{med['kubetune']:>10.3f}{ratio:>10.2f}")
    for system in (s for s in SYSTEMS if runs[s]):
        loads = "; ".join(f"{r['load before']} -> {r['load after']}" for r in runs[system])
        print(f"load average ({system}, per run): {loads}")


def run_once(system: str, args: argparse.Namespace, groups: CpuGroups, work: Path) -> Obj:
    state_dir = Path(tempfile.mkdtemp(prefix=f"{system}-", dir=work))
    with CLUSTERS[system](state_dir, audit=args.audit) as state, accounted(groups, system, state):
        kube = Kube(connect(bench_kubeconfig(state) if args.audit else state.kubeconfig))
        print(f"\n== {system} ==", flush=True)
        result = measure(kube, args, sample=groups.seconds)
        requests = audited_requests(state, result) if args.audit else None
        _wait_gone(kube, result["namespace"])
    out = figures(system, result, args.trials)
    if requests is not None:
        print_requests(requests, args.trials)
        own = sum(n for (client, _, _), n in requests.items() if client != BENCH_CLIENT)
        out["API requests / trial (not the bench's)"] = own / args.trials
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vs_katib", description=__doc__)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1, help="interleaved runs per system")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument(
        "--audit", action="store_true", help="also count API requests per trial by client"
    )
    parser.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help="which to run, comma-separated (`kubetune` alone: its own figures, e.g. before "
        "and after a change, from the environment this runs in)",
    )
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown or not systems:
        parser.error(f"--systems: {', '.join(unknown) or 'none given'}; choose from {SYSTEMS}")
    # measure()'s options that this bench does not offer.
    args.trace, args.keep_namespace, args.real_node = None, False, None
    if os.geteuid() != 0:
        parser.error("cgroup accounting needs root")
    work = Path(tempfile.mkdtemp(prefix="kubetune-vs-katib-"))
    groups = CpuGroups(f"kubetune-vs-katib-{os.getpid()}")
    runs: dict[str, list[Obj]] = {s: [] for s in SYSTEMS}
    try:
        for _ in range(args.repeat):
            for system in systems:
                runs[system].append(run_once(system, args, groups, work))
    finally:
        groups.close()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\ntrials={args.trials} seconds={args.seconds} parallel={args.parallel} "
        f"repeat={args.repeat}; CPU from cgroup v1 cpuacct"
    )
    table(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
