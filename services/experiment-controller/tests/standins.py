"""Helpers of the integration tests: the controller in-process, and Experiments to run.

The suggestion-algorithm and the trial-controller are other services; the tests play them with
`kubetune_testkit.standins.services` (`StandInAlgorithm` writes assignments into the Suggestion
status the way the contract says, `set_trial` writes Trial status conditions and observations),
so each test decides exactly when an assignment appears and how each trial ends.
"""

from __future__ import annotations

import threading
from typing import Any

from kubetune import naming
from kubetune.kube import EXPERIMENTS, TRIALS, Kube, Obj
from kubetune.runtime import running
from kubetune_experiment_controller import main
from kubetune_testkit import builders, conditions


class RunningController:
    """The controller in a thread of the test process, watching one namespace."""

    def __init__(self, kube: Kube, namespace: str, max_listed: int = 1000) -> None:
        args = main.parser().parse_args(
            [
                "--no-leader-elect",
                "--probe-port=0",
                "--probe-address=127.0.0.1",
                f"--watch-namespace={namespace}",
                f"--max-listed-trials={max_listed}",
            ]
        )
        controller = main.build(args)
        self.process = running.Process(kube, [controller], args)
        self.thread = threading.Thread(target=self.process.run, daemon=True)

    def start(self) -> RunningController:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.process.stop.set()
        self.thread.join(30)


def experiment_manifest(
    name: str,
    namespace: str,
    *,
    max_trials: int | None = 6,
    parallel: int = 3,
    max_failed: int | None = None,
    goal: float | None = None,
    resume: str = "Never",
    trial_spec: dict[str, Any] | None = None,
) -> Obj:
    """A random search over `lr` maximizing `accuracy`, labelled `team: ml` (the labels are
    copied to the Suggestion)."""
    spec: dict[str, Any] = {"parallelTrialCount": parallel, "resumePolicy": resume}
    if max_trials is not None:
        spec["maxTrialCount"] = max_trials
    if max_failed is not None:
        spec["maxFailedTrialCount"] = max_failed
    return builders.experiment(
        name,
        namespace,
        objective_spec=builders.objective(goal=goal),
        trial_spec=trial_spec,
        labels={"team": "ml"},
        **spec,
    )


def trials_of(kube: Kube, namespace: str, experiment: str) -> list[Obj]:
    return kube.list_all(
        TRIALS, namespace, label_selector=f"{naming.LABEL_EXPERIMENT}={experiment}"
    )


def experiment_status(kube: Kube, namespace: str, name: str) -> Obj:
    return (kube.get(EXPERIMENTS, name, namespace).get("status")) or {}


def last_condition(kube: Kube, namespace: str, name: str) -> tuple[str, str, str] | None:
    return conditions.last_condition(kube.get(EXPERIMENTS, name, namespace))
