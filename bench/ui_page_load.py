"""Web UI figures: page load of an experiment with 1,000 and 10,000 trials (target < 1 s), and
the time of each study chart (target < 2 s a chart; WebGL charts reported as they are).

For each `--trials` count, an Experiment (two objectives: accuracy and latency) and that many
Trials (parameters lr, momentum and layers, an int; observation; a metric history of five
reports, one trial in ten early stopped after three) are created in a fresh namespace, with the
Experiment's Pareto front written into its status; `kubetune-ui` runs against the cluster;
headless Chromium (Debian's, as in `tox -e ui`) opens the experiment page `--repeat` times
(after one load that fills the browser's cache). Figures per load, as the page measures them
(`performance.now()`): navigation start to the summary and the trials table drawn (the page
load), to the objective chart drawn (plotly.js, 4.8 MB, loads async), to the parallel
coordinates (WebGL: software-rendered in a headless browser); and for each study chart, its own
fetch and draw time. Then the JSON endpoints' sizes and server times. The first load computes
the importance (cached afterwards until a trial finishes): its time is the first column. Prints
first / min / median / max; no asserts.

    python bench/ui_page_load.py [--kubeconfig $KUBECONFIG] [--trials 1000 10000] [--repeat 5]

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

from sigterm import exit_on_sigterm

from kubetune import naming
from kubetune.kube import EXPERIMENTS, NAMESPACES, TRIALS, Kube, connect
from kubetune_testkit import builders
from kubetune_testkit.crds import install_kubetune_crds
from kubetune_testkit.processes import console_script, free_port
from kubetune_testkit.uipaths import object_path
from kubetune_testkit.waiting import wait_for

STARTED = "2026-01-01T00:00:00Z"


CHARTS = (
    ("summary + trials table (page load)", "drawnMs"),
    ("objective chart drawn", "chartsMs"),
    ("parallel coordinates drawn (WebGL)", "parcoordsMs"),
    ("study JSON fetched", "studyDrawMs"),
    ("slice plots (one per parameter)", "slicesDrawMs"),
    ("empirical distribution", "edfDrawMs"),
    ("intermediate values", "intermediateDrawMs"),
    ("Pareto front (2 objectives: scatter)", "paretoDrawMs"),
    ("contour", "contourDrawMs"),
    ("importance (fetch + draw)", "importanceDrawMs"),
)
"""What is timed: a label, and the page's `data-*` attribute on <body> holding milliseconds."""


def results(i: int) -> tuple[float, float]:
    """Trial i's accuracy and latency (deterministic, spread over the run)."""
    return 0.5 + ((i * 31337) % 500) / 1000, 1 + ((i * 7907) % 900) / 100


def make_trial(kube: Kube, namespace: str, experiment: str, i: int) -> None:
    lr, momentum = f"{0.001 + (i * 7919 % 1000) / 10000:.4f}", f"{(i * 104729 % 100) / 100:.2f}"
    accuracy, latency = results(i)
    body = builders.trial(
        f"{experiment}-{i:05d}",
        experiment=naming.label_value(experiment),
        assignments={"lr": lr, "momentum": momentum, "layers": str(1 + i * 13 % 8)},
    )
    kube.create(TRIALS, body, namespace)
    stopped = i % 10 == 9
    reports = [accuracy * (k + 1) / 5 for k in range(3 if stopped else 5)]
    state = "EarlyStopped" if stopped else "Succeeded"
    status = {
        "startTime": STARTED,
        "completionTime": "2026-01-01T00:02:00Z",
        "conditions": [
            {"type": state, "status": "True", "reason": f"Trial{state}",
             "lastTransitionTime": STARTED, "lastUpdateTime": STARTED},
        ],
        "observation": {"metrics": [
            {"name": "accuracy", "min": "0.1", "max": str(accuracy), "latest": str(accuracy)},
            {"name": "latency", "min": str(latency), "max": str(latency), "latest": str(latency)},
        ]},
        "metricHistory": {"metrics": [
            {"name": "accuracy", "reports": len(reports), "steps": list(range(len(reports))),
             "values": [str(v) for v in reports], "times": [STARTED] * len(reports)},
        ]},
    }  # fmt: skip
    kube.patch(
        TRIALS, body["metadata"]["name"], {"status": status}, namespace, subresource="status"
    )


def pareto_front(trials: int) -> list[dict[str, Any]]:
    """The non-dominated succeeded trials (accuracy up, latency down), as the status holds
    them: by accuracy descending, each one with a lower latency than every one before."""
    front, best_latency = [], float("inf")
    done = [i for i in range(trials) if i % 10 != 9]
    for i in sorted(done, key=lambda i: (-results(i)[0], results(i)[1])):
        accuracy, latency = results(i)
        if latency < best_latency:
            best_latency = latency
            front.append({
                "trialName": f"big-{i:05d}",
                "observation": {"metrics": [
                    {"name": "accuracy", "min": str(accuracy), "max": str(accuracy),
                     "latest": str(accuracy)},
                    {"name": "latency", "min": str(latency), "max": str(latency),
                     "latest": str(latency)},
                ]},
            })  # fmt: skip
    return front


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1100")
    # The page times itself from navigation start: `get` need not wait for the load event,
    # which the charts' first draws can hold back on a busy machine.
    options.page_load_strategy = "eager"
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    executor = driver.command_executor
    if not isinstance(executor, str):
        executor.client_config.timeout = 600
    return driver


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
            {"name": "layers", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "8"}},
        ]  # fmt: skip
        experiment = builders.experiment("big", namespace, parameters=parameters)
        experiment["spec"]["objective"]["additionalMetricNames"] = ["latency"]
        experiment["spec"]["objective"]["objectives"] = [
            {"metricName": "accuracy", "type": "maximize"},
            {"metricName": "latency", "type": "minimize"},
        ]
        kube.create(EXPERIMENTS, experiment, namespace)
        front = pareto_front(trials)
        status = {"paretoFront": front, "paretoFrontSize": len(front)}
        kube.patch(EXPERIMENTS, "big", {"status": status}, namespace, subresource="status")
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
        wait_for("the UI's caches", lambda: http_status(base + "/readyz") == 200, timeout=300)
        api = base + object_path("/api/experiments", namespace, "big")
        endpoints = [("experiment JSON", api), ("study JSON", api + "/study"),
                     ("contour JSON (lr, layers)", api + "/contour?x=lr&y=layers"),
                     ("importance JSON", api + "/importance")]  # fmt: skip
        for what, url in endpoints:
            times = []
            for _ in range(repeat):
                t1 = time.perf_counter()
                with urllib.request.urlopen(url, timeout=120) as answer:
                    size = len(answer.read())
                times.append(time.perf_counter() - t1)
            print(
                f"{what}, {trials} trials: {size / 1024:.0f} KiB, first {times[0] * 1000:.0f} ms,"
                f" median {statistics.median(times) * 1000:.0f} ms over {repeat} GETs"
            )
        driver = browser()
        driver.set_script_timeout(120)
        figures: dict[str, list[float]] = {key: [] for _, key in CHARTS}
        try:
            for _ in range(repeat + 1):  # the first load fills the browser's cache of plotly.js
                driver.get(base + object_path("/experiments", namespace, "big"))
                for what, key in CHARTS:
                    value = wait_for(what, page_figure(driver, key), timeout=300, interval=0.05)
                    figures[key].append(float(value) / 1000)
                rows = driver.execute_script(
                    "return document.querySelectorAll('#trials tbody tr').length"
                )
                assert rows == trials, rows
        finally:
            driver.quit()
        for what, key in CHARTS:
            values = figures[key]
            cold, warm = values[0], values[1:]
            since = "its fetch and draw" if key.endswith("DrawMs") else "from navigation start"
            print(
                f"experiment page, {trials} trials, {what} ({since}): first load"
                f" {cold * 1000:.0f} ms; then min {min(warm) * 1000:.0f} / median"
                f" {statistics.median(warm) * 1000:.0f} / max {max(warm) * 1000:.0f} ms over"
                f" {len(warm)} loads"
            )
        print("targets: page load < 1000 ms; each study chart < 2000 ms (WebGL: as measured)")
    finally:
        if ui is not None:
            ui.terminate()
            ui.wait(20)
        with contextlib.suppress(Exception):
            kube.delete(NAMESPACES, namespace)


def page_figure(driver: Any, key: str) -> Callable[[], str | None]:
    """Reads the page's `data-<key>` figure on <body> (None until the page has set it)."""

    def read() -> str | None:
        value = driver.execute_script("return document.body.dataset[arguments[0]]", key)
        return None if value is None else str(value)

    return read


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
        kubeconfig = lc.up(state, quiet=True, bind_to_parent=True).kubeconfig
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
    parser.add_argument("--trials", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    def each(kubeconfig: str) -> None:
        for trials in args.trials:
            measure(kubeconfig, trials, args.repeat)

    on_a_cluster(args.kubeconfig, each)
    return 0


if __name__ == "__main__":
    exit_on_sigterm()
    raise SystemExit(main())
