"""experiment-controller: how many reconciles an Experiment costs, with and without the Trial
event filter (`summaries.plan_input_changed`).

One run each way, in this process against a real API server: an Experiment of `--trials`
Trials (parallel `--parallel`, random search) whose Trials the bench runs as the
trial-controller and the collector would, each with `--reports` interim reports (observation
and metric history). Printed: the Experiment's reconciles (`kubetune_reconcile_total`), the
Experiment GETs they made, the Trial updates the filter kept out of the queue, and how many
reconciles ended in a conflict (a status write from a stale copy of the Experiment). "before"
is the same controller with the Trial watch's predicate removed (every update enqueues).

    python bench/experiment_reconciles.py [--kubeconfig K] [--trials 20] [--reports 20]

Without a kubeconfig (flag or $KUBECONFIG) it starts its own local cluster and stops it after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY
from sigterm import exit_on_sigterm

from kubetune.kube import EXPERIMENTS, NAMESPACES, TRIALS, Kube, connect
from kubetune.runtime import running
from kubetune_experiment_controller import main as controller_main
from kubetune_testkit import builders
from kubetune_testkit.conditions import is_true
from kubetune_testkit.crds import install_kubetune_crds
from kubetune_testkit.standins.interim import reconciles, run_trials
from kubetune_testkit.waiting import wait_for


class CountingKube(Kube):
    """Counts the GETs of Experiments (what a pass reads first; `get_or_none` calls `get`)."""

    experiment_gets = 0

    def get(self, res: Any, name: str, namespace: str | None = None, **kw: Any) -> Any:
        if res == EXPERIMENTS:
            CountingKube.experiment_gets += 1
        return super().get(res, name, namespace, **kw)


def filtered() -> int:
    labels = {"controller": controller_main.SERVICE, "resource": TRIALS.plural}
    return int(REGISTRY.get_sample_value("kubetune_watch_events_filtered_total", labels) or 0)


def conflicts() -> int:
    labels = {"controller": controller_main.SERVICE, "outcome": "conflict"}
    return int(REGISTRY.get_sample_value("kubetune_reconcile_total", labels) or 0)


def one_run(kube: Kube, args: argparse.Namespace, *, filtering: bool) -> dict[str, int]:
    namespace = f"bench-reconciles-{uuid.uuid4().hex[:6]}"
    kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    flags = ["--no-leader-elect", "--probe-port=0", f"--watch-namespace={namespace}"]
    controller = controller_main.build(controller_main.parser().parse_args(flags))
    if not filtering:
        for watch in controller.watches:
            watch.predicate = None
    counting = CountingKube(kube.api)
    process = running.Process(counting, [controller], controller_main.parser().parse_args(flags))
    thread = threading.Thread(target=process.run, daemon=True)
    thread.start()
    start = (
        reconciles(controller_main.SERVICE),
        CountingKube.experiment_gets,
        filtered(),
        conflicts(),
    )
    try:
        manifest = builders.experiment(
            "bench",
            namespace,
            objective_spec=builders.objective(),
            maxTrialCount=args.trials,
            parallelTrialCount=args.parallel,
        )
        kube.create(EXPERIMENTS, manifest, namespace)
        run_trials(kube, namespace, "bench", args.trials, args.reports)
        wait_for(
            "the Experiment to succeed",
            lambda: is_true(kube.get(EXPERIMENTS, "bench", namespace), "Succeeded"),
        )
    finally:
        process.stop.set()
        thread.join(30)
        kube.delete(NAMESPACES, namespace)
    return {
        "reconciles": reconciles(controller_main.SERVICE) - start[0],
        "experiment GETs": CountingKube.experiment_gets - start[1],
        "Trial updates filtered": filtered() - start[2],
        "of the reconciles conflicts": conflicts() - start[3],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--reports", type=int, default=20, help="interim reports per Trial")
    args = parser.parse_args()
    state: Path | None = None
    kubeconfig = args.kubeconfig
    if not kubeconfig:
        from localcluster import cluster as lc

        state = Path(tempfile.mkdtemp(prefix="bench-experiment-reconciles-"))
        kubeconfig = lc.up(state, quiet=True, bind_to_parent=True).kubeconfig
    try:
        kube = Kube(connect(kubeconfig))
        install_kubetune_crds(kube)
        print(
            f"{args.trials} trials, parallel {args.parallel}, {args.reports} interim reports each"
        )
        for label, filtering in (("before (no filter)", False), ("after (filter)", True)):
            figures = one_run(kube, args, filtering=filtering)
            print(f"{label}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    finally:
        if state is not None:
            from localcluster import cluster as lc

            lc.down(state, quiet=True)
            shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    exit_on_sigterm()
    sys.exit(main())
