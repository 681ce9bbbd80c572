"""Admission of multi-objective Experiments (`spec.objective.objectives`, kubetune's
extension): the rules with their messages, and the defaults taken from the first objective."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from webhook_cases import NS, StaticCluster, experiment

from kubetune import config as katib_config
from kubetune import multiobjective
from kubetune.api.experiment import Experiment
from kubetune_webhook import defaulting, validating

CONFIG = katib_config.default()
TWO = [
    {"metricName": "accuracy", "type": "maximize"},
    {"metricName": "seconds", "type": "minimize"},
]


def multi(objectives: Any = TWO, algorithm: str = "nsga2", **objective: Any) -> dict[str, Any]:
    """The valid webhook-case Experiment with several objectives (no goal)."""
    exp = experiment()
    spec = exp["spec"]
    spec["algorithm"] = {"algorithmName": algorithm}
    spec["objective"] = {
        "type": "maximize",
        "objectiveMetricName": "accuracy",
        "additionalMetricNames": ["loss"],
        "objectives": copy.deepcopy(objectives),
        **objective,
    }
    return exp


def problems(manifest: dict[str, Any], config: katib_config.KatibConfig = CONFIG) -> list[str]:
    return validating.validate(
        manifest, None, operation="CREATE", namespace=NS, config=config, cluster=StaticCluster()
    )


@pytest.mark.parametrize("algorithm", multiobjective.ALGORITHMS)
def test_allowed_with_every_algorithm_that_can(algorithm: str) -> None:
    manifest = multi(algorithm=algorithm)
    if algorithm == "grid":
        manifest["spec"]["parameters"][0]["feasibleSpace"]["step"] = "0.01"
    assert problems(manifest) == []


def test_a_katib_manifest_gets_no_new_problem() -> None:
    assert "objectives" not in experiment()["spec"]["objective"]
    assert problems(experiment()) == []


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (
            multi(objectives=TWO[:1]),
            "spec.objective.objectives: 1 objective(s); list two or more",
        ),
        (
            multi(objectives=[TWO[0], {"metricName": "accuracy", "type": "minimize"}]),
            "spec.objective.objectives[1].metricName: 'accuracy' is also "
            "spec.objective.objectives[0]; give each objective its own metric",
        ),
        (
            multi(objectives=[TWO[0], {"metricName": "", "type": "minimize"}]),
            "spec.objective.objectives[1].metricName: required",
        ),
        (
            multi(objectives=[TWO[0], {"metricName": "seconds", "type": "fastest"}]),
            "spec.objective.objectives[1].type: invalid type 'fastest'; use one of minimize, "
            "maximize",
        ),
        (
            multi(objectiveMetricName="loss", additionalMetricNames=[]),
            "spec.objective.objectiveMetricName: 'loss' differs from "
            "spec.objective.objectives[0].metricName 'accuracy'",
        ),
        (
            multi(type="minimize"),
            "spec.objective.type: 'minimize' differs from spec.objective.objectives[0].type "
            "'maximize'",
        ),
        (
            multi(goal=0.9),
            "spec.objective.goal: not defined with several objectives",
        ),
        (
            multi(additionalMetricNames=["seconds"]),
            "spec.objective.additionalMetricNames[0]: 'seconds' is already an objective "
            "(spec.objective.objectives[1])",
        ),
        (
            multi(algorithm="cmaes"),
            "spec.algorithm.algorithmName: algorithm cmaes optimises a single objective; with "
            "spec.objective.objectives use one of random, grid, sobol, tpe, multivariate-tpe, "
            "nsga2, nsga3",
        ),
        (
            multi(algorithm="bayesianoptimization"),
            "algorithm bayesianoptimization optimises a single objective",
        ),
        (
            {
                **multi(),
                "spec": {
                    **multi()["spec"],
                    "earlyStopping": {"algorithmName": "medianstop"},
                },
            },
            "spec.earlyStopping: not available with several objectives",
        ),
    ],
    ids=[
        "one-objective",
        "duplicate-metric",
        "empty-metric",
        "bad-type",
        "first-name-mismatch",
        "first-type-mismatch",
        "goal",
        "objective-also-additional",
        "single-objective-algorithm",
        "bayesian",
        "early-stopping",
    ],
)
def test_refused_with_the_field_and_the_fix(manifest: dict[str, Any], expected: str) -> None:
    found = problems(manifest)
    assert any(expected in p for p in found), found


def test_a_katib_image_is_refused_even_under_a_capable_name() -> None:
    bridged = katib_config.default()
    for entry in bridged.runtime.suggestions:
        if entry.algorithm_name == "random":
            entry.protocol = katib_config.KATIB_GRPC
    assert bridged.suggestion("random").katib_grpc()
    found = problems(multi(algorithm="random"), bridged)
    assert any("algorithm random runs a Katib image" in p for p in found), found


def test_defaults_come_from_the_first_objective_and_each_type_sets_its_strategy() -> None:
    manifest = multi()
    objective = manifest["spec"]["objective"]
    del objective["objectiveMetricName"], objective["type"]
    defaulted = defaulting.default(Experiment.model_validate(manifest)).to_wire()
    out = defaulted["spec"]["objective"]
    assert out["objectiveMetricName"] == "accuracy"
    assert out["type"] == "maximize"
    assert {s["name"]: s["value"] for s in out["metricStrategies"]} == {
        "accuracy": "max",
        "seconds": "min",
        "loss": "max",
    }
    assert problems(defaulted) == []
