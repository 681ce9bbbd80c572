"""Admission latency of the kubetune webhook at a fixed rate on loopback, and its memory.

Starts `webhook serve` (a real process, TLS, certificates from `webhook certs`) against a real
API server, then sends AdmissionReviews at `--rate` requests per second for `--seconds` over
keep-alive HTTPS connections, as the API server does: Experiment validation (`/validate-
experiment`: a namespace lookup plus every rule) and Pod mutation (`/mutate-pod`: the owner walk
Pod -> Job -> Trial, two GETs, and the injection). Prints p50/p99/max per endpoint (time from
sending the request to the whole answer) and the webhook's peak resident memory.
Targets (issue 5): p99 under 10 ms, under 80 MiB resident.

With `--flood N` a separate process first opens N idle connections (half complete the TLS
handshake and send nothing, a quarter are plain TCP that send nothing, a quarter stop in the
middle of a ClientHello) and keeps N open: whatever the webhook closes is reopened at once, as
an attacker would. Meanwhile it measures admission latency on keep-alive connections and on
a new connection per request (handshake included, what the API server sees after its
connection was closed), the /healthz probe on new connections (what the kubelet sees), and
samples the webhook's RSS, threads and open connections. `--runs` repeats that and prints the
medians over runs. Targets (issue 13): with 2,000 idle connections open, admission p99 under
50 ms and RSS under 160 MiB (the manifest's memory limit).

    python bench/webhook_latency.py [--kubeconfig $KUBECONFIG] [--rate 200] [--seconds 20]
    python bench/webhook_latency.py --flood 2000 --runs 3 --seconds 10 --rate 50

With `--probe-cost N` it sends N kubelet-style probes (/healthz, a new connection each) to the
HTTPS port and N to the plain-HTTP `--probe-port`, alternating in rounds, and prints the
webhook's own CPU per probe on each (its process's user + system time).

    python bench/webhook_latency.py --probe-cost 300

Without a kubeconfig it starts its own local cluster (localcluster) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import resource
import selectors
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
from collections.abc import Callable, Iterator
from multiprocessing.sharedctypes import SynchronizedArray
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import Any

import psutil
from sigterm import exit_on_sigterm

from kubetune import errors, naming
from kubetune.kube import (
    JOBS,
    NAMESPACES,
    TRIALS,
    Kube,
    connect,
)
from kubetune_testkit import builders
from kubetune_testkit.crds import apply_crd
from kubetune_testkit.paths import CRDS
from kubetune_testkit.processes import free_port
from kubetune_webhook import certificates


def _experiment(ns: str) -> dict[str, Any]:
    """What a user submits: two parameters, a Job template, success and failure conditions."""
    lr = {**builders.LR, "feasibleSpace": {"min": "0.01", "max": "0.1", "distribution": "uniform"}}
    command = ["python3", "train.py", "--lr=${trialParameters.lr}", "--opt=${trialParameters.opt}"]
    return builders.experiment(
        "bench",
        ns,
        objective_spec=builders.objective("loss", "minimize", strategies=False),
        parameters=[lr, builders.categorical("opt", ["a", "b"])],
        trial_parameters=builders.references(lr="lr", opt="opt"),
        trial_spec=builders.trial_job(command, image="python:3.12"),
        conditions=builders.JOB_CONDITIONS,
        parallelTrialCount=3,
        maxTrialCount=12,
        resumePolicy="Never",
    )


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
    apply_crd(kube, CRDS / "trials.kubeflow.org.yaml")


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
    loss = builders.objective("loss", "minimize", strategies=False)
    trial = kube.create(TRIALS, builders.trial("bench-trial", objective_spec=loss), ns)
    job = builders.batch_job(["true"], image="x", name="bench-trial", backoff_limit=None)
    job["metadata"]["ownerReferences"] = [builders.owner_reference(trial)]
    job["spec"]["suspend"] = True
    job = kube.create(JOBS, job, ns)
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


CLIENT_HELLO_START = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
"""The first bytes of a TLS ClientHello: a handshake that never goes on."""
FLOOD_KINDS = ("tls", "tcp", "tls", "hello")
OPEN, OPENED, CLOSED_BY_SERVER, FAILED = range(4)


def _raise_file_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _flooder(
    port: int, ca: str, n: int, refill: bool, stats: SynchronizedArray[Any], ready: MpEvent,
    stop: MpEvent,
) -> None:  # fmt: skip
    """Child process: open `n` idle connections and keep them open (reopen what is closed)."""
    _raise_file_limit()
    ctx = ssl.create_default_context(cafile=ca)
    sel = selectors.DefaultSelector()
    counts = [0, 0, 0, 0]

    def open_one(kind: str) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            counts[FAILED] += 1
            return
        try:
            if kind == "tls":
                sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
            elif kind == "hello":
                sock.sendall(CLIENT_HELLO_START)
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ, kind)
        except OSError:
            sock.close()
            counts[FAILED] += 1
            return
        counts[OPEN] += 1
        counts[OPENED] += 1

    def publish() -> None:
        with stats.get_lock():
            stats[:] = counts

    for i in range(n):
        open_one(FLOOD_KINDS[i % len(FLOOD_KINDS)])
    publish()
    ready.set()
    while not stop.is_set():
        for key, _ in sel.select(0.2):
            sock: socket.socket = key.fileobj  # type: ignore[assignment]
            try:
                if sock.recv(4096):
                    continue
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            except OSError:
                pass
            sel.unregister(sock)
            sock.close()
            counts[OPEN] -= 1
            counts[CLOSED_BY_SERVER] += 1
            if refill:
                open_one(key.data)
        publish()
    for key in list(sel.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]


def _fresh_requests(
    port: int,
    ca: Path,
    seconds: float,
    rate: float,
    send: Callable[[http.client.HTTPSConnection], bool],
) -> tuple[list[float], int]:
    """`rate` requests per second for `seconds`, each on a new connection (handshake timed)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    latencies: list[float] = []
    failed = 0
    start = time.monotonic()
    n = 0
    while True:
        due = start + n / rate
        if due > start + seconds:
            break
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        t0 = time.perf_counter()
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
        try:
            ok = send(conn)
        except (OSError, http.client.HTTPException, ValueError, KeyError):
            ok = False
        finally:
            conn.close()
        latencies.append(time.perf_counter() - t0)
        failed += 0 if ok else 1
        n += 1
    return latencies, failed


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _server_connections(webhook: psutil.Process, port: int) -> int:
    return sum(
        1
        for c in webhook.net_connections(kind="tcp")
        if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port
    )


def _sample(
    webhook: psutil.Process, port: int, samples: list[tuple[int, int, int]], done: threading.Event
) -> None:
    while True:
        rss, threads = webhook.memory_info().rss, webhook.num_threads()
        samples.append((rss, threads, _server_connections(webhook, port)))
        if done.wait(0.5):
            return


def _flood_runs(
    args: argparse.Namespace,
    webhook: psutil.Process,
    port: int,
    ca: Path,
    load: Load,
    cases: dict[str, list[bytes]],
) -> None:
    """`args.runs` times: measure without, then with a flood; then the medians of each."""
    pod_body = cases["/mutate-pod"][0]

    def send_pod(conn: http.client.HTTPSConnection) -> bool:
        conn.request(
            "POST", "/mutate-pod", body=pod_body, headers={"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        return response.status == 200 and bool(json.loads(response.read())["response"]["allowed"])

    def probe(conn: http.client.HTTPSConnection) -> bool:
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        response.read()
        return response.status == 200

    columns = [
        ("flood open", "{:10.0f}"), ("srv open", "{:8.0f}"), ("reopen/s", "{:8.0f}"),
        ("pod p50", "{:7.1f}"), ("pod p99", "{:7.1f}"), ("exp p50", "{:7.1f}"),
        ("exp p99", "{:7.1f}"), ("new p50", "{:7.1f}"), ("new p99", "{:7.1f}"),
        ("probe p99", "{:9.1f}"), ("RSS MiB", "{:7.1f}"), ("threads", "{:7.0f}"),
        ("CPU %", "{:5.0f}"), ("flood CPU %", "{:11.0f}"), ("failed", "{:6.0f}"),
    ]  # fmt: skip
    print(
        f"flood: {args.flood} idle connections "
        f"({'reopened when closed' if args.refill else 'not reopened'}); "
        "latencies in ms: pod/exp = /mutate-pod and /validate-experiment on keep-alive "
        f"connections at {args.rate:g} req/s, new = /mutate-pod on a new TLS connection each, "
        "probe = GET /healthz on a new connection; srv open = the webhook's established "
        "connections (median); RSS and threads: peak; CPU: the webhook's and the flood's (which "
        "includes opening it), % of one core"
    )  # fmt: skip
    print("run    phase " + " ".join(name.rjust(len(fmt.format(0))) for name, fmt in columns))
    rows: dict[str, list[list[float]]] = {"no flood": [], "flood": []}
    spawn = multiprocessing.get_context("spawn")

    def measure(run: int, flooder: Any) -> None:
        """One row: the load, the new connections and the probes, with or without a flood."""
        label = "flood" if flooder else "no flood"
        if flooder:
            flooder.process.start()
            if not flooder.ready.wait(600):
                raise SystemExit("the flood did not open its connections within 600 s")
        with flooder.stats.get_lock() if flooder else contextlib.nullcontext():
            at_start = flooder.stats[:] if flooder else [0, 0, 0, 0]
        began = time.monotonic()
        cpu_began = sum(webhook.cpu_times()[:2])
        samples: list[tuple[int, int, int]] = []
        sampling = threading.Event()
        sampler = threading.Thread(
            target=_sample, args=(webhook, port, samples, sampling), daemon=True
        )
        sampler.start()
        failed = 0
        ms: dict[str, list[float]] = {}
        for path, bodies in cases.items():
            latencies, bad, _ = load.run(path, bodies, args.seconds)
            ms[path] = [v * 1e3 for v in latencies]
            failed += bad
        fresh, bad = _fresh_requests(port, ca, args.seconds, min(args.rate, 20.0), send_pod)
        failed += bad
        probes, bad = _fresh_requests(port, ca, min(args.seconds, 5.0), 5.0, probe)
        failed += bad
        sampling.set()
        sampler.join()
        with flooder.stats.get_lock() if flooder else contextlib.nullcontext():
            counts = flooder.stats[:] if flooder else [0, 0, 0, 0]
        elapsed = time.monotonic() - began
        cpu = (sum(webhook.cpu_times()[:2]) - cpu_began) / elapsed * 100
        flood_cpu = 0.0
        if flooder:  # the flood runs on the same cores: how much of them it took
            flood_cpu = sum(psutil.Process(flooder.process.pid).cpu_times()[:2]) / elapsed * 100
            flooder.stop.set()
            flooder.process.join(60)
        pod, exp = ms["/mutate-pod"], ms["/validate-experiment"]
        fresh_ms, probe_ms = [v * 1e3 for v in fresh], [v * 1e3 for v in probes]
        row = [
            counts[OPEN],
            statistics.median(s[2] for s in samples),
            (counts[OPENED] - at_start[OPENED]) / elapsed,
            statistics.median(pod), _pct(pod, 0.99), statistics.median(exp), _pct(exp, 0.99),
            statistics.median(fresh_ms), _pct(fresh_ms, 0.99), _pct(probe_ms, 0.99),
            max(s[0] for s in samples) / 2**20, max(s[1] for s in samples), cpu, flood_cpu,
            failed,
        ]  # fmt: skip
        rows[label].append(row)
        print(
            f"{run + 1:3d} {label:>8} "
            + " ".join(fmt.format(v) for (_, fmt), v in zip(columns, row, strict=True)),
            flush=True,
        )

    for run in range(args.runs):
        # The same measurement without the flood first: the machine may be busy with other work.
        measure(run, None)
        stats = spawn.Array("q", 4)
        ready, stop = spawn.Event(), spawn.Event()
        process = spawn.Process(
            target=_flooder,
            args=(port, str(ca), args.flood, args.refill, stats, ready, stop),
            daemon=True,
        )
        measure(run, argparse.Namespace(process=process, stats=stats, ready=ready, stop=stop))
        time.sleep(2)  # let the webhook close what is left before the next run
    for label, table in rows.items():
        medians = [statistics.median(col) for col in zip(*table, strict=True)]
        print(
            f"med {label:>8} "
            + " ".join(fmt.format(v) for (_, fmt), v in zip(columns, medians, strict=True))
        )


def serve(kubeconfig: str, tmp: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    """`webhook serve` on loopback with certificates issued in `tmp`, once it answers /readyz;
    returns the process, its port and the CA certificate's path."""
    files = certificates.issue(tmp, ["localhost"], ["127.0.0.1"])
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("webhook")), "serve", "--address", "127.0.0.1",
         "--port", str(port), "--cert-file", str(files.cert), "--key-file", str(files.key),
         "--kubeconfig", kubeconfig, "--log-level", "warning", *extra],
    )  # fmt: skip
    ctx = ssl.create_default_context(cafile=str(files.ca_cert))
    deadline = time.monotonic() + 30
    while True:
        try:
            c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                c.close()
                return proc, port, files.ca_cert
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("webhook did not start") from None
            time.sleep(0.1)


@contextlib.contextmanager
def served(
    kubeconfig: str | None, *extra: str
) -> Iterator[tuple[Kube, subprocess.Popen[bytes], int, Path]]:
    """A client and `serve`'s webhook for the block, on the cluster of `kubeconfig` or, without
    one, on a local cluster started for the block; everything stopped and removed after."""
    own_cluster: Path | None = None
    if not kubeconfig:
        from localcluster import cluster as lc

        own_cluster = Path(tempfile.mkdtemp(prefix="bench-webhook-"))
        kubeconfig = lc.up(
            own_cluster, with_nodeagent=False, quiet=True, bind_to_parent=True
        ).kubeconfig
    tmp = Path(tempfile.mkdtemp(prefix="bench-webhook-certs-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        proc, port, ca = serve(kubeconfig, tmp, *extra)
        yield Kube(connect(kubeconfig)), proc, port, ca
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)
        if own_cluster is not None:
            from localcluster import cluster as lc

            lc.down(own_cluster, quiet=True)
            shutil.rmtree(own_cluster, ignore_errors=True)


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
    parser.add_argument(
        "--flood", type=int, default=0, help="keep this many idle connections open meanwhile"
    )
    parser.add_argument(
        "--no-refill",
        dest="refill",
        action="store_false",
        help="with --flood: do not reopen the connections the webhook closes",
    )
    parser.add_argument("--runs", type=int, default=3, help="with --flood: measurements to take")
    parser.add_argument(
        "--probe-cost",
        type=int,
        default=0,
        help="only this: CPU per /healthz probe on the HTTPS port and on --probe-port",
    )
    parser.add_argument(
        "--webhook-arg",
        action="append",
        default=[],
        help="an extra flag for `webhook serve`, e.g. --webhook-arg=--max-connections=3000",
    )
    args = parser.parse_args()
    _raise_file_limit()

    ns = f"bench-webhook-{uuid.uuid4().hex[:6]}"
    extra = ["--lookup-cache-seconds", str(args.lookup_cache_seconds), *args.webhook_arg]
    if args.probe_cost:
        probe_port = free_port()
        with served(args.kubeconfig, *extra, f"--probe-port={probe_port}") as (_, proc, port, ca):
            return _probe_cost(args.probe_cost, proc, port, probe_port, ca)
    with served(args.kubeconfig, *extra) as (kube, proc, port, ca):
        try:
            return _measure(args, kube, ns, proc, port, ca)
        finally:
            with contextlib.suppress(errors.ApiError):
                kube.delete(NAMESPACES, ns)


def _probe_cost(
    count: int, proc: subprocess.Popen[bytes], port: int, probe_port: int, ca: Path
) -> int:
    """The webhook's CPU per /healthz probe, over TLS and in plain HTTP, in alternating rounds."""
    webhook = psutil.Process(proc.pid)
    ctx = ssl.create_default_context(cafile=str(ca))

    def over_tls() -> http.client.HTTPConnection:
        return http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)

    def plain() -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", probe_port, timeout=10)

    spent: dict[str, list[float]] = {"HTTPS port": [], "--probe-port": []}
    rounds = 10
    per_round = max(1, count // rounds)
    for _ in range(rounds):
        for name, connect_to in (("HTTPS port", over_tls), ("--probe-port", plain)):
            before = sum(webhook.cpu_times()[:2])
            for _ in range(per_round):
                conn = connect_to()
                conn.request("GET", "/healthz")
                answer = conn.getresponse()
                answer.read()
                conn.close()
                if answer.status != 200:
                    raise SystemExit(f"/healthz on the {name}: HTTP {answer.status}")
            spent[name].append((sum(webhook.cpu_times()[:2]) - before) / per_round)
    print(f"webhook CPU per /healthz probe, median of {rounds} rounds of {per_round}:")
    for name, per_probe in spent.items():
        print(f"  {name:14} {statistics.median(per_probe) * 1e3:6.2f} CPU-ms")
    return 0


def _measure(
    args: argparse.Namespace,
    kube: Kube,
    ns: str,
    proc: subprocess.Popen[bytes],
    port: int,
    ca: Path,
) -> int:
    _install_trial_crd(kube)
    job_uid = _setup(kube, ns)
    webhook = psutil.Process(proc.pid)
    peak = [webhook.memory_info().rss]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.1):
            peak[0] = max(peak[0], webhook.memory_info().rss)

    threading.Thread(target=sample, daemon=True).start()
    load = Load(port, ca, args.rate, args.threads)
    cases = {
        "/validate-experiment": [_review(_experiment(ns), "Experiment", ns)],
        "/mutate-pod": [_review(_pod(ns, "bench-trial", job_uid), "Pod", ns)],
    }
    print(
        f"webhook pid {proc.pid}, {args.rate:g} req/s for {args.seconds:g} s per endpoint, "
        f"lookup cache {args.lookup_cache_seconds:g} s, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    if args.flood:
        for path, bodies in cases.items():
            load.run(path, bodies, 2.0)  # warm up: connections, discovery cache
        print(
            f"before the flood: RSS {webhook.memory_info().rss / 2**20:.1f} MiB, "
            f"{webhook.num_threads()} threads"
        )
        sampling.set()
        _flood_runs(args, webhook, port, ca, load, cases)
        return 0
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


if __name__ == "__main__":
    exit_on_sigterm()
    sys.exit(main())
