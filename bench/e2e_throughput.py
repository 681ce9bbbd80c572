"""The whole chain, end to end: N trials of S seconds at parallelism P on the local overlay.

Everything real: the local control plane with its node agent (pods are host processes), the
`local` overlay of kubetune (webhook, experiment-, suggestion- and trial-controller, the
suggestion-algorithm Deployment), the pns-collector sidecar injected into each trial pod, a
random search. Each trial runs `S` seconds and prints `t_start=<epoch>` when it starts, then
`loss=...` and `t_end=<epoch>` when it is done: the collector reports those two as extra metrics,
so the Trial's observation tells when the training process itself ran.

The bench watches Trials, Jobs and Pods in its namespace and stamps the time it first sees each
stage of a trial (the API server's timestamps have whole seconds only):

    created -> job -> pod -> running -> train_start -> train_end -> observed -> succeeded -> next

(`next` = the first Trial created after this one succeeded, i.e. the slot handed on), and off
that chain `main_exited`, `pod_done`, `job_decided` (batch/v1's SuccessCriteriaMet/FailureTarget,
written before Complete/Failed) and `job_done`. It prints
the wall time from the Experiment's creation to its Succeeded condition, the ideal ceil(N/P)*S,
their ratio, the per-trial overhead ((created -> succeeded) - S) and for each stage p50/p99, with
the load average before and after. `--trace FILE` writes one JSON line per stage per trial.

    python bench/e2e_throughput.py --trials 60 --seconds 3 --parallel 8 [--trace t.jsonl]
    python bench/e2e_throughput.py --keep ...        # leave the cluster up, print KUBECONFIG
    python bench/e2e_throughput.py --kubeconfig K    # reuse a cluster with kubetune deployed
    python bench/e2e_throughput.py --audit ...       # + API requests per trial by client
    python bench/e2e_throughput.py --real-node DIR   # on a real node, kubetune's own images

`--real-node DIR` runs the same on a real node (`localcluster up --node kubelet`: kubelet,
containerd, kube-proxy, CoreDNS; root), kubetune from its own images (the OCI archives that
`python3 images/build.py --oci-dir DIR` writes) with `kustomize/overlays/real`; each trial runs
in the example trainer's image with the training script mounted from a ConfigMap.

`--audit` starts the cluster with the API server's audit log (`localcluster up --audit`, the
Metadata level) and prints the requests per trial made during the run by client (user, and the
user agent for users, e.g. the admin credentials the node agent uses), verb and resource; the bench
itself talks as the ServiceAccount `default/kubetune-bench`, so its polling is counted apart.
(`apiserver_request_total` has no client label.)

Run it from an environment with every service installed (e.g. `.tox/type/bin/python`): the
node agent runs each service's console script from this interpreter's bin directory. Targets
(issue 18, 2 cores, quiet): 60 x 3 s at P=8 ratio <= 1.5 and overhead p50 <= 1.0 s; 20 x 1 s at
P=1 ratio <= 2.0. Prints figures; no asserts.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from kubetune import naming
from kubetune.kube import (
    CONFIGMAPS,
    EXPERIMENTS,
    JOBS,
    NAMESPACES,
    PODS,
    TRIALS,
    Kube,
    Resource,
    connect,
)
from kubetune_testkit import builders
from kubetune_testkit.paths import REPO

Obj = dict[str, Any]
STAGES = [
    "created",
    "job",
    "pod",
    "running",
    "train_start",
    "train_end",
    "observed",
    "succeeded",
    "next",
]
# Stamps off the chain, shown as spans from a stage of it (where the chain's time goes).
SIDE = [
    ("train_end", "main_exited"),
    ("train_end", "pod_done"),
    ("train_end", "job_done"),
    ("main_exited", "job_decided"),
    ("job_decided", "job_done"),
    ("observed", "job_done"),
    ("job_done", "succeeded"),
]
TRAINING_FILE = "bench_training.py"
TRAINING = (
    "import sys, time\n"
    "print(f't_start={time.time():.6f}', flush=True)\n"
    "time.sleep(float(sys.argv[1]))\n"
    "print(f'loss={float(sys.argv[2]):.6f}', flush=True)\n"
    "print(f't_end={time.time():.6f}', flush=True)\n"
)


def training_script(directory: Path) -> Path:
    """TRAINING as a file: Katib's StdOut collector joins the command with spaces into
    `sh -c`, so the command must not carry the program's text."""
    path = directory / TRAINING_FILE
    path.write_text(TRAINING)
    path.chmod(0o644)
    return path


# On the real node the trial runs in the example trainer's image, TRAINING mounted from a
# ConfigMap (a host path is not there).
TRAINER_IMAGE = "docker.io/kubetune/examples:dev"
TRAINING_CONFIGMAP = "bench-training"
TRAINING_MOUNT = Path("/bench")


def training_configmap(namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": TRAINING_CONFIGMAP, "namespace": namespace},
        "data": {TRAINING_FILE: TRAINING},
    }


def in_trainer_image(job: Obj) -> Obj:
    """The trial Job run from the trainer image with TRAINING mounted at TRAINING_MOUNT."""
    pod = job["spec"]["template"]["spec"]
    (main,) = pod["containers"]
    main["image"] = TRAINER_IMAGE
    main["imagePullPolicy"] = "Never"
    main["volumeMounts"] = [{"name": "training", "mountPath": str(TRAINING_MOUNT)}]
    pod["volumes"] = [{"name": "training", "configMap": {"name": TRAINING_CONFIGMAP}}]
    return job


def experiment(
    name: str,
    namespace: str,
    trials: int,
    seconds: float,
    parallel: int,
    script: Path,
    real_node: bool = False,
) -> Obj:
    """A random search over `lr`; each trial is a Job that runs TRAINING for `seconds`."""
    python = "python3" if real_node else sys.executable
    command = [python, str(script), str(seconds), "${trialParameters.lr}"]
    job = builders.trial_job(command, container="main")
    return builders.experiment(
        name,
        namespace,
        objective_spec=builders.objective("loss", "minimize", additional=["t_start", "t_end"]),
        parameters=[
            {
                "name": "lr",
                "parameterType": "double",
                "feasibleSpace": {"min": "0.001", "max": "1.0"},
            }
        ],
        trial_parameters=builders.references(lr="lr"),
        primary_container="main",
        trial_spec=in_trainer_image(job) if real_node else job,
        parallelTrialCount=parallel,
        maxTrialCount=trials,
        maxFailedTrialCount=trials,
        resumePolicy="Never",
    )


class Stamps:
    """First time (epoch seconds, this machine's clock) each stage of each trial was seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.trials: dict[str, dict[str, float]] = {}
        self.created_order: list[tuple[float, str]] = []

    def see(self, trial: str, stage: str, when: float | None = None) -> None:
        with self.lock:
            stages = self.trials.setdefault(trial, {})
            if stage not in stages:
                stages[stage] = time.time() if when is None else when
                if stage == "created":
                    self.created_order.append((stages[stage], trial))


def _metric(trial: Obj, name: str) -> float | None:
    for m in ((trial.get("status") or {}).get("observation") or {}).get("metrics") or []:
        if m.get("name") == name:
            try:
                return float(m.get("latest"))
            except (TypeError, ValueError):
                return None
    return None


def _trial_events(stamps: Stamps, obj: Obj) -> None:
    name = obj["metadata"]["name"]
    stamps.see(name, "created")
    status = obj.get("status") or {}
    for stage, metric in (("train_start", "t_start"), ("train_end", "t_end")):
        value = _metric(obj, metric)
        if value is not None:
            stamps.see(name, stage, value)
    if _metric(obj, "loss") is not None:
        stamps.see(name, "observed")
    for c in status.get("conditions") or []:
        if c.get("type") == "Succeeded" and c.get("status") == "True":
            stamps.see(name, "succeeded")


def _trial_of(obj: Obj) -> str | None:
    labels = obj["metadata"].get("labels") or {}
    trial = labels.get(naming.LABEL_TRIAL)
    if trial:
        return str(trial)
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") in ("Trial", "Job"):
            return str(ref["name"])
    return None


def _job_events(stamps: Stamps, obj: Obj) -> None:
    trial = _trial_of(obj)
    if trial:
        stamps.see(trial, "job")
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("status") != "True":
                continue
            # batch/v1 writes SuccessCriteriaMet/FailureTarget first, Complete/Failed after.
            if c.get("type") in ("SuccessCriteriaMet", "FailureTarget", "Complete", "Failed"):
                stamps.see(trial, "job_decided")
            if c.get("type") in ("Complete", "Failed"):
                stamps.see(trial, "job_done")


def _pod_events(stamps: Stamps, obj: Obj) -> None:
    labels = obj["metadata"].get("labels") or {}
    trial = labels.get(naming.LABEL_TRIAL) or labels.get("job-name") or _trial_of(obj)
    if not trial:
        return
    stamps.see(trial, "pod")
    status = obj.get("status") or {}
    if status.get("phase") in ("Running", "Succeeded"):
        stamps.see(trial, "running")
    for c in status.get("containerStatuses") or []:
        if c.get("name") == "main" and (c.get("state") or {}).get("terminated"):
            stamps.see(trial, "main_exited")
    if status.get("phase") in ("Succeeded", "Failed"):
        stamps.see(trial, "pod_done")


def watch_forever(
    kube: Kube, res: Resource, namespace: str, handle: Any, stop: threading.Event
) -> None:
    """Feed every event of `res` in `namespace` to `handle` until `stop` (re-watching on ends)."""
    version: str | None = None
    while not stop.is_set():
        try:
            if version is None:
                listed = kube.list(res, namespace)
                for item in listed.get("items") or []:
                    handle(item)
                version = listed["metadata"]["resourceVersion"]
            for event in kube.watch(res, namespace, resource_version=version, timeout_seconds=30):
                obj = event["object"]
                if event["type"] == "ERROR":
                    version = None
                    break
                version = obj["metadata"].get("resourceVersion", version)
                if event["type"] in ("ADDED", "MODIFIED"):
                    handle(obj)
                if stop.is_set():
                    return
        except Exception as e:  # noqa: BLE001 - a dropped watch is re-listed
            print(f"[bench] watch of {res.plural} restarted: {e}", file=sys.stderr)
            version = None
            time.sleep(0.2)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def report(
    stamps: Stamps,
    args: argparse.Namespace,
    wall: float,
    load: tuple[Any, Any],
    started: float | None = None,
) -> Obj:
    trials = stamps.trials
    created = sorted(stamps.created_order)
    for st in trials.values():
        if "succeeded" in st:
            after = [t for t, _ in created if t >= st["succeeded"]]
            if after:
                st["next"] = after[0]
    ideal = math.ceil(args.trials / args.parallel) * args.seconds
    per_stage: dict[str, list[float]] = {}
    overheads: list[float] = []
    trace = open(args.trace, "w") if args.trace else None  # noqa: SIM115
    try:
        for name, st in sorted(trials.items()):
            previous: tuple[str, float] | None = None
            for stage in STAGES:
                if stage not in st:
                    continue
                since = None if previous is None else st[stage] - previous[1]
                if since is not None and previous is not None:
                    per_stage.setdefault(f"{previous[0]}->{stage}", []).append(since)
                if trace:
                    line = {"trial": name, "stage": stage, "time": round(st[stage], 6)}
                    if since is not None and previous is not None:
                        line["since"] = previous[0]
                        line["seconds"] = round(since, 6)
                    trace.write(json.dumps(line) + "\n")
                previous = (stage, st[stage])
            for a, b in SIDE:
                if a in st and b in st:
                    per_stage.setdefault(f"{a}->{b}", []).append(st[b] - st[a])
            if trace:
                for stage in sorted({b for _, b in SIDE} & st.keys()):
                    side = {"trial": name, "stage": stage, "time": round(st[stage], 6)}
                    trace.write(json.dumps(side) + "\n")
            if "created" in st and "succeeded" in st:
                overheads.append(st["succeeded"] - st["created"] - args.seconds)
    finally:
        if trace:
            trace.close()
    print(
        f"trials={args.trials} seconds={args.seconds} parallel={args.parallel} "
        f"load before={load[0]} after={load[1]}"
    )
    print(f"wall {wall:.2f} s  ideal {ideal:.2f} s  ratio {wall / ideal:.2f}")
    if started is not None and created:
        # The Suggestion, its Deployment, the algorithm's pod and first pass: once per Experiment.
        print(f"Experiment created -> first Trial created {created[0][0] - started:.2f} s")
    if overheads:
        print(
            f"per-trial overhead (created->succeeded - S): p50 {quantile(overheads, 0.5):.3f} s"
            f"  p99 {quantile(overheads, 0.99):.3f} s  mean {statistics.mean(overheads):.3f} s"
        )
    print(f"{'stage':<26}{'n':>5}{'p50 s':>9}{'p99 s':>9}")
    for i in range(len(STAGES) - 1):
        key = f"{STAGES[i]}->{STAGES[i + 1]}"
        values = per_stage.get(key, [])
        print(
            f"{key:<26}{len(values):>5}{quantile(values, 0.5):>9.3f}{quantile(values, 0.99):>9.3f}"
        )
    others = sorted(
        k for k in per_stage if k not in {f"{a}->{b}" for a, b in itertools.pairwise(STAGES)}
    )
    for key in others:
        values = per_stage[key]
        print(
            f"{key:<26}{len(values):>5}{quantile(values, 0.5):>9.3f}{quantile(values, 0.99):>9.3f}"
        )
    return {
        "wall": wall,
        "ideal": ideal,
        "ratio": wall / ideal,
        "overhead_p50": quantile(overheads, 0.5),
        "first_trial": created[0][0] - started if started is not None and created else None,
        "load": load,
    }


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine since boot, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_share(before: tuple[float, float], after: tuple[float, float]) -> float:
    """The share of the machine's CPU time that was busy between two `cpu_times`: near 1.0
    means every stage waited for a core, not for the others."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total else 0.0


def measure(
    kube: Kube, args: argparse.Namespace, sample: Callable[[], dict[str, float]] | None = None
) -> Obj:
    """One Experiment in a fresh namespace; `sample` (counters by name, e.g. CPU-s per process
    group) is read when the Experiment is created and when it finishes: the result's `counted`
    holds the differences."""
    namespace = f"bench-e2e-{uuid.uuid4().hex[:6]}"
    kube.create(
        NAMESPACES,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {naming.LABEL_INJECTION: naming.INJECTION_ENABLED},
            },
        },
    )
    stamps = Stamps()
    stop = threading.Event()
    handlers = ((TRIALS, _trial_events), (JOBS, _job_events), (PODS, _pod_events))
    threads = [
        threading.Thread(
            target=watch_forever,
            args=(kube, res, namespace, lambda o, h=h: h(stamps, o), stop),
            daemon=True,
        )
        for res, h in handlers
    ]
    for t in threads:
        t.start()
    time.sleep(0.5)  # the watches are open before the first Trial
    name = "bench"
    before = loadavg()
    cpu_before = cpu_times()
    counted = sample() if sample else {}
    t0 = time.time()
    if args.real_node:
        kube.create(CONFIGMAPS, training_configmap(namespace), namespace)
        script = TRAINING_MOUNT / TRAINING_FILE
    else:
        script = training_script(Path(tempfile.mkdtemp(prefix="kubetune-bench-training-")))
        os.chmod(script.parent, 0o755)
    spec = experiment(
        name, namespace, args.trials, args.seconds, args.parallel, script, bool(args.real_node)
    )
    kube.create(EXPERIMENTS, spec, namespace)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        status = kube.get(EXPERIMENTS, name, namespace).get("status") or {}
        done = [
            c["type"]
            for c in status.get("conditions") or []
            if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
        ]
        if done:
            break
        time.sleep(0.1)
    else:
        raise SystemExit(f"the Experiment did not finish within {args.timeout} s")
    wall = time.time() - t0
    counted = {k: v - counted[k] for k, v in sample().items()} if sample else {}
    after = loadavg()
    busy = busy_share(cpu_before, cpu_times())
    print(f"machine CPU busy during the run: {busy:.0%} of {os.cpu_count()} cores")
    time.sleep(0.5)
    stop.set()
    result = report(stamps, args, wall, (before, after), t0)
    result.update(counted=counted, busy=busy, namespace=namespace, started=t0, finished=t0 + wall)
    if not args.real_node:
        shutil.rmtree(script.parent, ignore_errors=True)
    if not args.keep_namespace:
        kube.delete(NAMESPACES, namespace)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="e2e_throughput", description=__doc__)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--trace", help="write one JSON line per stage per trial here")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--kubeconfig", help="a cluster with kubetune deployed already")
    parser.add_argument("--keep", action="store_true", help="leave the cluster it starts up")
    parser.add_argument("--keep-namespace", action="store_true")
    parser.add_argument("--state-dir", help="where the started cluster keeps its state")
    parser.add_argument(
        "--real-node",
        metavar="IMAGES_DIR",
        help="run on a real node (root), kubetune from the image archives in IMAGES_DIR "
        "(python3 images/build.py --oci-dir IMAGES_DIR) with kustomize/overlays/real",
    )
    parser.add_argument(
        "--audit", action="store_true", help="count API requests per trial by client (audit log)"
    )
    args = parser.parse_args(argv)
    if args.kubeconfig and args.audit:
        parser.error("--audit needs the cluster this bench starts (leave out --kubeconfig)")
    if args.kubeconfig:
        measure(Kube(connect(args.kubeconfig)), args)
        return 0

    state_dir = Path(args.state_dir or tempfile.mkdtemp(prefix="kubetune-bench-e2e-"))
    start = real_node_cluster if args.real_node else kubetune_cluster
    with start(state_dir, keep=args.keep, audit=args.audit, images=args.real_node) as state:
        kubeconfig = bench_kubeconfig(state) if args.audit else state.kubeconfig
        result = measure(Kube(connect(kubeconfig)), args)
        if args.audit:
            print_requests(audited_requests(state, result), args.trials)
    return 0


BENCH_ACCOUNT = "kubetune-bench"
BENCH_CLIENT = f"sa default/{BENCH_ACCOUNT}"


def bench_kubeconfig(state: Any) -> str:
    """A kubeconfig for the ServiceAccount `default/kubetune-bench` (cluster-admin), so the
    audit log tells the bench's own requests from the node agent's (both would be `admin`)."""
    import yaml

    def kubectl(*args: str) -> str:
        return subprocess.run(
            [state.kubectl, "--kubeconfig", state.kubeconfig, *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    kubectl("create", "serviceaccount", "-n", "default", BENCH_ACCOUNT)
    kubectl(
        "create", "clusterrolebinding", BENCH_ACCOUNT, "--clusterrole=cluster-admin",
        f"--serviceaccount=default:{BENCH_ACCOUNT}",
    )  # fmt: skip
    token = kubectl("create", "token", "-n", "default", BENCH_ACCOUNT, "--duration=24h").strip()
    config = yaml.safe_load(Path(state.kubeconfig).read_text())
    config["users"] = [{"name": BENCH_ACCOUNT, "user": {"token": token}}]
    for ctx in config["contexts"]:
        ctx["context"]["user"] = BENCH_ACCOUNT
    path = Path(state.state_dir) / f"{BENCH_ACCOUNT}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return str(path)


def client_of(event: Obj) -> str:
    """Who made an audited request: the ServiceAccount, or the user and its user agent (the
    node agent and kubectl share the admin credentials)."""
    user = str((event.get("user") or {}).get("username", "?"))
    if user.startswith("system:serviceaccount:"):
        return "sa " + user.removeprefix("system:serviceaccount:").replace(":", "/")
    return f"{user} ({str(event.get('userAgent', '?')).split(' ')[0]})"


def audited_requests(state: Any, result: Obj) -> collections.Counter[tuple[str, str, str]]:
    """Requests received during the run, by (client, verb, resource[/subresource])."""
    time.sleep(1.0)  # the last responses' events are written when they complete
    since, until = result["started"], result["finished"]
    counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
    with open(state.audit_log, encoding="utf-8") as log:
        for line in log:
            event = json.loads(line)
            received = datetime.fromisoformat(
                event["requestReceivedTimestamp"].replace("Z", "+00:00")
            ).timestamp()
            if not since <= received <= until:
                continue
            ref = event.get("objectRef") or {}
            resource = ref.get("resource") or event.get("requestURI", "?").split("?")[0]
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            counts[(client_of(event), event.get("verb", "?"), resource)] += 1
    return counts


def print_requests(counts: collections.Counter[tuple[str, str, str]], trials: int) -> None:
    """Requests per trial by client, then by verb and resource within each client."""
    by_client: collections.Counter[str] = collections.Counter()
    for (client, _, _), n in counts.items():
        by_client[client] += n
    print(
        f"API requests per trial by client (audit log; total {sum(counts.values()) / trials:.1f})"
    )
    for client, total in by_client.most_common():
        mark = "  (the bench)" if client == BENCH_CLIENT else ""
        print(f"  {client:<52}{total / trials:>8.2f}{mark}")
        rows = sorted(
            ((n, verb, res) for (c, verb, res), n in counts.items() if c == client), reverse=True
        )
        for n, verb, res in rows:
            print(f"      {verb:<8}{res:<40}{n / trials:>8.2f}")


@contextlib.contextmanager
def kubetune_cluster(
    state_dir: Path, keep: bool = False, audit: bool = False, images: str | None = None
) -> Iterator[Any]:
    """A local cluster (built first when needed) with the `local` overlay Available; stopped on
    exit unless `keep`. Yields localcluster's State."""
    from kubetune_testkit.deploying import apply_overlay, render_image_map
    from localcluster import build
    from localcluster import cluster as localcluster

    build.build_all()
    compile_sources()
    image_map = state_dir.parent / f"{state_dir.name}-image-map.yaml"
    image_map.write_text(render_image_map())
    state = localcluster.up(state_dir, image_map=image_map, with_nodeagent=True, audit=audit)
    try:
        with _serving(state, state_dir, keep, apply_overlay):
            yield state
    finally:
        image_map.unlink(missing_ok=True)


def compile_sources() -> None:
    """Bytecode for this checkout's sources, as kubetune's images ship it: the node agent runs
    the services from them, and a tree without it (or a shell with PYTHONDONTWRITEBYTECODE, as
    tox sets) would compile every module in every process start, trial pods' collectors too."""
    roots = [REPO / "shared" / "src", *sorted((REPO / "services").glob("*/src"))]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *map(str, roots)], check=True)


@contextlib.contextmanager
def real_node_cluster(
    state_dir: Path, keep: bool = False, audit: bool = False, images: str | None = None
) -> Iterator[Any]:
    """The control plane with a real node (kubelet, containerd, kube-proxy, CoreDNS), kubetune
    from its own images (the OCI archives `images/build.py --oci-dir DIR` writes, imported into
    the node's containerd) with `kustomize/overlays/real`."""
    from kubetune_testkit.deploying import apply_real_overlay
    from localcluster import build, node
    from localcluster import cluster as localcluster

    build.build_all()
    archives = sorted(Path(str(images)).glob("*.tar"))
    if not archives:
        raise SystemExit(f"--real-node {images}: no image archives (images/build.py --oci-dir)")
    state = localcluster.up_real_node(state_dir, wait=1800, audit=audit, timeout=300)

    def load_images() -> None:
        for archive in archives:
            node.load(archive)

    with _serving(state, state_dir, keep, apply_real_overlay, before=load_images):
        yield state


@contextlib.contextmanager
def _serving(
    state: Any,
    state_dir: Path,
    keep: bool,
    deploy: Callable[[Any], object],
    before: Callable[[], object] | None = None,
) -> Iterator[None]:
    """kubetune deployed on a started cluster and every Deployment Available; the cluster is
    stopped on exit unless `keep`."""
    from kubetune_testkit.deploying import wait_available
    from localcluster import cluster as localcluster
    from localcluster.pytest_plugin import ClusterHandle

    handle = ClusterHandle(state.kubeconfig, state.kubectl, state.server, state)
    try:
        if before is not None:
            before()
        deploy(handle)
        wait_available(handle, timeout=420)
        yield
    finally:
        if keep:
            print(f"cluster kept: export KUBECONFIG={state.kubeconfig}")
            print(f"stop it with: localcluster --state-dir {state_dir} down")
        else:
            localcluster.down(state_dir, quiet=True)


if __name__ == "__main__":
    sys.exit(main())
