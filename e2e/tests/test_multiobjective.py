"""A multi-objective Experiment end to end on the local overlay (kubetune's extension
`spec.objective.objectives`): the webhook fills objectiveMetricName/type in from the first
objective, the real collector reports both metrics of every Trial, NSGA-II in its algorithm pod
is told both values, and `status.paretoFront` lists exactly the trials the Trials' own results
say are non-dominated, best first by the first objective. And Katib's manifests round-trip
unchanged through kubetune's model and Katib's SDK, which reads a multi-objective Experiment as
the single-objective one on its first objective."""

from __future__ import annotations

import copy
import json
import subprocess
from typing import Any

import pytest
import test_local_overlay as overlay
from podcode import python_code

from kubetune.api.experiment import Experiment
from kubetune_testkit import builders, katibsdk
from kubetune_testkit.examples import examples
from kubetune_testkit.kubectl import get_json
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration
Obj = dict[str, Any]

# A trade-off: a larger lr is more accurate and slower; more layers are slower only.
SCRIPT = (
    "import sys; lr, layers = float(sys.argv[1]), int(sys.argv[2]); "
    "print('accuracy=' + str(round(lr * 10, 6))); "
    "print('seconds=' + str(round(lr * 100 + layers, 6)))"
)
OBJECTIVES = [
    {"metricName": "accuracy", "type": "maximize"},
    {"metricName": "seconds", "type": "minimize"},
]


def _experiment(name: str, namespace: str) -> Obj:
    experiment = builders.experiment(
        name,
        namespace,
        objective_spec={"objectives": OBJECTIVES},  # the webhook fills in the first objective
        algorithm={
            "algorithmName": "nsga2",
            "algorithmSettings": [
                {"name": "population_size", "value": "3"},
                {"name": "seed", "value": "7"},
            ],
        },
        parameters=[
            {**builders.LR, "feasibleSpace": {"min": "0.01", "max": "0.05"}},
            {"name": "layers", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "4"}},
        ],
        trial_parameters=builders.references(learningRate="lr", numberLayers="layers"),
        trial_spec=builders.trial_job(
            python_code(
                SCRIPT, "${trialParameters.learningRate}", "${trialParameters.numberLayers}"
            )
        ),
        collector=None,
        resumePolicy="Never",
        parallelTrialCount=3,
        maxTrialCount=9,
        maxFailedTrialCount=2,
    )
    return experiment


def _beaten(point: tuple[float, float], other: tuple[float, float]) -> bool:
    return other[0] >= point[0] and other[1] <= point[1] and other != point


def test_a_two_objective_experiment_runs_and_its_front_matches_its_trials(
    kubetune: ClusterHandle, ns: str
) -> None:
    cluster, namespace, name = kubetune, ns, "pareto"
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(_experiment(name, namespace)))
    experiment = overlay.wait_succeeded(cluster, namespace, name)
    objective = experiment["spec"]["objective"]
    assert (objective["objectiveMetricName"], objective["type"]) == ("accuracy", "maximize")

    trials = [
        t
        for t in get_json(cluster, "trial", "-n", namespace)["items"]
        if t["metadata"]["name"].startswith(f"{name}-")
    ]
    assert len(trials) == 9
    results: dict[str, tuple[float, float]] = {}
    order: dict[str, tuple[str, str]] = {}
    for trial in trials:
        trial_name = trial["metadata"]["name"]
        metrics = {m["name"]: m for m in trial["status"]["observation"]["metrics"]}
        assert set(metrics) == {"accuracy", "seconds"}, metrics  # both collected
        results[trial_name] = (float(metrics["accuracy"]["max"]), float(metrics["seconds"]["min"]))
        order[trial_name] = (trial["metadata"]["creationTimestamp"], trial_name)
    front = [n for n, p in results.items() if not any(_beaten(p, o) for o in results.values())]
    front.sort(key=lambda n: (-results[n][0], results[n][1], order[n]))

    status = experiment["status"]
    assert [e["trialName"] for e in status["paretoFront"]] == front
    assert status["paretoFrontSize"] == len(front)
    # Katib's field keeps its meaning: the best trial by the first objective.
    optimal = status["currentOptimalTrial"]["bestTrialName"]
    assert results[optimal][0] == max(accuracy for accuracy, _ in results.values())


def _sdk_round_trip(manifests: list[Obj]) -> list[Obj]:
    """What Katib's SDK (its own venv, `katibsdk`) reads of each manifest and writes back."""
    out = subprocess.run(
        [katibsdk.sdk_python(), str(katibsdk.CLIENT.with_name("round_trip.py"))],
        input=json.dumps(manifests),
        capture_output=True,
        text=True,
        check=True,
    )
    written: list[Obj] = json.loads(out.stdout)
    return written


def test_katib_manifests_round_trip_unchanged_and_the_sdk_sees_the_first_objective() -> None:
    """Every example Experiment (Katib's own among them) is the same through kubetune's model
    and through Katib's SDK; a multi-objective one is, for the SDK, the same Experiment
    without the extension: a valid single-objective Experiment on its first objective."""
    katib = [doc for _, doc in examples("Experiment")]
    assert katib and not any("objectives" in d["spec"].get("objective", {}) for d in katib)
    assert [Experiment.model_validate(d).to_wire() for d in katib] == katib
    multi = _experiment("pareto", "ns")
    multi["spec"]["objective"] = {
        "type": "maximize",
        "objectiveMetricName": "accuracy",
        "objectives": OBJECTIVES,
    }
    *seen, seen_multi = _sdk_round_trip([*katib, multi])
    assert seen == katib
    expected = copy.deepcopy(multi)
    del expected["spec"]["objective"]["objectives"]
    assert seen_multi == expected
