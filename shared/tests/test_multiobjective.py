"""The multi-objective rules every reader shares: targets, directions, strategies, values."""

from __future__ import annotations

from kubetune import multiobjective, observations
from kubetune.api.common import (
    Metric,
    MetricObjective,
    MetricStrategyType,
    ObjectiveSpec,
    ObjectiveType,
    Observation,
)

TWO = ObjectiveSpec(
    type=ObjectiveType.MAXIMIZE,
    objective_metric_name="accuracy",
    additional_metric_names=["lr"],
    objectives=[
        MetricObjective(metric_name="accuracy", type=ObjectiveType.MAXIMIZE),
        MetricObjective(metric_name="seconds", type=ObjectiveType.MINIMIZE),
    ],
)
ONE = ObjectiveSpec(type=ObjectiveType.MINIMIZE, objective_metric_name="loss")


def test_targets_and_directions() -> None:
    assert multiobjective.is_multi(TWO)
    assert not multiobjective.is_multi(ONE)
    assert not multiobjective.is_multi(None)
    assert multiobjective.targets(TWO) == [
        ("accuracy", ObjectiveType.MAXIMIZE),
        ("seconds", ObjectiveType.MINIMIZE),
    ]
    assert multiobjective.targets(ONE) == [("loss", ObjectiveType.MINIMIZE)]
    assert multiobjective.maximized(TWO) == [True, False]
    assert multiobjective.minimised([0.9, 12.0], [True, False]) == (-0.9, 12.0)


def test_each_objective_is_collected_by_its_own_type() -> None:
    assert observations.strategies(TWO) == {
        "accuracy": MetricStrategyType.MAX,
        "lr": MetricStrategyType.MAX,
        "seconds": MetricStrategyType.MIN,
    }


def test_objective_values_by_strategy_none_when_missing() -> None:
    observation = Observation(
        metrics=[
            Metric(name="accuracy", min="0.1", max="0.9", latest="0.8"),
            Metric(name="seconds", min="10", max="30", latest="30"),
        ]
    )
    assert observations.objective_values(TWO, observation) == [0.9, 10.0]
    partial = Observation(metrics=[Metric(name="accuracy", min="0.1", max="0.9", latest="0.8")])
    assert observations.objective_values(TWO, partial) == [0.9, None]
    assert observations.objective_values(ONE, None) == [None]


def test_refusal_names_the_algorithms_that_can() -> None:
    assert multiobjective.refusal("nsga2") is None
    message = multiobjective.refusal("cmaes")
    assert message is not None and "cmaes" in message
    for name in multiobjective.ALGORITHMS:
        assert name in message
