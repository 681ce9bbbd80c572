"""db-manager memory under large concurrent reports, and the time of one 10,000-name report.

A local cluster is started (or `--kubeconfig` used), kubetune's CRDs installed, the real
`db-manager` process started against it. Then, for each shape and each count (64, 160):
that many ReportObservationLog requests are sent at once (raw bytes, one buffer shared by the
client threads) and db-manager's RSS is sampled every 10 ms: before, peak, after, and the
answers by gRPC code. Shapes: the issue's (4 MB of small metric logs), the largest message
accepted (just under --max-message-bytes, 4,000 logs) and a report of 10,000 logs (the most).
Last, one report of 10,000 distinct metric names to a fresh Trial, timed: refused at once,
as a Trial keeps at most 100 metrics (`--history-only` times the history's own work for it).
Each request carries its Trial's pod token, as a Push trial sends it.

    python bench/db_manager_memory.py [--kubeconfig K] [--server-args "--workers=32"]
    python bench/db_manager_memory.py --history-only   # no cluster: the history's share

To measure the code before a change, put its sources first on db-manager's path:
`--pythonpath OLD/services/db-manager/src:OLD/shared/src`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import psutil
from kubeflow.katib import katib_api_pb2 as pb

from kubetune import naming
from kubetune.kube import NAMESPACES, TRIALS, Kube, connect
from kubetune_testkit import builders, crds
from kubetune_testkit.processes import console_script, free_port
from kubetune_testkit.trialpods import bound_token, job_pod

METHOD = "/api.v1.beta1.DBManager/ReportObservationLog"
T0 = "2026-12-01T15:00:00Z"


def report(trial: str, names: list[str], value: str) -> bytes:
    return bytes(
        pb.ReportObservationLogRequest(
            trial_name=trial,
            observation_log=pb.ObservationLog(
                metric_logs=[
                    pb.MetricLog(time_stamp=T0, metric=pb.Metric(name=n, value=value))
                    for n in names
                ]
            ),
        ).SerializeToString()
    )


class Sampler:
    """The peak RSS of a process, sampled in a thread while a block runs."""

    def __init__(self, process: psutil.Process) -> None:
        self.process = process
        self.peak = 0
        self._stop = threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(0.01)

    @contextlib.contextmanager
    def sampling(self) -> Iterator[None]:
        self.peak = 0
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()
            self._stop.clear()


def burst(channel: grpc.Channel, raw: bytes, count: int, token: str) -> Counter[str]:
    send = channel.unary_unary(
        METHOD,
        request_serializer=None,
        response_deserializer=pb.ReportObservationLogReply.FromString,
    )
    codes: Counter[str] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(count)

    def one() -> None:
        barrier.wait()
        try:
            send(raw, timeout=60, metadata=bearer(token))
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
        with lock:
            codes[code] += 1

    threads = [threading.Thread(target=one) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def bearer(token: str) -> list[tuple[str, str]]:
    """The metadata a Push trial's pod sends: its bound token (db-manager authenticates it)."""
    return [("authorization", f"Bearer {token}")]


def mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


def run(kubeconfig: str, server_args: list[str], pythonpath: str) -> None:
    kube = Kube(connect(kubeconfig))
    crds.install_kubetune_crds(kube)
    namespace = f"bench-dbmem-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    process = None
    try:
        tokens = {}
        for name in ("t1", "names"):
            trial = kube.create(TRIALS, builders.trial(name, collector="Push"), namespace)
            pod = job_pod(kube, namespace, trial)
            tokens[name] = bound_token(kube, pod, naming.DB_MANAGER_AUDIENCE)
        port = free_port()
        argv = [console_script("db-manager"), "--address", f"127.0.0.1:{port}"]
        argv += ["--namespace", namespace, "--probe-port", "0", "--log-level", "error"]
        argv += ["--kubeconfig", kubeconfig, *server_args]
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        process = subprocess.Popen(argv, env=env)
        channel = grpc.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 * 2**20)]
        )
        grpc.channel_ready_future(channel).result(timeout=600)  # the SDK import is slow
        server = psutil.Process(process.pid)
        sampler = Sampler(server)
        small_logs = (4_000_000 // 34) + 1  # ~34 bytes a log: 4 MB
        shapes = {
            "4 MB of small logs": report("t1", ["loss"] * small_logs, "0.5"),
            "~1 MiB, 4,000 logs": report("t1", ["loss-" + "x" * 140] * 4_000, "0." + "1" * 81),
            "10,000 logs (~0.5 MB)": report("t1", ["loss"] * 10_000, "0." + "1" * 20),
        }
        for label, raw in shapes.items():
            for count in (64, 160):
                time.sleep(1)
                before = server.memory_info().rss
                with sampler.sampling():
                    started = time.monotonic()
                    codes = burst(channel, raw, count, tokens["t1"])
                    took = time.monotonic() - started
                time.sleep(1)
                after = server.memory_info().rss
                print(
                    f"{count:3d} x {label} ({len(raw):,} bytes): RSS before {mib(before)}, "
                    f"peak {mib(sampler.peak)}, after {mib(after)}; answers "
                    f"{dict(sorted(codes.items()))} in {took:.1f} s",
                    flush=True,
                )
        raw = report("names", [f"metric-{i:05d}" for i in range(10_000)], "0.5")
        send = channel.unary_unary(METHOD, request_serializer=None)
        started = time.monotonic()
        try:
            send(raw, timeout=60, metadata=bearer(tokens["names"]))
            code = "OK"
        except grpc.RpcError as e:
            code = f"{e.code().name} ({e.details()})"
        print(
            f"one report of 10,000 distinct metric names ({len(raw):,} bytes): "
            f"{time.monotonic() - started:.2f} s, {code}",
            flush=True,
        )
    finally:
        if process is not None:
            process.terminate()
            process.wait(30)
        kube.delete(NAMESPACES, namespace)


def history_only() -> None:
    """The history's share of a 10,000-name report, in this process (`PYTHONPATH` picks the
    code measured): a fresh Trial, then the same names again on the reloaded history."""
    from kubetune import metrichistory

    names = [f"metric-{i:05d}" for i in range(10_000)]
    started = time.perf_counter()
    history = metrichistory.History()
    for name in names:
        history.append(name, "0.5", T0)
    first = time.perf_counter() - started
    started = time.perf_counter()
    again = metrichistory.History.from_status({metrichistory.FIELD: history.to_wire()})
    for name in names:
        again.append(name, "0.6", T0)
    second = time.perf_counter() - started
    print(f"history of 10,000 names: {first:.2f} s new, {second:.2f} s reloaded and appended")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    p.add_argument("--server-args", default="", help="more db-manager flags (shell words)")
    p.add_argument("--pythonpath", default="", help="PYTHONPATH of the db-manager process")
    p.add_argument("--history-only", action="store_true", help="time the history alone")
    args = p.parse_args()
    if args.history_only:
        history_only()
        return 0
    extra = shlex.split(args.server_args)
    if args.kubeconfig:
        run(args.kubeconfig, extra, args.pythonpath)
        return 0
    from localcluster import cluster

    with tempfile.TemporaryDirectory(prefix="bench-dbmem-") as d:
        state = cluster.up(Path(d) / "state", quiet=True, bind_to_parent=True)
        try:
            run(str(state.kubeconfig), extra, args.pythonpath)
        finally:
            cluster.down(Path(state.state_dir), quiet=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
