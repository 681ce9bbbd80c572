"""Counting by state and the optimal trial for each objective type and metric strategy."""

from __future__ import annotations

import pytest

from kubetune import conditions
from kubetune.api.common import ObjectiveSpec
from kubetune.conditions import TrialState
from kubetune.observations import MAX_METRICS, MAX_NAME_CHARS
from kubetune_experiment_controller.summaries import (
    cached,
    count,
    in_creation_order,
    optimal,
    summarise,
    summary_of,
)
from tests.helpers import trial


@pytest.mark.parametrize(
    ("pairs", "state"),
    [
        ([], TrialState.PENDING),
        ([("Created", "True")], TrialState.PENDING),
        ([("Created", "True"), ("Running", "True")], TrialState.RUNNING),
        ([("Running", "True"), ("Succeeded", "True")], TrialState.SUCCEEDED),
        ([("Succeeded", "True"), ("Failed", "True")], TrialState.FAILED),
        ([("Failed", "True"), ("Killed", "True")], TrialState.KILLED),
        ([("EarlyStopped", "True"), ("MetricsUnavailable", "True")], TrialState.EARLY_STOPPED),
        ([("Running", "True"), ("MetricsUnavailable", "True")], TrialState.RUNNING),
        ([("Running", "False"), ("MetricsUnavailable", "True")], TrialState.METRICS_UNAVAILABLE),
    ],
)
def test_a_summary_counts_a_trial_in_the_state_every_reader_uses(
    pairs: list[tuple[str, str]], state: TrialState
) -> None:
    """The cached summary keeps `conditions.trial_state` (the CLI and the algorithm use it too)."""
    raw = [{"type": t, "status": s} for t, s in pairs]
    obj = {"metadata": {"name": "t", "namespace": "ns"}, "status": {"conditions": raw}}
    assert summary_of(cached(obj)).state is state
    assert conditions.trial_state(raw) is state


def test_count_buckets_and_orders_names_oldest_first() -> None:
    trials = [
        trial(3, "Succeeded"),
        trial(1, "Succeeded"),
        trial(2, "Failed"),
        trial(4, "Running"),
        trial(5),
        trial(6, "MetricsUnavailable"),
    ]
    counts = count(in_creation_order(trials))
    assert counts.total == 6
    assert counts[TrialState.SUCCEEDED] == 2
    assert counts.names[TrialState.SUCCEEDED] == [trials[1].name, trials[0].name]
    assert counts.active == 2
    assert counts.finished == 4


def _objective(type_: str, strategy: str | None = None) -> ObjectiveSpec:
    spec: dict[str, object] = {"type": type_, "objectiveMetricName": "accuracy"}
    if strategy:
        spec["metricStrategies"] = [{"name": "accuracy", "value": strategy}]
    return ObjectiveSpec.model_validate(spec)


TRIALS = [
    trial(1, "Succeeded", accuracy={"min": "0.2", "max": "0.9", "latest": "0.5"}),
    trial(2, "Succeeded", accuracy={"min": "0.1", "max": "0.7", "latest": "0.6"}),
    trial(3, "Running", accuracy={"min": "0.3", "max": "0.95", "latest": "0.3"}),
    trial(4, "Succeeded", accuracy={"min": "unavailable", "max": "unavailable", "latest": "0.05"}),
    trial(5, "Failed"),
]


@pytest.mark.parametrize(
    ("type_", "strategy", "best", "value"),
    [
        ("maximize", None, 1, 0.9),  # default strategy for maximize: max; 3 is running
        ("maximize", "max", 1, 0.9),
        ("maximize", "latest", 2, 0.6),
        ("maximize", "min", 1, 0.2),
        ("minimize", None, 4, 0.05),  # min unavailable -> falls back to latest
        ("minimize", "min", 4, 0.05),
        ("minimize", "latest", 4, 0.05),
        ("minimize", "max", 4, 0.05),
    ],
)
def test_optimal_by_type_and_strategy(
    type_: str, strategy: str | None, best: int, value: float
) -> None:
    found = optimal(_objective(type_, strategy), TRIALS)
    assert found is not None
    assert found.name == TRIALS[best - 1].name
    assert found.value == value
    assert [a.value for a in found.assignments] == ["0.05"]


def test_optimal_ties_keep_the_earliest_and_skips_text() -> None:
    trials = [
        trial(2, "Succeeded", accuracy={"min": "0.5", "max": "0.5", "latest": "0.5"}),
        trial(1, "Succeeded", accuracy={"min": "0.5", "max": "0.5", "latest": "0.5"}),
        trial(3, "Succeeded", accuracy={"min": "nan", "max": "high", "latest": "high"}),
    ]
    found = optimal(_objective("maximize"), in_creation_order(trials))
    assert found is not None and found.name == trials[1].name


def test_values_and_names_over_the_limits_are_unavailable() -> None:
    """Written around the writers' bounds (by hand, or before them): a 400 KB number is no
    value and is not kept, so it cannot become the optimum or fill the cache (issue 16)."""
    huge = "0." + "9" * 400_000
    big = trial(2, "Succeeded", accuracy={"min": huge, "max": huge, "latest": huge})
    assert big.metrics == (("accuracy", "unavailable", "unavailable", "unavailable"),)
    fine = trial(1, "Succeeded", accuracy={"min": "0.5", "max": "0.5", "latest": "0.5"})
    found = optimal(_objective("maximize"), in_creation_order([fine, big]))
    assert found is not None and found.name == fine.name
    many = summarise(
        {
            "metadata": {"name": "t"},
            "status": {
                "observation": {
                    "metrics": [
                        {"name": "n" * (MAX_NAME_CHARS + 1), "latest": "1"},
                        *({"name": f"m{i}", "latest": "1"} for i in range(MAX_METRICS * 2)),
                    ]
                }
            },
        }
    )
    assert many.metrics is not None and len(many.metrics) == MAX_METRICS - 1
    assert all(len(m[0]) <= MAX_NAME_CHARS for m in many.metrics)


def test_optimal_none_without_values() -> None:
    assert optimal(_objective("minimize"), [trial(1, "Failed"), trial(2)]) is None


def test_cached_keeps_only_what_counting_needs() -> None:
    full = {
        "metadata": {
            "name": "t",
            "namespace": "ns",
            "resourceVersion": "7",
            "labels": {"katib.kubeflow.org/experiment": "e", "other": "x"},
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1beta1",
                    "kind": "Experiment",
                    "name": "e",
                    "uid": "u",
                    "controller": True,
                }
            ],
            "managedFields": [{"huge": "x" * 1000}],
        },
        "spec": {
            "runSpec": {"big": "y" * 5000},
            "parameterAssignments": [{"name": "a", "value": "1"}],
        },
        "status": {
            "conditions": [{"type": "Created", "status": "True", "message": "m" * 100}],
            "observation": {"metrics": [{"name": "accuracy", "latest": "1"}]},
        },
    }
    slimmed = cached(full)
    assert len(str(slimmed)) < 600
    assert slimmed["metadata"]["labels"] == {"katib.kubeflow.org/experiment": "e"}
    assert slimmed["metadata"]["ownerReferences"] == [
        {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "name": "e"}
    ]
    summary = summary_of(slimmed)
    assert summary.assignments == (("a", "1"),)
    assert summary.metrics == (("accuracy", None, None, "1"),)
    assert summary.state is TrialState.PENDING


def test_cached_carries_its_summary() -> None:
    obj = {
        "metadata": {"name": "t", "namespace": "ns"},
        "status": {"conditions": [{"type": "Running", "status": "True"}]},
    }
    assert summary_of(cached(obj)).state is TrialState.RUNNING
    assert summary_of(obj).state is TrialState.RUNNING
