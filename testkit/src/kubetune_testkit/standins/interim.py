"""An Experiment's Trials run to the end with interim reports, as the trial-controller and the
collector would write them: Running, `reports` observations each with its metric history
appended, then Succeeded with the final value. The assignments come from `StandInAlgorithm`.

Used by the experiment-controller's test of its Trial event filter and by
`bench/experiment_reconciles.py`, which count the Experiment's reconciles over such a run.
"""

from __future__ import annotations

from prometheus_client import REGISTRY

from kubetune import metrichistory, naming
from kubetune.kube import TRIALS, Kube, Obj
from kubetune_testkit.builders import observation
from kubetune_testkit.standins.services import StandInAlgorithm, set_trial
from kubetune_testkit.waiting import wait_for

OUTCOMES = ("success", "requeue", "terminal", "conflict", "namespace-terminating", "error")


def reconciles(controller: str) -> int:
    """The reconciles `controller` ran in this process so far, whatever their outcome (the
    runtime's `kubetune_reconcile_total`)."""
    total = 0.0
    for outcome in OUTCOMES:
        labels = {"controller": controller, "outcome": outcome}
        total += REGISTRY.get_sample_value("kubetune_reconcile_total", labels) or 0.0
    return int(total)


def _trial_names(kube: Kube, namespace: str, experiment: str) -> list[str]:
    selector = f"{naming.LABEL_EXPERIMENT}={naming.label_value(experiment)}"
    found = kube.list_all(TRIALS, namespace, label_selector=selector)
    return [t["metadata"]["name"] for t in found]


def report(
    kube: Kube, namespace: str, trial: str, history: metrichistory.History, value: str
) -> None:
    """One interim report: the observation and the history with `value` appended."""
    history.append("accuracy", value)
    status: Obj = {"observation": observation(value), metrichistory.FIELD: history.to_wire()}
    kube.patch(TRIALS, trial, {"status": status}, namespace, subresource="status")


def run_trials(kube: Kube, namespace: str, experiment: str, trials: int, reports: int) -> list[str]:
    """Run `trials` Trials of `experiment` one wave at a time (whatever the controller has
    created), each with `reports` interim reports, until that many have succeeded; the n-th
    to finish ends with the value 0.5 + n/100. Returns their names in finishing order."""
    algorithm = StandInAlgorithm(kube, namespace, experiment)
    done: list[str] = []
    while len(done) < trials:

        def waiting() -> list[str]:
            algorithm.fulfil()  # hands out what is requested by now
            return [n for n in _trial_names(kube, namespace, experiment) if n not in done]

        for name in sorted(wait_for("Trials to run", waiting)):
            set_trial(kube, namespace, name, "Running")
            history = metrichistory.History()
            for step in range(reports):
                report(kube, namespace, name, history, f"0.{step + 1:03d}")
            set_trial(kube, namespace, name, "Succeeded", 0.5 + len(done) / 100)
            done.append(name)

    return done
