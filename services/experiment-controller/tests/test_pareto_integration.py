"""A multi-objective Experiment against a real API server: the CRD keeps the new fields, every
Trial asks for both objectives' metrics, and the status front matches the Trials' own results.
The test plays the algorithm and the trial-controller (`kubetune_testkit.standins`)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune import naming
from kubetune.kube import EXPERIMENTS, TRIALS, Kube
from kubetune_testkit import builders
from kubetune_testkit.standins.services import STAMP, StandInAlgorithm
from kubetune_testkit.waiting import wait_for
from tests.standins import RunningController, experiment_status, last_condition, trials_of

pytestmark = pytest.mark.integration

OBJECTIVES = [
    {"metricName": "accuracy", "type": "maximize"},
    {"metricName": "seconds", "type": "minimize"},
]
# index -> (accuracy, seconds); None: the trial fails.
RESULTS: dict[int, tuple[float, float] | None] = {
    0: (0.70, 20.0),  # dominated by 2
    1: (0.90, 50.0),
    2: (0.80, 10.0),
    3: (0.60, 40.0),  # dominated by 2
    4: None,
    5: (0.95, 90.0),
    6: (0.80, 10.0),  # equal to 2: both stay
    7: (0.50, 5.0),
}


def _finish(kube: Kube, namespace: str, name: str, result: tuple[float, float] | None) -> None:
    state = "Failed" if result is None else "Succeeded"
    status: dict[str, Any] = {
        "conditions": [
            {"type": "Created", "status": "True", "lastUpdateTime": STAMP},
            {"type": state, "status": "True", "reason": f"Trial{state}", "lastUpdateTime": STAMP},
        ]
    }
    if result is not None:
        status["observation"] = {
            "metrics": [
                builders.metric("accuracy", result[0]),
                builders.metric("seconds", result[1]),
            ]
        }
    kube.patch(TRIALS, name, {"status": status}, namespace, subresource="status")


def _dominated(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether `b` beats `a` (higher accuracy, fewer seconds)."""
    return b[0] >= a[0] and b[1] <= a[1] and a != b


def test_the_status_front_matches_the_trials_results(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    manifest = builders.experiment(
        "pareto",
        namespace,
        objective_spec={
            "type": "maximize",
            "objectiveMetricName": "accuracy",
            "objectives": OBJECTIVES,
        },
        parallelTrialCount=4,
        maxTrialCount=len(RESULTS),
        maxFailedTrialCount=3,
        resumePolicy="Never",
    )
    kube.create(EXPERIMENTS, manifest, namespace)
    stored = kube.get(EXPERIMENTS, "pareto", namespace)
    assert stored["spec"]["objective"]["objectives"] == OBJECTIVES  # not pruned by the CRD
    algorithm = StandInAlgorithm(kube, namespace, "pareto")
    finished: set[str] = set()

    def open_trials() -> list[str] | None:
        algorithm.fulfil()  # hands out what is requested by now
        names = [t["metadata"]["name"] for t in trials_of(kube, namespace, "pareto")]
        return [n for n in names if n not in finished] or None

    while len(finished) < len(RESULTS):
        for name in wait_for("open trials", open_trials):
            _finish(kube, namespace, name, RESULTS[_index(name)])
            finished.add(name)
    wait_for(
        "Succeeded",
        lambda: (
            last_condition(kube, namespace, "pareto")
            == ("Succeeded", "True", "ExperimentMaxTrialsReached")
        ),
    )

    # The front, from the Trials as the API server has them.
    results: dict[str, tuple[float, float]] = {}
    created: dict[str, str] = {}
    for trial in trials_of(kube, namespace, "pareto"):
        created[trial["metadata"]["name"]] = trial["metadata"]["creationTimestamp"]
        objective = trial["spec"]["objective"]
        strategies = {s["name"]: s["value"] for s in objective["metricStrategies"]}
        assert strategies == {"accuracy": "max", "seconds": "min"}  # both are collected
        observed = {
            m["name"]: m for m in (trial["status"].get("observation") or {}).get("metrics") or []
        }
        if "accuracy" in observed and "seconds" in observed:
            results[trial["metadata"]["name"]] = (
                float(observed["accuracy"]["max"]),
                float(observed["seconds"]["min"]),
            )
    expected = sorted(
        (
            name
            for name, point in results.items()
            if not any(_dominated(point, other) for other in results.values())
        ),
        # Equal points in creation order (time, then name), as the controller orders trials.
        key=lambda n: (-results[n][0], results[n][1], created[n], n),
    )
    status = experiment_status(kube, namespace, "pareto")
    front = status["paretoFront"]
    assert [e["trialName"] for e in front] == expected
    assert status["paretoFrontSize"] == len(expected) == 5
    for entry in front:
        metrics = {m["name"]: m for m in entry["observation"]["metrics"]}
        point = (float(metrics["accuracy"]["max"]), float(metrics["seconds"]["min"]))
        assert point == results[entry["trialName"]]
        assert entry["parameterAssignments"][0]["name"] == "lr"
    # Katib's field keeps its meaning: the best trial by the first objective.
    assert status["currentOptimalTrial"]["bestTrialName"] == naming.trial_name("pareto", "5")


def _index(name: str) -> int:
    return next(i for i in RESULTS if naming.trial_name("pareto", str(i)) == name)
