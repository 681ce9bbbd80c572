"""Time and memory of the webhook's answer to grid Experiments, the attack inputs included.

Starts `webhook serve` (as bench/webhook_latency.py does) against a real API server and posts
AdmissionReviews to /validate-experiment, one per case, several times each: a small grid, one
int parameter 0..9e18 without a step (it made the webhook allocate 9.1 GB in 90 s), 21 int
parameters of 1,001 values (~1e63 points), and a double with step 5e-324 over -1e308..1e308.
Prints per case the answer (allowed, or the start of the refusal), the median and worst time to
the whole answer, and the webhook's RSS before and its peak over the case (sampled every 10 ms).

    python bench/webhook_grid.py [--kubeconfig $KUBECONFIG] [--repeat 20]

Without a kubeconfig it starts its own local cluster (localcluster) and stops it afterwards.
Against the code before the grid limits, run it under a cap (`prlimit --as=2000000000 python
bench/webhook_grid.py`): the 9e18 case otherwise takes all the machine's memory.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import ssl
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
from webhook_latency import _experiment, _review, served

from kubetune import errors, naming
from kubetune.kube import NAMESPACES


def _int(name: str, high: str) -> dict[str, Any]:
    return {"name": name, "parameterType": "int", "feasibleSpace": {"min": "0", "max": high}}


OPT = {"name": "opt", "parameterType": "categorical", "feasibleSpace": {"list": ["a", "b"]}}
CASES: dict[str, list[dict[str, Any]]] = {  # lr and opt: the names the trial template uses
    "small grid (4 x 2)": [_int("lr", "3"), OPT],
    "int 0..9e18": [_int("lr", "9e18"), OPT],
    "int 0..9000000000000000000": [_int("lr", "9000000000000000000"), OPT],
    "21 ints x 1,001 values": [
        _int(n, "1000") for n in ["lr", "opt", *(f"p{i}" for i in range(19))]
    ],
    "double step 5e-324": [
        {
            "name": "lr",
            "parameterType": "double",
            "feasibleSpace": {"min": "-1e308", "max": "1e308", "step": "5e-324"},
        },
        OPT,
    ],
}


def _grid_experiment(ns: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
    experiment = _experiment(ns)
    experiment["spec"]["algorithm"] = {"algorithmName": "grid"}
    experiment["spec"]["parameters"] = parameters
    return experiment


def _sample(process: psutil.Process, peak: list[int], done: threading.Event) -> None:
    """Keep `peak[0]` at the largest RSS seen every 10 ms until `done`."""
    while not done.wait(0.01):
        peak[0] = max(peak[0], process.memory_info().rss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    ns = f"bench-webhook-grid-{uuid.uuid4().hex[:6]}"
    with served(args.kubeconfig) as (kube, proc, port, ca):
        labels = {naming.LABEL_INJECTION: naming.INJECTION_ENABLED}
        kube.create(
            NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}},
        )
        try:
            _measure(ns, args.repeat, proc, port, ca)
        finally:
            with contextlib.suppress(errors.ApiError):
                kube.delete(NAMESPACES, ns)
    return 0


def _measure(ns: str, repeat: int, proc: subprocess.Popen[bytes], port: int, ca: Path) -> None:
    webhook = psutil.Process(proc.pid)
    ctx = ssl.create_default_context(cafile=str(ca))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=120)
    print(f"webhook pid {proc.pid}, {repeat} requests per case, {os.cpu_count()} CPUs")
    print(f"{'case':28} {'p50 ms':>8} {'max ms':>8} {'RSS MiB':>8} {'peak MiB':>9}  answer")
    for case, parameters in CASES.items():
        body = _review(_grid_experiment(ns, parameters), "Experiment", ns)
        before = webhook.memory_info().rss
        done = threading.Event()
        peak = [before]
        sampler = threading.Thread(target=_sample, args=(webhook, peak, done), daemon=True)
        sampler.start()
        times: list[float] = []
        answer: dict[str, Any] = {}
        for _ in range(repeat):
            t0 = time.perf_counter()
            headers = {"Content-Type": "application/json"}
            conn.request("POST", "/validate-experiment", body=body, headers=headers)
            answer = json.loads(conn.getresponse().read())["response"]
            times.append((time.perf_counter() - t0) * 1e3)
        done.set()
        sampler.join()
        status = answer.get("status") or {}
        message = "allowed" if answer.get("allowed") else str(status.get("message", ""))
        print(
            f"{case:28} {statistics.median(times):8.2f} {max(times):8.2f} "
            f"{before / 2**20:8.1f} {peak[0] / 2**20:9.1f}  {message[:110]}"
        )


if __name__ == "__main__":
    sys.exit(main())
