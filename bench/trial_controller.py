"""trial-controller figures: job-success -> Trial Succeeded latency, reconciles/s, RSS.

The job kind is a tiny custom resource (`Widget`, the test tree's stand-in CRD) whose status the
bench writes, so the figures measure the controller, not pods on a busy node agent:

1. latency: 200 Trials, each with its observation already written (as the collector would
   before the job ends); one at a time the bench writes the Widget's `status.state: Done` (the
   job turning successful) and times until a watch shows the Trial `Succeeded`. p50 / p99.
2. throughput: 1,000 Trials created at once in one namespace; the controller creates 1,000 jobs
   and writes 1,000 statuses; reconciles/s from its own `kubetune_reconcile_total`. Then the
   controller is restarted over the 1,000 Running Trials (initial list, no writes needed):
   reconciles/s of that pass. RSS (VmRSS / VmHWM) of the controller with the 1,000 Trials.

Targets (issue 4): p50 < 100 ms, p99 < 500 ms, < 150 MiB resident with 1,000 Trials.

    python bench/trial_controller.py [--kubeconfig $KUBECONFIG] [--latency 200] [--trials 1000]

Without a kubeconfig (flag or $KUBECONFIG) it starts its own local cluster and stops it after.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sigterm import exit_on_sigterm

from kubetune import errors
from kubetune.kube import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, TRIALS, Kube, connect
from kubetune_testkit import builders
from kubetune_testkit.conditions import is_true
from kubetune_testkit.crds import (
    WIDGET_CRD,
    WIDGET_FAILURE,
    WIDGET_KIND,
    WIDGET_SUCCESS,
    WIDGETS,
    apply_crd,
    install_kubetune_crds,
)
from kubetune_testkit.processes import console_script, free_port
from kubetune_testkit.standins.services import observe as observe_trial


def _trial(name: str) -> dict[str, Any]:
    """A Trial whose run is a Widget: the bench writes its state, no pod runs."""
    widget = {"apiVersion": WIDGETS.api_version, "kind": "Widget", "metadata": {}, "spec": {}}
    return builders.trial(
        name,
        widget,
        experiment="bench",
        objective_spec=builders.objective(strategies=False),
        primary_container="main",
        success=WIDGET_SUCCESS,
        failure=WIDGET_FAILURE,
    )


class Controller:
    """The trial-controller console script, with its /metrics port and RSS."""

    def __init__(self, kubeconfig: str, namespace: str, log: Path) -> None:
        self.port = free_port()
        script = console_script("trial-controller")
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    script,
                    "--kubeconfig",
                    kubeconfig,
                    "--watch-namespace",
                    namespace,
                    "--no-leader-elect",
                    f"--probe-port={self.port}",
                    "--probe-address=127.0.0.1",
                    "--trial-resources",
                    WIDGET_KIND,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            url = f"http://127.0.0.1:{self.port}/readyz"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1):
                return
            time.sleep(0.05)
        raise SystemExit("controller not ready")

    def reconciles(self) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith("kubetune_reconcile_total{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def memory_mib(self) -> tuple[float, float]:
        fields = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


class Succeeded:
    """Watches the namespace's Trials and records when each first shows a condition."""

    def __init__(self, kube: Kube, namespace: str, type_: str) -> None:
        self.kube, self.namespace, self.type = kube, namespace, type_
        self.seen: dict[str, float] = {}
        self.cond = threading.Condition()
        self.stop = threading.Event()
        rv = kube.list(TRIALS, namespace, limit=1)["metadata"]["resourceVersion"]
        self.thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self.thread.start()

    def _run(self, rv: str) -> None:
        while not self.stop.is_set():
            for event in self.kube.watch(
                TRIALS, self.namespace, resource_version=rv, timeout_seconds=60
            ):
                obj = event.get("object") or {}
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                name = (obj.get("metadata") or {}).get("name")
                if name and is_true(obj, self.type):
                    with self.cond:
                        self.seen.setdefault(name, time.monotonic())
                        self.cond.notify_all()

    def wait(self, names: set[str] | str, timeout: float) -> None:
        wanted = {names} if isinstance(names, str) else names
        deadline = time.monotonic() + timeout
        with self.cond:
            while not wanted <= self.seen.keys():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit(f"timed out: {len(wanted - self.seen.keys())} not {self.type}")
                self.cond.wait(left)


def _create_all(kube: Kube, namespace: str, names: list[str], observe: bool) -> None:
    def one(name: str) -> None:
        kube.create(TRIALS, _trial(name), namespace)
        if observe:
            observe_trial(kube, namespace, name, "0.9")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, names))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextlib.contextmanager
def _namespace(kube: Kube) -> Iterator[str]:
    name = f"bench-trials-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES, {"metadata": {"name": name}})
    try:
        yield name
    finally:
        with contextlib.suppress(errors.ApiError):
            kube.delete(NAMESPACES, name)


def latency(kube: Kube, kubeconfig: str, count: int, log: Path) -> None:
    with _namespace(kube) as ns:
        controller = Controller(kubeconfig, ns, log)
        try:
            controller.ready()
            names = [f"lat-{i}" for i in range(count)]
            running = Succeeded(kube, ns, "Running")
            done = Succeeded(kube, ns, "Succeeded")
            _create_all(kube, ns, names, observe=True)
            running.wait(set(names), 300)
            samples = []
            for name in names:
                t0 = time.monotonic()
                kube.patch(WIDGETS, name, {"status": {"state": "Done"}}, ns, subresource="status")
                done.wait(name, 30)
                samples.append(done.seen[name] - t0)
            ms = [s * 1000 for s in samples]
            print(
                f"job success -> Trial Succeeded over {count} Trials: "
                f"p50 {statistics.median(ms):.1f} ms, p99 {_pct(ms, 0.99):.1f} ms, "
                f"max {max(ms):.1f} ms"
            )
            running.stop.set()
            done.stop.set()
        finally:
            controller.stop()


def throughput(kube: Kube, kubeconfig: str, count: int, log: Path) -> None:
    with _namespace(kube) as ns:
        names = [f"tp-{i}" for i in range(count)]
        running = Succeeded(kube, ns, "Running")
        controller = Controller(kubeconfig, ns, log)
        try:
            controller.ready()
            before = controller.reconciles()
            t0 = time.monotonic()
            _create_all(kube, ns, names, observe=False)
            created = time.monotonic() - t0
            running.wait(set(names), 900)
            elapsed = max(running.seen.values()) - t0
            count_r = controller.reconciles() - before
            rss, hwm = controller.memory_mib()
            print(
                f"{count} new Trials (create {created:.1f}s): all Running after {elapsed:.1f}s, "
                f"{count / elapsed:.0f} Trials/s, {count_r:.0f} reconciles, "
                f"{count_r / elapsed:.0f} reconciles/s (each creates a job + writes status)"
            )
            print(f"RSS with {count} Trials: {rss:.1f} MiB (peak {hwm:.1f} MiB)")
        finally:
            controller.stop()
        # Restart over the 1,000 Running Trials: a pass of reconciles with nothing to write.
        t1 = time.monotonic()
        controller = Controller(kubeconfig, ns, log)
        try:
            controller.ready()
            deadline = time.monotonic() + 300
            total = 0.0
            while time.monotonic() < deadline:
                total = controller.reconciles()
                if total >= count:
                    break
                time.sleep(0.02)
            elapsed = time.monotonic() - t1
            rss, hwm = controller.memory_mib()
            print(
                f"restart over {count} Running Trials: {total:.0f} reconciles in {elapsed:.2f}s "
                f"incl. start-up ({total / elapsed:.0f} reconciles/s); "
                f"RSS {rss:.1f} MiB (peak {hwm:.1f} MiB)"
            )
        finally:
            controller.stop()
        running.stop.set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--latency", type=int, default=200, help="Trials for the latency run")
    parser.add_argument("--trials", type=int, default=1000, help="Trials for the throughput run")
    args = parser.parse_args()
    state: Path | None = None
    kubeconfig = args.kubeconfig
    if not kubeconfig:
        from localcluster import cluster as lc

        state = Path(tempfile.mkdtemp(prefix="bench-trial-controller-"))
        kubeconfig = lc.up(state, quiet=True, bind_to_parent=True).kubeconfig
    log = Path(tempfile.mkdtemp(prefix="bench-trial-controller-logs-")) / "controller.log"
    kube = Kube(connect(kubeconfig))
    made: list[str] = []
    try:
        install_kubetune_crds(kube)
        name, created = apply_crd(kube, WIDGET_CRD)
        if created:
            made.append(name)
        if args.latency:
            latency(kube, kubeconfig, args.latency, log)
        if args.trials:
            throughput(kube, kubeconfig, args.trials, log)
        print(f"controller log: {log}")
    finally:
        for name in made:
            with contextlib.suppress(errors.ApiError):
                kube.delete(CUSTOM_RESOURCE_DEFINITIONS, name)
        if state is not None:
            from localcluster import cluster as lc

            lc.down(state, quiet=True)
            shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    exit_on_sigterm()
    sys.exit(main())
