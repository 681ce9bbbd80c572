"""Early-stopping rules from metric histories: medianstop (the median, not upstream's mean) and
Optuna's pruners."""

from __future__ import annotations

import statistics
from typing import Any

import optuna
import pytest

from kubetune.api.common import (
    ComparisonType,
    EarlyStoppingSetting,
    EarlyStoppingSpec,
    ObjectiveType,
)
from kubetune_suggestion_algorithm import stoppingrules


def _trial(values: list[float | str], state: str = "Succeeded", metric: str = "loss") -> Any:
    return {
        "metadata": {"name": "t"},
        "status": {
            "conditions": [
                {"type": "Created", "status": "True"},
                {"type": state, "status": "True"},
            ],
            "metricHistory": {
                "metrics": [
                    {
                        "name": "other",
                        "reports": 1,
                        "steps": [0],
                        "values": ["99"],
                        "times": ["2026-01-01T00:00:00Z"],
                    },
                    {
                        "name": metric,
                        "reports": len(values),
                        "steps": list(range(len(values))),
                        "values": [str(v) for v in values],
                        "times": ["2026-01-01T00:00:00Z"] * len(values),
                    },
                ]
            },
        },
    }


def _spec(name: str, **settings: object) -> EarlyStoppingSpec:
    return EarlyStoppingSpec(
        algorithm_name=name,
        algorithm_settings=[
            EarlyStoppingSetting(name=k, value=str(v)) for k, v in settings.items()
        ],
    )


def test_medianstop_takes_the_median_of_the_per_trial_averages_not_their_mean() -> None:
    trials = [_trial([1, 1, 9]), _trial([2, 2, 9]), _trial([10, 10, 9])]
    (rule,) = stoppingrules.compute(
        _spec("medianstop", start_step=2), trials, "loss", ObjectiveType.MINIMIZE
    )
    assert float(rule.value) == 2.0  # upstream's mean would be 13/3
    assert rule.comparison is ComparisonType.GREATER and rule.start_step == 2
    assert rule.name == "loss"


def test_medianstop_defaults_and_maximize_compare_less() -> None:
    trials = [_trial([0.1, 0.2, 0.3, 0.4, 0.9]) for _ in range(3)]
    (rule,) = stoppingrules.compute(_spec("medianstop"), trials, "loss", ObjectiveType.MAXIMIZE)
    assert float(rule.value) == pytest.approx(0.25)  # first start_step=4 values only
    assert rule.comparison is ComparisonType.LESS and rule.start_step == 4


def test_medianstop_waits_for_min_trials_required_succeeded_trials() -> None:
    trials = [
        _trial([1, 2]),
        _trial([1, 2]),
        _trial([5, 5], state="Failed"),
        _trial([5, 5], state="Running"),
        _trial([5, 5], state="EarlyStopped"),
        _trial(["unavailable"]),
    ]
    spec = _spec("medianstop", min_trials_required=3)
    assert stoppingrules.compute(spec, trials, "loss", ObjectiveType.MINIMIZE) == []
    trials.append(_trial([3, 3]))
    (rule,) = stoppingrules.compute(spec, trials, "loss", ObjectiveType.MINIMIZE)
    assert float(rule.value) == 1.5


def test_series_skips_values_that_are_not_numbers_and_other_metrics() -> None:
    trial = _trial(["1", "nan", "x", "3", "1_0", "\uff11", " 2"])  # float() reads the last 3
    assert stoppingrules.objective_series(trial, "loss") == {0: 1.0, 3: 3.0}
    assert stoppingrules.objective_series({"status": {}}, "loss") == {}


def test_invalid_settings_raise_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="start_step"):
        stoppingrules.compute(_spec("medianstop", start_step=0), [], "loss", ObjectiveType.MINIMIZE)


def _prunes(
    pruner: optuna.pruners.BasePruner,
    histories: list[list[float]],
    step: int,
    value: float,
    direction: str,
) -> bool:
    study = optuna.create_study(direction=direction, pruner=pruner)
    for h in histories:
        study.add_trial(
            optuna.trial.create_trial(
                value=h[-1], intermediate_values=dict(enumerate(h)), params={}, distributions={}
            )
        )
    trial = study.ask()
    trial.report(value, step)
    return trial.should_prune()


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_optuna_median_rule_is_exactly_where_the_pruner_prunes(direction: str) -> None:
    histories = [[5.0, 4.0, 3.0], [6.0, 2.0, 1.0], [7.0, 7.5, 7.0], [3.0, 3.5, 0.5]]
    trials = [_trial(h) for h in histories]
    otype = ObjectiveType(direction)
    (rule,) = stoppingrules.compute(
        _spec("optuna-median", n_startup_trials=4, n_warmup_steps=1), trials, "loss", otype
    )
    threshold = float(rule.value)
    assert threshold == statistics.median([4.0, 2.0, 7.5, 3.5])
    assert rule.start_step == 2
    assert rule.comparison is (
        ComparisonType.GREATER if direction == "minimize" else ComparisonType.LESS
    )
    pruner = optuna.pruners.MedianPruner(n_startup_trials=4, n_warmup_steps=1)
    worse = threshold + 0.01 if direction == "minimize" else threshold - 0.01
    assert _prunes(pruner, histories, 1, worse, direction)
    assert not _prunes(pruner, histories, 1, threshold, direction)


def test_optuna_percentile_and_startup_trials() -> None:
    histories = [[float(i)] for i in range(1, 11)]
    trials = [_trial(h) for h in histories]
    spec = _spec("optuna-percentile", percentile=20, n_startup_trials=10)
    (rule,) = stoppingrules.compute(spec, trials, "loss", ObjectiveType.MINIMIZE)
    pruner = optuna.pruners.PercentilePruner(20, n_startup_trials=10)
    assert _prunes(pruner, histories, 0, float(rule.value) + 1e-9, "minimize")
    assert not _prunes(pruner, histories, 0, float(rule.value), "minimize")
    fewer = _spec("optuna-percentile", percentile=20, n_startup_trials=11)
    assert stoppingrules.compute(fewer, trials, "loss", ObjectiveType.MINIMIZE) == []


def test_optuna_successive_halving_first_rung_is_where_the_pruner_prunes() -> None:
    """Rung 0 at report 1 * 2**1 = 2: of 6 succeeded trials' values there plus the new one,
    only the best half (by reduction_factor 2) is promoted."""
    histories = [[9.0, 9.0, v, 0.1] for v in (0.5, 0.7, 0.2, 0.9, 0.4, 0.6)]
    trials = [_trial(h) for h in histories]
    spec = _spec(
        "optuna-successive-halving", min_resource=1, reduction_factor=2, min_early_stopping_rate=1
    )
    (rule,) = stoppingrules.compute(spec, trials, "loss", ObjectiveType.MINIMIZE)
    assert rule.start_step == 3 and rule.comparison is ComparisonType.GREATER
    threshold = float(rule.value)
    assert threshold == 0.5  # 7 competitors, the best 7 // 2 = 3 promoted: 0.2, 0.4, 0.5

    def prunes(value: float) -> bool:
        pruner = optuna.pruners.SuccessiveHalvingPruner(
            min_resource=1, reduction_factor=2, min_early_stopping_rate=1
        )
        study = optuna.create_study(direction="minimize", pruner=pruner)
        for h in histories:
            t = study.ask()
            t.report(h[2], 2)
            t.should_prune()
            study.tell(t, h[-1])
        probe = study.ask()
        probe.report(value, 2)
        return probe.should_prune()

    assert not prunes(threshold) and prunes(threshold + 1e-9)
    assert stoppingrules.compute(spec, [], "loss", ObjectiveType.MINIMIZE) == []
    (alone,) = stoppingrules.compute(spec, trials[:1], "loss", ObjectiveType.MINIMIZE)
    assert float(alone.value) == 0.5  # Optuna promotes the better of two already
