"""Web UI figure: page load of an experiment with 1,000 trials (target < 1 s).

An Experiment and `--trials` Succeeded Trials (parameters, observation, times) are created in a
fresh namespace; `kubetune-ui` runs against the cluster; headless Chromium (Debian's, as in
`tox -e ui`) opens the experiment page `--repeat` times (after one load that fills the
browser's cache). Figures per load, as the page measures them (`performance.now()`): navigation
start to the summary and the trials table drawn (the page load), to the objective chart drawn
(plotly.js, 4.8 MB, loads async), and to the parallel coordinates drawn after them (WebGL:
software-rendered in a headless browser); and the JSON's size and server time. Prints min /
median / max; no asserts.

    python bench/ui_page_load.py [--kubeconfig $KUBECONFIG] [--trials 1000] [--repeat 5]

Run it in the `ui` tox env (`.tox/ui/bin/python bench/ui_page_load.py`): it needs kubetune-ui,
selenium and Chromium. Without a kubeconfig it starts its own local cluster and stops it after.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubetune import naming
from kubetune.kube import EXPERIMENTS, NAMESPACES, TRIALS, Kube, connect
from kubetune_testkit import builders
from kubetune_testkit.crds import install_kubetune_crds
from kubetune_testkit.processes import console_script, free_port
from kubetune_testkit.uipaths import object_path
from kubetune_testkit.waiting import wait_for

STARTED = "2026-01-01T00:00:00Z"


def make_trial(kube: Kube, namespace: str, experiment: str, i: int) -> None:
    lr, momentum = f"{0.001 + (i * 7919 % 1000) / 10000:.4f}", f"{(i * 104729 % 100) / 100:.2f}"
    accuracy = 0.5 + ((i * 31337) % 500) / 1000
    body = builders.trial(
        f"{experiment}-{i:05d}",
        experiment=naming.label_value(experiment),
        assignments={"lr": lr, "momentum": momentum},
    )
    kube.create(TRIALS, body, namespace)
    status = {
        "startTime": STARTED,
        "completionTime": "2026-01-01T00:02:00Z",
        "conditions": [
            {"type": "Succeeded", "status": "True", "reason": "TrialSucceeded",
             "lastTransitionTime": STARTED, "lastUpdateTime": STARTED},
        ],
        "observation": {"metrics": [
            {"name": "accuracy", "min": "0.1", "max": str(accuracy), "latest": str(accuracy)}
        ]},
    }  # fmt: skip
    kube.patch(
        TRIALS, body["metadata"]["name"], {"status": status}, namespace, subresource="status"
    )


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1100")
    return webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))


def measure(kubeconfig: str, trials: int, repeat: int) -> None:
    kube = Kube(connect(kubeconfig))
    install_kubetune_crds(kube)
    namespace = f"bench-ui-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    ui: subprocess.Popen[bytes] | None = None
    try:
        parameters = [
            builders.LR,
            {"name": "momentum", "parameterType": "double",
             "feasibleSpace": {"min": "0", "max": "1"}},
        ]  # fmt: skip
        experiment = builders.experiment("big", namespace, parameters=parameters)
        kube.create(EXPERIMENTS, experiment, namespace)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: make_trial(kube, namespace, "big", i), range(trials)))
        print(f"{trials} trials created in {time.perf_counter() - t0:.1f}s")
        port = free_port()
        log = Path(tempfile.mkdtemp(prefix="bench-ui-")) / "ui.log"
        with log.open("wb") as out:
            ui = subprocess.Popen(
                [console_script("kubetune-ui"), f"--kubeconfig={kubeconfig}", f"--port={port}",
                 f"--watch-namespace={namespace}", "--writes=off"],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        wait_for("the UI's caches", lambda: http_status(base + "/readyz") == 200, timeout=120)
        api = base + object_path("/api/experiments", namespace, "big")
        times = []
        for _ in range(repeat):
            t1 = time.perf_counter()
            with urllib.request.urlopen(api, timeout=30) as answer:
                size = len(answer.read())
            times.append(time.perf_counter() - t1)
        print(
            f"experiment JSON: {size / 1024:.0f} KiB, median {statistics.median(times) * 1000:.0f}"
            f" ms over {repeat} GETs"
        )
        driver = browser()
        driver.set_script_timeout(120)
        loads: list[float] = []
        objective: list[float] = []
        parcoords: list[float] = []
        try:
            for _ in range(repeat + 1):  # the first load fills the browser's cache of plotly.js
                driver.get(base + object_path("/experiments", namespace, "big"))
                drawn = wait_for(
                    "the page drawn",
                    lambda: driver.execute_script("return document.body.dataset.drawnMs"),
                    timeout=120,
                    interval=0.05,
                )
                chart = wait_for(
                    "the objective chart drawn",
                    lambda: driver.execute_script("return document.body.dataset.chartsMs"),
                    timeout=300,
                    interval=0.05,
                )
                charts = wait_for(
                    "the parallel coordinates drawn",
                    lambda: driver.execute_script("return document.body.dataset.parcoordsMs"),
                    timeout=300,
                    interval=0.05,
                )
                loads.append(float(drawn) / 1000)
                objective.append(float(chart) / 1000)
                parcoords.append(float(charts) / 1000)
                rows = driver.execute_script(
                    "return document.querySelectorAll('#trials tbody tr').length"
                )
                assert rows == trials, rows
        finally:
            driver.quit()
        for what, values in (
            ("summary + trials table (page load)", loads),
            ("objective chart drawn", objective),
            ("parallel coordinates drawn", parcoords),
        ):
            cold, warm = values[0], values[1:]
            print(
                f"experiment page, {trials} trials, {what}: first load {cold * 1000:.0f} ms; then"
                f" min {min(warm) * 1000:.0f} / median {statistics.median(warm) * 1000:.0f} / max"
                f" {max(warm) * 1000:.0f} ms over {len(warm)} loads"
            )
        print("target: page load < 1000 ms")
    finally:
        if ui is not None:
            ui.terminate()
            ui.wait(20)
        with contextlib.suppress(Exception):
            kube.delete(NAMESPACES, namespace)


def http_status(url: str) -> int:
    """The answer's status; 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status)
    except OSError:
        return 0


def on_a_cluster(kubeconfig: str | None, measure: Callable[[str], None]) -> None:
    """`measure(kubeconfig)`; without one, on a local cluster started and stopped here."""
    state: Path | None = None
    if not kubeconfig:
        from localcluster import cluster as lc

        state = Path(tempfile.mkdtemp(prefix="bench-ui-cluster-"))
        kubeconfig = lc.up(state, quiet=True).kubeconfig
    try:
        measure(kubeconfig)
    finally:
        if state is not None:
            from localcluster import cluster as lc

            lc.down(state, quiet=True)
            shutil.rmtree(state, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    on_a_cluster(args.kubeconfig, lambda kubeconfig: measure(kubeconfig, args.trials, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
