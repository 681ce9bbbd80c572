"""The shapes the pages get, from raw objects (no server, no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune_testkit import builders
from kubetune_ui import views
from kubetune_ui.app import _parse_experiment
from kubetune_ui.writing import Refused


def trial(name: str, accuracy: str | None, created: str, **status: Any) -> dict[str, Any]:
    body = builders.trial(name, assignments={"lr": "0.1"})
    body["metadata"]["creationTimestamp"] = created
    if accuracy is not None:
        status["observation"] = builders.observation(accuracy)
    body["status"] = status
    return body


def test_experiment_page_orders_trials_and_keeps_the_best_so_far() -> None:
    experiment = builders.experiment("exp", "ns")
    trials = [
        trial("c", "0.8", "2026-01-01T00:00:03Z"),
        trial("a", "0.5", "2026-01-01T00:00:01Z"),
        trial("b", None, "2026-01-01T00:00:02Z"),
        trial("d", "0.9", "2026-01-01T00:00:04Z"),
    ]
    page = views.experiment_page(experiment, trials)
    assert [r["name"] for r in page["trials"]] == ["a", "b", "c", "d"]
    assert page["bestSoFar"] == [0.5, 0.5, 0.8, 0.9]
    assert page["best"] == {"trial": "d", "parameters": {"lr": "0.1"}, "objective": 0.9}
    assert page["parameters"] == ["lr"] and page["metrics"] == ["accuracy"]


def test_best_so_far_minimizing_skips_missing_values() -> None:
    objective = views.objective_spec(
        {"spec": {"objective": builders.objective("loss", "minimize")}}
    )
    assert views.best_so_far(objective, [None, 3.0, 4.0, None, 1.0]) == [None, 3.0, 3.0, 3.0, 1.0]


def test_the_experiments_own_optimum_wins_over_the_trials() -> None:
    experiment = builders.experiment("exp", "ns")
    experiment["status"] = {
        "currentOptimalTrial": {
            "bestTrialName": "old",
            "parameterAssignments": [{"name": "lr", "value": "0.02"}],
            "observation": builders.observation("0.95"),
        },
        "trials": 7,
        "trialsSucceeded": 5,
        "conditions": [
            {"type": "Created", "status": "True"},
            {"type": "Running", "status": "False"},
            {"type": "Succeeded", "status": "True"},
        ],
    }
    page = views.experiment_page(experiment, [trial("a", "0.99", "2026-01-01T00:00:01Z")])
    assert page["best"] == {"trial": "old", "parameters": {"lr": "0.02"}, "objective": 0.95}
    summary = page["experiment"]
    assert summary["state"] == "Succeeded"
    assert summary["counts"]["trials"] == 7 and summary["counts"]["succeeded"] == 5
    assert summary["bestObjective"] == 0.95


def test_trial_state_is_the_experiments_rule_not_the_last_condition() -> None:
    conds = [
        {"type": "EarlyStopped", "status": "True"},
        {"type": "MetricsUnavailable", "status": "True"},
    ]
    row = views.trial_row(trial("t", None, "", conditions=conds), None)
    assert row["state"] == "EarlyStopped"


def test_metric_history_curves_when_recorded() -> None:
    status = {
        "metricHistory": {
            "metrics": [
                {
                    "name": "loss",
                    "reports": 300,
                    "steps": [0, 1, 128],
                    "values": ["0.9", "nan", "0.2"],
                    "times": ["t0", "t1", "t2"],
                }
            ]
        },
        "observation": {"metrics": [{"name": "loss", "min": "0.2", "max": "0.9", "latest": "0.2"}]},
    }
    history = views.metric_history(status)
    assert history["curves"] == {
        "loss": {"steps": [0, 1, 128], "values": [0.9, None, 0.2], "times": ["t0", "t1", "t2"],
                 "reports": 300}
    }  # fmt: skip
    assert history["summary"]["loss"] == {"min": "0.2", "max": "0.9", "latest": "0.2"}


def test_without_history_only_the_summary() -> None:
    history = views.metric_history({"observation": builders.observation("0.7")})
    assert history["curves"] == {}
    assert history["summary"]["accuracy"]["latest"] == "0.7"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a: [", "does not parse"),
        ("- 1\n- 2", "paste one Experiment"),
        ("kind: Trial\nmetadata: {name: x}", "kind: 'Trial' is not Experiment"),
        ("kind: Experiment", "metadata: missing"),
    ],
)
def test_pasted_yaml_errors_name_the_problem(text: str, says: str) -> None:
    with pytest.raises(Refused, match=says) as caught:
        _parse_experiment(text)
    assert caught.value.status == 400


@pytest.mark.parametrize(
    "metric",
    [
        {"name": "loss", "min": "0.2", "max": "0.9", "latest": "0.5"},
        {"name": "loss", "min": "unavailable", "max": "unavailable", "latest": "0.4"},
        {"name": "loss", "min": "nan", "max": "nan", "latest": "nan"},
        {"name": "loss", "min": "", "latest": "unavailable"},
        {"name": "other", "min": "0.1", "latest": "0.1"},
    ],
)
@pytest.mark.parametrize(
    "objective",
    [
        builders.objective("loss", "minimize"),
        builders.objective("loss", "maximize", strategies=False),
        {**builders.objective("loss", "minimize"), "metricStrategies": [
            {"name": "loss", "value": "latest"}]},
    ],
)  # fmt: skip
def test_the_fast_ranking_is_the_controllers_rule(
    metric: dict[str, str], objective: dict[str, Any]
) -> None:
    spec = views.objective_spec({"spec": {"objective": objective}})
    observation = {"metrics": [metric]}
    assert views.Ranker(spec)(observation) == views.objective_of(spec, observation)


def test_an_experiment_with_several_objectives_still_draws() -> None:
    """`spec.objective.objectives` (the multi-objective extension) is not a field of the
    single-objective model: the page reads the first objective and ignores the list."""
    experiment = builders.experiment("exp", "ns")
    experiment["spec"]["objective"]["objectives"] = [
        {"metricName": "accuracy", "type": "maximize"},
        {"metricName": "latency", "type": "minimize"},
    ]
    page = views.experiment_page(experiment, [trial("a", "0.5", "2026-01-01T00:00:01Z")])
    assert page["experiment"]["objectiveMetric"] == "accuracy"
    assert page["trials"][0]["objective"] == 0.5


def test_warm_start_is_shown_apart_from_the_trial_counts() -> None:
    """Known results a warm start imported are not Trials: the summary carries them apart, and
    the trial counts are the Experiment's own."""
    experiment = builders.experiment("exp", "ns")
    experiment["status"] = {
        "trials": 2,
        "trialsSucceeded": 2,
        "warmStart": {
            "imported": 3,
            "skipped": 1,
            "sources": [
                {"kind": "Experiment", "name": "old", "imported": 2, "skipped": 1},
                {"kind": "ConfigMap", "name": "x", "imported": 1},
                {"kind": "ConfigMap", "name": "gone", "message": "not found"},
            ],
        },
    }
    summary = views.experiment_page(experiment, [])["experiment"]
    assert summary["warmStart"] == {
        "imported": 3,
        "skipped": 1,
        "sources": [
            {"kind": "Experiment", "name": "old", "imported": 2, "skipped": 1, "message": ""},
            {"kind": "ConfigMap", "name": "x", "imported": 1, "skipped": 0, "message": ""},
            {"kind": "ConfigMap", "name": "gone", "imported": 0, "skipped": 0,
             "message": "not found"},
        ],
    }  # fmt: skip
    assert summary["counts"]["trials"] == 2 and summary["counts"]["succeeded"] == 2
    assert views.experiment_summary(builders.experiment("cold", "ns"))["warmStart"] is None
