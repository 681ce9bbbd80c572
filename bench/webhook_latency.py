"""Admission latency of the kubetune webhook at a fixed rate on loopback, and its memory.

Starts `webhook serve` (a real process, TLS, certificates from `webhook certs`) against a real
API server, then sends AdmissionReviews at `--rate` requests per second for `--seconds` over
keep-alive HTTPS connections, as the API server does: Experiment validation (`/validate-
experiment`: a namespace lookup plus every rule) and Pod mutation (`/mutate-pod`: the owner walk
Pod -> Job -> Trial, two GETs, and the injection). Prints p50/p99/max per endpoint (time from
sending the request to the whole answer) and the webhook's peak resident memory.
Targets (issue 5): p99 under 10 ms, under 80 MiB resident.

    python bench/webhook_latency.py [--kubeconfig $KUBECONFIG] [--rate 200] [--seconds 20]

Without a kubeconfig it starts its own local cluster (localcluster) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import yaml

from kubetune import errors, naming
from kubetune.kube import JOBS, NAMESPACES, TRIALS, Kube, Resource, connect
from kubetune_webhook import certificates

REPO = Path(__file__).resolve().parents[1]
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _experiment(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": "bench", "namespace": ns},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random"},
            "parallelTrialCount": 3,
            "maxTrialCount": 12,
            "resumePolicy": "Never",
            "parameters": [
                {
                    "name": "lr",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "0.01", "max": "0.1", "distribution": "uniform"},
                },
                {
                    "name": "opt",
                    "parameterType": "categorical",
                    "feasibleSpace": {"list": ["a", "b"]},
                },
            ],
            "metricsCollectorSpec": {"collector": {"kind": "StdOut"}},
            "trialTemplate": {
                "primaryContainerName": "training-container",
                "successCondition": 'status.conditions.#(type=="Complete")#|#(status=="True")#',
                "failureCondition": 'status.conditions.#(type=="Failed")#|#(status=="True")#',
                "trialParameters": [
                    {"name": "lr", "reference": "lr"},
                    {"name": "opt", "reference": "opt"},
                ],
                "trialSpec": {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {
                                        "name": "training-container",
                                        "image": "python:3.12",
                                        "command": [
                                            "python3",
                                            "train.py",
                                            "--lr=${trialParameters.lr}",
                                            "--opt=${trialParameters.opt}",
                                        ],
                                    }
                                ],
                            }
                        }
                    },
                },
            },
        },
    }


def _pod(ns: str, job: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{job}-",
            "namespace": ns,
            "labels": {"job-name": job},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "training-container",
                    "image": "python:3.12",
                    "command": ["python3", "t.py"],
                }
            ],
        },
    }


def _review(obj: dict[str, Any], kind: str, ns: str) -> bytes:
    group, version = ("kubeflow.org", "v1beta1") if kind == "Experiment" else ("", "v1")
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": group, "version": version, "kind": kind},
                "operation": "CREATE",
                "namespace": ns,
                "object": obj,
            },
        }
    ).encode()


def _install_trial_crd(kube: Kube) -> None:
    crd = yaml.safe_load((REPO / "kustomize/base/crds/trials.kubeflow.org.yaml").read_text())
    try:
        kube.create(CRDS, crd)
    except errors.AlreadyExists:
        return
    deadline = time.monotonic() + 30
    while True:
        try:
            kube.resource_for("kubeflow.org/v1beta1", "Trial")
            return
        except errors.ApiError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _setup(kube: Kube, ns: str) -> str:
    """A labelled namespace, a Trial and its (suspended) Job; returns the Job's uid."""
    kube.create(
        NAMESPACES,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {naming.LABEL_INJECTION: naming.INJECTION_ENABLED}},
        },
    )
    trial = kube.create(
        TRIALS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Trial",
            "metadata": {"name": "bench-trial"},
            "spec": {
                "objective": {"type": "minimize", "objectiveMetricName": "loss"},
                "primaryContainerName": "training-container",
                "metricsCollector": {"collector": {"kind": "StdOut"}},
            },
        },
        ns,
    )
    job = kube.create(
        JOBS,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "bench-trial",
                "ownerReferences": [
                    {
                        "apiVersion": "kubeflow.org/v1beta1",
                        "kind": "Trial",
                        "name": "bench-trial",
                        "uid": trial["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "training-container", "image": "x", "command": ["true"]}
                        ],
                    }
                },
            },
        },
        ns,
    )
    return str(job["metadata"]["uid"])


class Load:
    """`threads` keep-alive connections; requests paced so the total is `rate` per second."""

    def __init__(self, port: int, ca: Path, rate: float, threads: int) -> None:
        self.port, self.ca, self.rate, self.threads = port, ca, rate, threads

    def run(self, path: str, bodies: list[bytes], seconds: float) -> tuple[list[float], int, float]:
        latencies: list[float] = []
        failures = [0]
        lock = threading.Lock()
        start = time.monotonic() + 0.2
        interval = self.threads / self.rate

        def worker(index: int) -> None:
            ctx = ssl.create_default_context(cafile=str(self.ca))
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=10)
            conn.connect()
            assert conn.sock is not None
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's client
            n = 0
            while True:
                due = start + index * (interval / self.threads) + n * interval
                if due > start + seconds:
                    break
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                body = bodies[(index + n) % len(bodies)]
                t0 = time.perf_counter()
                try:
                    conn.request(
                        "POST", path, body=body, headers={"Content-Type": "application/json"}
                    )
                    response = conn.getresponse()
                    data = response.read()
                    ok = response.status == 200 and json.loads(data)["response"]["allowed"]
                except (OSError, http.client.HTTPException, ValueError, KeyError):
                    ok = False
                    conn.close()
                elapsed = time.perf_counter() - t0
                with lock:
                    latencies.append(elapsed)
                    failures[0] += 0 if ok else 1
                n += 1
            conn.close()

        workers = [threading.Thread(target=worker, args=(i,)) for i in range(self.threads)]
        began = time.monotonic()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        achieved = len(latencies) / max(time.monotonic() - began - 0.2, 1e-9)
        return latencies, failures[0], achieved


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument(
        "--lookup-cache-seconds",
        type=float,
        default=10.0,
        help="the webhook's lookup cache (0: every request asks the API server)",
    )
    args = parser.parse_args()

    own_cluster: Path | None = None
    kubeconfig = args.kubeconfig
    if not kubeconfig:
        from localcluster import cluster as lc

        own_cluster = Path(tempfile.mkdtemp(prefix="bench-webhook-"))
        state = lc.up(own_cluster, with_nodeagent=False, quiet=True)
        kubeconfig = state.kubeconfig
    kube = Kube(connect(kubeconfig))
    tmp = Path(tempfile.mkdtemp(prefix="bench-webhook-certs-"))
    ns = f"bench-webhook-{uuid.uuid4().hex[:6]}"
    proc: subprocess.Popen[bytes] | None = None
    try:
        _install_trial_crd(kube)
        job_uid = _setup(kube, ns)
        files = certificates.issue(tmp, ["localhost"], ["127.0.0.1"])
        port = _free_port()
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("webhook")), "serve", "--address", "127.0.0.1",
             "--port", str(port), "--cert-file", str(files.cert), "--key-file", str(files.key),
             "--kubeconfig", kubeconfig, "--log-level", "warning",
             "--lookup-cache-seconds", str(args.lookup_cache_seconds)],
        )  # fmt: skip
        ctx = ssl.create_default_context(cafile=str(files.ca_cert))
        deadline = time.monotonic() + 30
        while True:
            try:
                c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    c.close()
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("webhook did not start") from None
                time.sleep(0.1)
        webhook = psutil.Process(proc.pid)
        peak = [webhook.memory_info().rss]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(0.1):
                peak[0] = max(peak[0], webhook.memory_info().rss)

        threading.Thread(target=sample, daemon=True).start()
        load = Load(port, files.ca_cert, args.rate, args.threads)
        cases = {
            "/validate-experiment": [_review(_experiment(ns), "Experiment", ns)],
            "/mutate-pod": [_review(_pod(ns, "bench-trial", job_uid), "Pod", ns)],
        }
        print(
            f"webhook pid {proc.pid}, {args.rate:g} req/s for {args.seconds:g} s per endpoint, "
            f"lookup cache {args.lookup_cache_seconds:g} s, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        print("endpoint               requests  req/s   p50 ms   p99 ms   max ms  failed")
        for path, bodies in cases.items():
            load.run(path, bodies, 2.0)  # warm up: connections, discovery cache
            latencies, failed, achieved = load.run(path, bodies, args.seconds)
            ms = [v * 1e3 for v in latencies]
            print(
                f"{path:22} {len(ms):8d} {achieved:6.0f} {statistics.median(ms):8.2f} "
                f"{_pct(ms, 0.99):8.2f} {max(ms):8.2f} {failed:7d}"
            )
        sampling.set()
        rss = webhook.memory_info().rss
        print(f"webhook RSS: {rss / 2**20:.1f} MiB now, {peak[0] / 2**20:.1f} MiB peak")
        return 0
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)
        with contextlib.suppress(errors.ApiError):
            kube.delete(NAMESPACES, ns)
        shutil.rmtree(tmp, ignore_errors=True)
        if own_cluster is not None:
            from localcluster import cluster as lc

            lc.down(own_cluster, quiet=True)
            shutil.rmtree(own_cluster, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
