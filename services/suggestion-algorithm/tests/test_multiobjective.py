"""Multi-objective Experiments in the algorithm: one study direction per objective, every
objective's value told, and the algorithms that can search them (`kubetune.multiobjective`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from kubetune import algorithmsettings, multiobjective
from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import Experiment, ParameterSpec
from kubetune.api.suggestion import TrialAssignment
from kubetune.api.trial import Trial
from kubetune_suggestion_algorithm import algorithms, indexed, studying, syncing
from kubetune_suggestion_algorithm.outcomes import Outcome

OBJECTIVE = {
    "type": "maximize",
    "objectiveMetricName": "accuracy",
    "objectives": [
        {"metricName": "accuracy", "type": "maximize"},
        {"metricName": "seconds", "type": "minimize"},
    ],
}
EXPERIMENT = Experiment.model_validate(
    {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": "e"},
        "spec": {"objective": OBJECTIVE},
    }
)
PARAMETERS = [
    ParameterSpec.model_validate(
        {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}}
    ),
    ParameterSpec.model_validate(
        {"name": "n", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "8"}}
    ),
]


def _trial(metrics: dict[str, str], state: str = "Succeeded") -> Trial:
    return Trial.model_validate(
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Trial",
            "metadata": {"name": "t"},
            "spec": {"objective": OBJECTIVE},
            "status": {
                "conditions": [{"type": state, "status": "True"}],
                "observation": {
                    "metrics": [
                        {"name": k, "min": v, "max": v, "latest": v} for k, v in metrics.items()
                    ]
                },
            },
        }
    )


def test_a_trial_tells_every_objective_or_fails() -> None:
    both = syncing.outcome(EXPERIMENT, _trial({"accuracy": "0.9", "seconds": "12"}))
    assert both == Outcome(0.9, (12.0,))
    assert both.told() == [0.9, 12.0]
    partial = syncing.outcome(EXPERIMENT, _trial({"accuracy": "0.9"}))
    assert partial == Outcome(None)
    assert syncing.outcome(EXPERIMENT, _trial({"accuracy": "0.9"}, "EarlyStopped")) is None


def _point(assignment: TrialAssignment) -> dict[str, str]:
    return {p.name: p.value for p in assignment.parameter_assignments or []}


def _score(point: dict[str, str]) -> Outcome:
    """A trade-off: accuracy grows with x and n, time grows with n and x."""
    x, n = float(point["x"]), int(point["n"])
    return Outcome(x * n / 8, (n * (1 + x),))


def _build(tmp: Path, algorithm: str, **settings: str) -> algorithms.Algorithm:
    listed = [AlgorithmSetting(name=k, value=v) for k, v in settings.items()]
    return algorithms.build(
        algorithm,
        algorithmsettings.parse(algorithm, listed, PARAMETERS),
        PARAMETERS,
        experiment="e",
        uid="uid-1",
        maximize=True,
        data_dir=tmp,
        study_name="ns.e.uid-1",
        directions=multiobjective.maximized(EXPERIMENT.spec.objective),  # type: ignore[arg-type]
    )


def _drive(search: algorithms.Algorithm, count: int, batch: int) -> list[TrialAssignment]:
    written: list[TrialAssignment] = []
    outcomes: dict[str, Outcome] = {}
    while len(written) < count:
        search.catch_up(written, outcomes)
        new = search.next_assignments(len(written), batch)
        assert new, "the search stopped early"
        written += new
        outcomes.update({a.name: _score(_point(a)) for a in new})
    search.catch_up(written, outcomes)
    return written


def _settings(algorithm: str) -> dict[str, Any]:
    if algorithm in ("nsga2", "nsga3"):
        return {"population_size": "4", "seed": "5"}
    return {"random_state": "5"}


@pytest.mark.parametrize("algorithm", multiobjective.ALGORITHMS)
def test_every_capable_algorithm_searches_two_objectives(tmp_path: Path, algorithm: str) -> None:
    parameters = PARAMETERS
    if algorithm == "grid":  # doubles need a step on a grid
        stepped = PARAMETERS[0].model_copy(deep=True)
        stepped.feasible_space.step = "0.25"
        parameters = [stepped, PARAMETERS[1]]
    listed = [AlgorithmSetting(name=k, value=v) for k, v in _settings(algorithm).items()]
    search = algorithms.build(
        algorithm,
        algorithmsettings.parse(algorithm, listed, parameters),
        parameters,
        experiment="e",
        uid="uid-1",
        maximize=True,
        data_dir=tmp_path,
        study_name="ns.e.uid-1",
        directions=[True, False],
    )
    written = _drive(search, 8, 2)
    assert len(written) == 8
    if algorithm in indexed.ALGORITHMS:  # results do not steer them: no study to keep
        assert isinstance(search, indexed.IndexedSearch)
        assert not (tmp_path / indexed.JOURNAL).exists()
        return
    assert isinstance(search, studying.Search)
    study = search.study
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    complete = [t for t in study.get_trials() if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 8
    assert all(t.values is not None and len(t.values) == 2 for t in complete)
    assert study.best_trials  # Optuna's own front of what was told


def test_nsga2_breeds_later_generations_from_the_told_front(tmp_path: Path) -> None:
    search = _build(tmp_path, "nsga2", population_size="4", seed="3")
    assert isinstance(search, studying.Search)
    _drive(search, 16, 4)
    generations = {
        value
        for t in search.study.get_trials()
        for key, value in t.system_attrs.items()
        if key.endswith(":generation")
    }
    assert generations >= {0, 1, 2}, generations


def test_a_new_process_continues_the_same_multi_objective_study(tmp_path: Path) -> None:
    first = _build(tmp_path, "tpe", n_startup_trials="2")
    written = _drive(first, 4, 2)
    second = _build(tmp_path, "tpe", n_startup_trials="2")
    assert isinstance(second, studying.Search)
    assert len(second.study.directions) == 2
    again = second.next_assignments(0, 4)
    assert [_point(a) for a in again] == [_point(a) for a in written]
    more = _drive(second, 6, 2)
    assert len(more) == 6


def test_a_single_objective_algorithm_is_refused_by_the_pass() -> None:
    message = multiobjective.refusal("cmaes")
    assert message is not None and "nsga2" in message
