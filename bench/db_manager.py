"""db-manager figures: ReportObservationLog throughput, and latency at a fixed rate.

In a fresh namespace, `--trials` Trials (Push collector) are created, each with its Job and the
Job controller's pod (never scheduled); the real `db-manager` process (services/db-manager)
serves them, and every report sends its Trial's pod token (db-manager accepts a report only
from the Trial's own pod; its verdict is kept 5 s, so the figures include a TokenReview per
Trial every 5 s). Then:

1. Throughput: `--clients` threads report as fast as answers come (closed loop), one metric
   log per request, spread over the Trials, for `--seconds`: reports/s acknowledged.
2. Latency at `--rate` reports/s (default 200, open loop: requests are sent on schedule
   whatever the answers do, as gRPC futures; latency from the time each was due): the
   acknowledged rate, p50, p99, max, errors.

    python bench/db_manager.py --kubeconfig $KUBECONFIG [--trials 20] [--rate 200]
        [--seconds 20] [--clients 16]

Needs kubetune's CRDs installed and `db-manager` on PATH or beside this Python.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import grpc
import psutil
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from kubetune import naming
from kubetune.kube import NAMESPACES, TRIALS, Kube, connect
from kubetune_testkit import builders
from kubetune_testkit.processes import console_script, free_port
from kubetune_testkit.trialpods import bound_token, job_pod

Tokens = dict[str, list[tuple[str, str]]]
"""Each Trial's gRPC metadata: its pod's token for db-manager."""


def request(trial: str, value: float) -> object:
    return pb.ReportObservationLogRequest(
        trial_name=trial,
        observation_log=pb.ObservationLog(
            metric_logs=[
                pb.MetricLog(
                    time_stamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    metric=pb.Metric(name="loss", value=f"{value:.6f}"),
                )
            ]
        ),
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def throughput(stub: pb_grpc.DBManagerStub, tokens: Tokens, clients: int, seconds: float) -> None:
    trials = list(tokens)
    done = [0] * clients
    failed = [0] * clients
    stop = time.monotonic() + seconds

    def client(index: int) -> None:
        i = 0
        while time.monotonic() < stop:
            trial = trials[(index + i * clients) % len(trials)]
            try:
                stub.ReportObservationLog(
                    request(trial, i / 1000), timeout=30, metadata=tokens[trial]
                )
                done[index] += 1
            except grpc.RpcError:
                failed[index] += 1
            i += 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    print(
        f"throughput: {sum(done) / elapsed:7.1f} reports/s acknowledged "
        f"({clients} clients, {len(trials)} trials, {elapsed:.0f} s, {sum(failed)} errors)",
        flush=True,
    )


def at_rate(stub: pb_grpc.DBManagerStub, tokens: Tokens, rate: float, seconds: float) -> None:
    """Open loop: each request leaves on schedule as a gRPC future (no client thread waits
    for an answer, so the client never holds requests back); latency counts from the time
    it was due, so a request the client sent late is not flattered."""
    trials = list(tokens)
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    finished = threading.Semaphore(0)

    def answered(due: float, future: grpc.Future) -> None:
        now = time.monotonic()
        with lock:
            if future.exception() is None:
                latencies.append(now - due)
            else:
                errors.append(str(future.code()))
        finished.release()

    total = int(rate * seconds)
    begin = time.monotonic()
    late = 0.0
    for i in range(total):
        due = begin + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            late = max(late, -delay)
        trial = trials[i % len(trials)]
        future = stub.ReportObservationLog.future(
            request(trial, i / 1000), timeout=30, metadata=tokens[trial]
        )
        future.add_done_callback(lambda f, due=due: answered(due, f))
    for _ in range(total):
        finished.acquire()
    elapsed = time.monotonic() - begin
    if not latencies:
        print(f"at {rate:g} reports/s: every request failed ({errors[:3]})")
        return
    ms = [x * 1000 for x in latencies]
    print(
        f"at {rate:g} reports/s for {seconds:g} s over {len(trials)} trials: "
        f"{len(latencies) / elapsed:.1f} acknowledged/s until the last answer; "
        f"p50 {statistics.median(ms):.1f} ms  p99 {percentile(ms, 0.99):.1f} ms  "
        f"max {max(ms):.1f} ms  errors {len(errors)} of {total} {dict(Counter(errors))}  "
        f"(sent up to {late * 1000:.0f} ms late; load "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())})",
        flush=True,
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--clients", type=int, default=16)
    args = p.parse_args()
    kube = Kube(connect(args.kubeconfig))
    namespace = f"bench-dbm-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    process = None
    try:
        tokens: Tokens = {}
        for name in (f"t{i}" for i in range(args.trials)):
            trial = kube.create(TRIALS, builders.trial(name, collector="Push"), namespace)
            token = bound_token(kube, job_pod(kube, namespace, trial), naming.DB_MANAGER_AUDIENCE)
            tokens[name] = [("authorization", f"Bearer {token}")]
        port = free_port()
        argv = [console_script("db-manager"), "--address", f"127.0.0.1:{port}"]
        argv += ["--namespace", namespace, "--probe-port", "0", "--log-level", "warning"]
        if args.kubeconfig:
            argv += ["--kubeconfig", args.kubeconfig]
        process = subprocess.Popen(argv)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=600)  # the SDK import is slow
        stub = pb_grpc.DBManagerStub(channel)
        server = psutil.Process(process.pid)
        for closed_loop in (True, False):
            before = server.cpu_times()
            if closed_loop:
                throughput(stub, tokens, args.clients, args.seconds)
            else:
                at_rate(stub, tokens, args.rate, args.seconds)
            after = server.cpu_times()
            used = (after.user - before.user) + (after.system - before.system)
            print(f"  db-manager CPU in that phase: {used:.1f} s", flush=True)
    finally:
        if process is not None:
            process.terminate()
            process.wait(30)
        kube.delete(NAMESPACES, namespace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
