"""Warm start on a real API server: the known results of a finished Experiment and of a
`results.json` ConfigMap are in the study before the first assignment, out-of-space ones are
skipped and counted in an Event, a restart never imports twice, and an exported Experiment
re-imported after its deletion gives the same study.

Drives the real `Syncer` (one pass is synchronous). The ConfigMap source is read from a
directory laid out as the kubelet mounts the volume the suggestion-controller adds
(`<dir>/<ConfigMap>/results.json`; the volume itself: test_composing in the suggestion-controller).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from optuna.trial import TrialState

from kubetune import knownresults
from kubetune.kube import EVENTS, EXPERIMENTS, SUGGESTIONS, TRIALS, Kube
from kubetune_suggestion_algorithm import studying, warmstarting
from kubetune_suggestion_algorithm.syncing import Syncer
from kubetune_testkit import builders

pytestmark = pytest.mark.integration

LR = {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}}
OPT = builders.categorical("opt", ["sgd", "adam"])
# Five Succeeded trials of the old Experiment: one has lr out of the new range.
OLD = [("0.02", "sgd", 0.5), ("0.05", "adam", 0.8), ("0.09", "adam", 0.7), ("0.3", "sgd", 0.9)]
SUCCEEDED = {"type": "Succeeded", "status": "True", "reason": "TrialSucceeded"}


def _finished_experiment(kube: Kube, namespace: str, name: str) -> None:
    wide = {**LR, "feasibleSpace": {"min": "0.01", "max": "0.5"}}
    kube.create(
        EXPERIMENTS,
        builders.experiment(name, namespace, algorithm="random", parameters=[wide, OPT]),
        namespace,
    )
    for i, (lr, opt, accuracy) in enumerate(OLD):
        trial = builders.trial(f"{name}-{i}", experiment=name, assignments={"lr": lr, "opt": opt})
        kube.create(TRIALS, trial, namespace)
        kube.patch(
            TRIALS,
            f"{name}-{i}",
            {"status": {"conditions": [SUCCEEDED], "observation": builders.observation(accuracy)}},
            namespace,
            subresource="status",
        )
    # A running trial teaches nothing.
    kube.create(TRIALS, builders.trial(f"{name}-run", experiment=name), namespace)


def _warm_experiment(kube: Kube, namespace: str, warm_start: dict[str, Any]) -> None:
    spec = builders.algorithm_spec("tpe", {"random_state": "3"})
    kube.create(
        EXPERIMENTS,
        builders.experiment(
            "exp", namespace, algorithm=spec, parameters=[LR, OPT], warmStart=warm_start
        ),
        namespace,
    )
    kube.create(
        SUGGESTIONS, builders.suggestion("exp", namespace, algorithm=spec, requests=2), namespace
    )


def _known(syncer: Syncer) -> list[tuple[dict[str, Any], float | None, int]]:
    assert isinstance(syncer.search, studying.Search)
    return [
        (t.params, t.value, t.number)
        for t in syncer.search.study.get_trials()
        if warmstarting.KNOWN in t.user_attrs
    ]


def _warm_status(kube: Kube, namespace: str) -> dict[str, Any]:
    status = kube.get(SUGGESTIONS, "exp", namespace).get("status") or {}
    return dict(status.get("warmStart") or {})


def test_known_results_are_in_the_study_before_the_first_assignment(
    kube: Kube, namespace: str, crds: None, tmp_path: Path
) -> None:
    _finished_experiment(kube, namespace, "old")
    _warm_experiment(kube, namespace, {"experiments": ["old"]})
    syncer = Syncer(kube, namespace, "exp", "tpe", tmp_path / "data", warm_start_dir=tmp_path)
    syncer.sync([])

    known = _known(syncer)
    assert sorted(v for _, v, _ in known) == [0.5, 0.7, 0.8], known
    assert isinstance(syncer.search, studying.Search)
    assigned = [t for t in syncer.search.study.get_trials() if studying.INDEX in t.user_attrs]
    assert len(assigned) == 2
    # Added before the first ask: their numbers come first.
    assert max(n for _, _, n in known) < min(t.number for t in assigned)
    assert all(t.state == TrialState.RUNNING for t in assigned)
    status = _warm_status(kube, namespace)
    assert status["imported"] == 3 and status["skipped"] == 1, status
    assert status["sources"] == [{"kind": "Experiment", "name": "old", "imported": 3, "skipped": 1}]
    events = kube.list(EVENTS, namespace)["items"]
    warm = [e for e in events if e["reason"] == warmstarting.EVENT_REASON]
    assert len(warm) == 1 and warm[0]["type"] == "Warning", warm
    assert warm[0]["involvedObject"]["name"] == "exp"
    assert "3 known results imported, 1 skipped" in warm[0]["message"]
    assert "lr=0.3 is outside [0.01, 0.1]" in warm[0]["message"]
    # Known results are not Trials and take no assignment index.
    assert len(kube.get(SUGGESTIONS, "exp", namespace)["status"]["suggestions"]) == 2


@pytest.mark.parametrize(
    ("volume", "delete_source"),
    [(True, False), (True, True), (False, False)],
    ids=["FromVolume", "FromVolume-source-deleted", "in-memory"],
)
def test_a_restart_never_imports_twice(
    kube: Kube, namespace: str, crds: None, tmp_path: Path, volume: bool, delete_source: bool
) -> None:
    _finished_experiment(kube, namespace, "old")
    _warm_experiment(kube, namespace, {"experiments": ["old"]})
    data = tmp_path / "data" if volume else None
    first = Syncer(kube, namespace, "exp", "tpe", data, warm_start_dir=tmp_path)
    first.sync([])
    # The source may go away: with the volume the study already holds its results.
    if delete_source:
        kube.delete(EXPERIMENTS, "old", namespace)
        for i in range(len(OLD)):
            kube.delete(TRIALS, f"old-{i}", namespace)
    kube.patch(SUGGESTIONS, "exp", {"spec": {"requests": 3}}, namespace)
    second = Syncer(kube, namespace, "exp", "tpe", data, warm_start_dir=tmp_path)
    second.sync([])

    assert len(_known(second)) == 3, _known(second)
    assert _warm_status(kube, namespace)["imported"] == 3
    assert len(kube.get(SUGGESTIONS, "exp", namespace)["status"]["suggestions"]) == 3


def test_an_exported_experiment_reimported_after_deletion_gives_the_same_study(
    kube: Kube, namespace: str, crds: None, tmp_path: Path
) -> None:
    _finished_experiment(kube, namespace, "old")
    found = knownresults.read_experiment(kube, namespace, "old")
    assert found is not None
    exported = json.dumps(knownresults.document(*found))
    _warm_experiment(kube, namespace, {"experiments": ["old"]})
    direct = Syncer(kube, namespace, "exp", "tpe", None, warm_start_dir=tmp_path)
    direct.sync([])

    kube.delete(EXPERIMENTS, "exp", namespace)
    kube.delete(SUGGESTIONS, "exp", namespace)
    kube.delete(EXPERIMENTS, "old", namespace)
    for i in range(len(OLD)):
        kube.delete(TRIALS, f"old-{i}", namespace)
    (tmp_path / "old-results").mkdir()
    (tmp_path / "old-results" / knownresults.KEY).write_text(exported)
    _warm_experiment(kube, namespace, {"configMaps": ["old-results"]})
    imported = Syncer(kube, namespace, "exp", "tpe", None, warm_start_dir=tmp_path)
    imported.sync([])

    def points(syncer: Syncer) -> list[str]:
        return sorted(json.dumps([p, v], sort_keys=True) for p, v, _ in _known(syncer))

    assert len(points(direct)) == 3
    assert points(imported) == points(direct)
    status = _warm_status(kube, namespace)
    assert status["sources"] == [
        {"kind": "ConfigMap", "name": "old-results", "imported": 3, "skipped": 1}
    ]


def test_a_missing_source_is_reported_not_fatal(
    kube: Kube, namespace: str, crds: None, tmp_path: Path
) -> None:
    _warm_experiment(kube, namespace, {"experiments": ["gone"], "configMaps": ["absent"]})
    syncer = Syncer(kube, namespace, "exp", "tpe", None, warm_start_dir=tmp_path)
    syncer.sync([])

    status = _warm_status(kube, namespace)
    assert status["imported"] == 0
    messages = [s.get("message", "") for s in status["sources"]]
    assert "Experiment gone not found" in messages[0]
    assert "ConfigMap absent not found" in messages[1]
    assert len(kube.get(SUGGESTIONS, "exp", namespace)["status"]["suggestions"]) == 2


def test_a_multi_objective_study_gets_one_value_per_objective(
    kube: Kube, namespace: str, crds: None, tmp_path: Path
) -> None:
    """Each known result carries every objective's value; one without the second is skipped."""

    def result(lr: str, opt: str, **metrics: float) -> dict[str, Any]:
        return {
            "parameterAssignments": [{"name": "lr", "value": lr}, {"name": "opt", "value": opt}],
            "metrics": [{"name": k, "value": v} for k, v in metrics.items()],
        }

    results = [
        result("0.02", "sgd", accuracy=0.5, seconds=3),
        result("0.05", "adam", accuracy=0.8, seconds=9),
        result("0.06", "adam", accuracy=0.7),
    ]
    (tmp_path / "known").mkdir()
    (tmp_path / "known" / knownresults.KEY).write_text(
        json.dumps({"version": knownresults.VERSION, "results": results})
    )
    objective = {
        "type": "maximize",
        "objectiveMetricName": "accuracy",
        "objectives": [
            {"metricName": "accuracy", "type": "maximize"},
            {"metricName": "seconds", "type": "minimize"},
        ],
    }
    spec = builders.algorithm_spec("tpe", {"random_state": "3"})
    kube.create(
        EXPERIMENTS,
        builders.experiment(
            "exp", namespace, objective_spec=objective, algorithm=spec, parameters=[LR, OPT],
            warmStart={"configMaps": ["known"]},
        ),
        namespace,
    )  # fmt: skip
    kube.create(
        SUGGESTIONS, builders.suggestion("exp", namespace, algorithm=spec, requests=1), namespace
    )
    syncer = Syncer(kube, namespace, "exp", "tpe", None, warm_start_dir=tmp_path)
    syncer.sync([])

    assert isinstance(syncer.search, studying.Search)
    trials = syncer.search.study.get_trials()
    known = [t.values for t in trials if warmstarting.KNOWN in t.user_attrs]
    assert sorted(known) == [[0.5, 3.0], [0.8, 9.0]], known
    status = _warm_status(kube, namespace)
    assert status["imported"] == 2 and status["skipped"] == 1, status
