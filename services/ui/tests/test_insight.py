"""The study charts' data and the importance, from raw objects (no server, no cluster)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubetune_testkit import builders
from kubetune_ui import insight
from kubetune_ui.importance import ImportanceCache, importance

PARAMETERS = [
    {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}},
    {"name": "n", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "50"}},
    {"name": "c", "parameterType": "categorical", "feasibleSpace": {"list": ["a", "b", "c"]}},
]


def state(kind: str) -> list[dict[str, str]]:
    return [{"type": kind, "status": "True"}]


def trial(i: int, x: float, n: int, c: str, value: float | None, kind: str = "Succeeded") -> Any:
    body = builders.trial(f"t{i:05d}", assignments={"x": str(x), "n": str(n), "c": c})
    body["metadata"]["creationTimestamp"] = (
        f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
    )
    body["status"] = {"conditions": state(kind)}
    if value is not None:
        body["status"]["observation"] = builders.observation(value)
    return body


def synthetic(count: int, seed: int = 7) -> tuple[Any, list[Any]]:
    """x alone decides the accuracy; n and c are noise."""
    rng = random.Random(seed)
    experiment = builders.experiment("exp", "ns", parameters=PARAMETERS)
    trials = [
        trial(i, x, rng.randint(1, 50), rng.choice("abc"), x * x)
        for i, x in enumerate(rng.random() for _ in range(count))
    ]
    return experiment, trials


def test_importance_ranks_the_one_parameter_that_decides_the_objective_first() -> None:
    experiment, trials = synthetic(300)
    result = importance(insight.study_of(experiment, trials), limit=2000)
    names = [r["name"] for r in result["importances"]]
    assert names[0] == "x", result
    assert result["importances"][0]["importance"] > 0.5
    assert (result["used"], result["of"]) == (300, 300)


def test_importance_uses_at_most_the_limit_and_says_so() -> None:
    experiment, trials = synthetic(500)
    result = importance(insight.study_of(experiment, trials), limit=100)
    assert (result["used"], result["of"], result["limit"]) == (100, 500, 100)
    assert result["importances"][0]["name"] == "x"


def test_importance_without_enough_trials_says_why() -> None:
    experiment, trials = synthetic(1)
    result = importance(insight.study_of(experiment, trials), limit=2000)
    assert result["importances"] == [] and "at least 2" in result["message"]


def test_the_importance_is_recomputed_only_when_a_trial_finishes() -> None:
    experiment, trials = synthetic(50)
    cache = ImportanceCache()
    running = trial(999, 0.5, 3, "a", None, kind="Running")
    cache.get(("ns", "exp"), insight.study_of(experiment, [*trials, running]))
    # The running trial reports a metric: not finished, nothing to recompute.
    running["status"]["observation"] = builders.observation(0.2)
    cache.get(("ns", "exp"), insight.study_of(experiment, [*trials, running]))
    assert cache.computed == 1
    running["status"]["conditions"] = state("Succeeded")
    cache.get(("ns", "exp"), insight.study_of(experiment, [*trials, running]))
    assert cache.computed == 2


def test_the_importance_cache_keeps_a_bounded_number_of_experiments() -> None:
    experiment, trials = synthetic(10)
    cache = ImportanceCache(entries=2)
    study = insight.study_of(experiment, trials)
    for name in ("a", "b", "c", "a"):
        cache.get(("ns", name), study)
    assert cache.computed == 4  # "a" was dropped when "c" came in


def test_edf_gives_the_share_of_values_at_or_below_each_distinct_value() -> None:
    assert insight.edf([0.3, 0.1, 0.2, 0.2], limit=10) == {
        "of": 4,
        "x": [0.1, 0.2, 0.3],
        "y": [0.25, 0.75, 1.0],
    }


def test_edf_past_its_limit_keeps_exact_shares_at_evenly_spaced_values() -> None:
    result = insight.edf(range(10_000), limit=1000)
    assert len(result["x"]) == 1000 and result["of"] == 10_000
    assert result["x"][0] == 0 and result["x"][-1] == 9999 and result["y"][-1] == 1.0
    assert all(y == (x + 1) / 10_000 for x, y in zip(result["x"], result["y"], strict=True))


def test_every_chart_is_bounded_at_ten_thousand_trials() -> None:
    experiment, trials = synthetic(10_000)
    for t in trials[:400]:
        t["status"]["metricHistory"] = {
            "metrics": [{"name": "accuracy", "steps": list(range(500)), "values": ["0.5"] * 500}]
        }
    limits = insight.Limits()
    study = insight.study_of(experiment, trials)
    data = insight.insight(experiment, study, limits)
    assert len(data["sample"]["trials"]) == limits.points and data["sample"]["of"] == 10_000
    assert len(data["edf"]["x"]) <= limits.edf_points
    curves = data["intermediate"]["trials"]
    assert len(curves) == limits.curves and data["intermediate"]["of"] == 400
    assert all(len(c["steps"]) == limits.curve_points for c in curves)
    grid = insight.contour(study, "x", "n", limits)["grid"]
    assert len(grid["x"]) <= limits.bins and len(grid["y"]) <= limits.bins


def test_the_slice_sample_carries_each_parameter_as_its_type() -> None:
    experiment = builders.experiment("exp", "ns", parameters=PARAMETERS)
    trials = [trial(1, 0.25, 7, "b", 0.5), trial(2, 0.75, 9, "a", 0.9)]
    trials.append(trial(3, 0.5, 8, "c", None, kind="Failed"))
    sample = insight.insight(experiment, insight.study_of(experiment, trials), insight.Limits())
    assert sample["sample"]["params"] == {"x": [0.25, 0.75], "n": [7.0, 9.0], "c": ["b", "a"]}
    assert sample["sample"]["index"] == [1, 2] and sample["sample"]["values"] == [0.5, 0.9]


def test_contour_cells_hold_the_best_value_and_bad_names_are_refused() -> None:
    experiment = builders.experiment("exp", "ns", parameters=PARAMETERS)
    trials = [trial(1, 0.25, 7, "b", 0.5), trial(2, 0.25, 7, "b", 0.8), trial(3, 0.5, 9, "a", 0.1)]
    study = insight.study_of(experiment, trials)
    grid = insight.contour(study, "x", "c", insight.Limits())["grid"]
    assert grid == {"x": [0.25, 0.5], "y": ["a", "b"], "z": [[None, 0.1], [0.8, None]]}
    with pytest.raises(insight.BadQuery, match=r"y: 'nope' is not a parameter .*\(its: x, n, c\)"):
        insight.contour(study, "x", "nope", insight.Limits())
    with pytest.raises(insight.BadQuery, match="two different parameters"):
        insight.contour(study, "x", "x", insight.Limits())


def test_intermediate_values_mark_early_stopped_trials() -> None:
    experiment = builders.experiment("exp", "ns", parameters=PARAMETERS)
    history = {"metrics": [{"name": "accuracy", "steps": [1, 2, 3], "values": ["0.1", "0.2", "x"]}]}
    stopped = trial(1, 0.1, 1, "a", 0.2, kind="EarlyStopped")
    done = trial(2, 0.2, 1, "a", 0.4)
    for t in (stopped, done):
        t["status"]["metricHistory"] = history
    data = insight.intermediate(insight.study_of(experiment, [done, stopped]), insight.Limits())
    assert data["earlyStopped"] == 1
    assert [(t["name"], t["earlyStopped"]) for t in data["trials"]] == [
        ("t00001", True),
        ("t00002", False),
    ]
    assert data["trials"][0]["steps"] == [1, 2] and data["trials"][0]["values"] == [0.1, 0.2]


def test_the_pareto_front_is_read_from_the_raw_experiment() -> None:
    experiment = builders.experiment("exp", "ns", parameters=PARAMETERS)
    experiment["spec"]["objective"]["objectives"] = [
        {"metricName": "accuracy", "type": "maximize"},
        {"metricName": "latency", "type": "minimize"},
    ]

    def observed(accuracy: float, latency: float) -> Any:
        return {
            "metrics": [
                *builders.observation(accuracy)["metrics"],
                *builders.observation(latency, "latency")["metrics"],
            ]
        }

    trials = [trial(i, 0.1, 1, "a", None) for i in range(3)]
    for t, (a, lat) in zip(trials, [(0.9, 5.0), (0.5, 1.0), (0.4, 4.0)], strict=True):
        t["status"]["observation"] = observed(a, lat)
    experiment["status"] = {
        "paretoFront": [
            {"trialName": "t00000", "observation": observed(0.9, 5.0)},
            {"trialName": "t00001", "observation": observed(0.5, 1.0)},
        ],
        "paretoFrontSize": 2,
    }
    study = insight.study_of(experiment, trials)
    data = insight.pareto(experiment, study, insight.Limits())
    assert data["objectives"] == [
        {"metric": "accuracy", "type": "maximize"},
        {"metric": "latency", "type": "minimize"},
    ]
    assert data["front"] == [
        {"trial": "t00000", "values": [0.9, 5.0]},
        {"trial": "t00001", "values": [0.5, 1.0]},
    ]
    assert data["trials"] == [{"trial": "t00002", "values": [0.4, 4.0]}]
    assert data["frontSize"] == 2


def test_a_single_objective_experiment_has_no_pareto_front() -> None:
    experiment, trials = synthetic(3)
    data = insight.pareto(experiment, insight.study_of(experiment, trials), insight.Limits())
    assert data == {"objectives": []}


def test_evenly_keeps_the_first_and_the_last() -> None:
    assert insight.evenly(list(range(10)), 4) == [0, 3, 6, 9]
    assert insight.evenly([1, 2], 5) == [1, 2]
