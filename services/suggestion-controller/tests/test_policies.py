"""The three resume policies on a real cluster: run to the end, restart, kill, delete.

The algorithm runs for real in its Deployment's pod (the node agent runs `suggestion-algorithm`);
the test stands in for the experiment-controller (Experiment status, Suggestion requests) and the
trial-controller (finished Trials), see conftest.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from kubetune import naming
from kubetune.kube import (
    DEPLOYMENTS,
    EXPERIMENTS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    SERVICES,
    Kube,
)
from kubetune_testkit.conditions import conditions_of, is_true
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.standins.services import StandInExperimentController
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}},
    {"name": "layers", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "5"}},
    {
        "name": "optimizer",
        "parameterType": "categorical",
        "feasibleSpace": {"list": ["sgd", "adam"]},
    },
]
SETTINGS = {"n_startup_trials": "2", "random_state": "5"}


def _loss(assignment: dict[str, Any]) -> float:
    values = {p["name"]: p["value"] for p in assignment["parameterAssignments"]}
    return (float(values["lr"]) - 0.05) ** 2 + int(values["layers"]) / 10


def _study(host_prefix: Path, namespace: str) -> optuna.Study:
    pv = naming.suggestion_pv_name("exp", "tpe", namespace)
    journal = host_prefix / pv / "study.journal"
    storage = JournalStorage(JournalFileBackend(str(journal)))
    (summary,) = optuna.get_all_study_summaries(storage)
    return optuna.load_study(study_name=summary.study_name, storage=storage)


def _running(standin: StandInExperimentController) -> bool:
    return is_true(standin.suggestion(), "Running")


def _holds(what: str, check: Any, seconds: float = 8.0) -> None:
    """`check` stays true for a while (for things that must NOT happen)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), what
        time.sleep(0.5)


@pytest.mark.parametrize("policy", ["Never", "LongRunning", "FromVolume"])
def test_policy_runs_to_the_end_then_restarts(
    policy: str,
    kube: Kube,
    namespace: str,
    controller: ServiceProcess,
    standin: StandInExperimentController,
    host_prefix: Path,
) -> None:
    standin.create("tpe", policy, PARAMETERS, SETTINGS, requests=3)
    wait_for("Suggestion Running", lambda: _running(standin), 120)
    first = standin.wait_assignments(3)
    assert [a["name"] for a in first] == [naming.trial_name("exp", str(i)) for i in range(3)]
    suggestion = standin.suggestion()
    assert suggestion["status"]["suggestionCount"] == 3
    assert [c["type"] for c in suggestion["status"]["conditions"]] == [
        "Created",
        "DeploymentReady",
        "Running",
    ]
    assert suggestion["status"].get("startTime")

    deployment = kube.get(DEPLOYMENTS, "exp-tpe", namespace)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels[naming.LABEL_SUGGESTION] == "exp"
    assert labels[naming.LABEL_EXPERIMENT] == "exp"
    assert labels[naming.LABEL_DEPLOYMENT] == "exp-tpe"
    assert labels[naming.ISTIO_INJECT] == "false"
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/kubetune/suggestion-algorithm:0.1.0"
    assert container["resources"]["limits"]["memory"] == "1Gi"
    assert deployment["metadata"]["ownerReferences"][0]["kind"] == "Suggestion"
    assert kube.get(SERVICES, "exp-tpe", namespace)["spec"]["ports"][0]["port"] == 6789
    if policy == "FromVolume":
        pvc = kube.get(PERSISTENT_VOLUME_CLAIMS, "exp-tpe", namespace)
        assert pvc["metadata"]["ownerReferences"][0]["kind"] == "Suggestion"
        pv = kube.get(PERSISTENT_VOLUMES, f"exp-tpe-{namespace}")
        assert pv["spec"]["hostPath"]["path"] == str(host_prefix / f"exp-tpe-{namespace}")
        wait_for(
            "PVC bound",
            lambda: kube.get(PERSISTENT_VOLUME_CLAIMS, "exp-tpe", namespace)["status"]["phase"],
        )
    else:
        assert kube.get_or_none(PERSISTENT_VOLUME_CLAIMS, "exp-tpe", namespace) is None
    pod_uid = standin.algorithm_pods()[0]["metadata"]["uid"]

    for assignment in first:
        standin.finish(assignment, _loss(assignment))
    standin.set_experiment([("Running", "False", "ExperimentRunning")])
    standin.set_experiment([("Succeeded", "True", "ExperimentMaxTrialsReached")])

    if policy == "LongRunning":
        _holds("LongRunning keeps its Deployment", lambda: _running(standin), 5)
        assert kube.get_or_none(DEPLOYMENTS, "exp-tpe", namespace) is not None
    else:
        wait_for("Suggestion Succeeded", lambda: is_true(standin.suggestion(), "Succeeded"))
        conds = standin.suggestion()["status"]["conditions"]
        assert [(c["type"], c["status"]) for c in conds[-3:]] == [
            ("Running", "False"),
            ("DeploymentReady", "False"),
            ("Succeeded", "True"),
        ]
        assert conds[-1]["reason"] == "Experiment is succeeded"
        assert conds[-2]["reason"] == "Suggestion is succeeded"
        assert conds[-1]["message"] == (
            "Suggestion is succeeded, suggestion volume is not deleted, can be restarted"
            if policy == "FromVolume"
            else "Suggestion is succeeded, can't be restarted"
        )
        wait_for(
            "Deployment and Service deleted",
            lambda: (
                kube.get_or_none(DEPLOYMENTS, "exp-tpe", namespace) is None
                and kube.get_or_none(SERVICES, "exp-tpe", namespace) is None
            ),
        )
        if policy == "FromVolume":
            assert kube.get_or_none(PERSISTENT_VOLUME_CLAIMS, "exp-tpe", namespace) is not None
            assert kube.get_or_none(PERSISTENT_VOLUMES, f"exp-tpe-{namespace}") is not None

    # restart by raising maxTrialCount: the Experiment goes Restarting, requests grow
    standin.restart_experiment()
    standin.request(5)
    if policy == "Never":
        _holds(
            "Never is not restarted",
            lambda: (
                is_true(standin.suggestion(), "Succeeded")
                and kube.get_or_none(DEPLOYMENTS, "exp-tpe", namespace) is None
                and len(standin.assignments()) == 3
            ),
        )
        return
    if policy == "FromVolume":
        wait_for(
            "restart marked",
            lambda: "Succeeded" not in conditions_of(standin.suggestion()),
        )
    wait_for("Suggestion Running again", lambda: _running(standin), 120)
    second = standin.wait_assignments(5)
    assert second[:3] == first
    assert len({a["name"] for a in second}) == 5
    conds = conditions_of(standin.suggestion())
    assert "Succeeded" not in conds
    assert conds["Running"]["reason"] == "SuggestionRunning"
    if policy == "LongRunning":
        assert [p["metadata"]["uid"] for p in standin.algorithm_pods()] == [pod_uid]
        return
    new_pods = standin.algorithm_pods()
    assert new_pods and new_pods[0]["metadata"]["uid"] != pod_uid
    # the same study continued: the 3 old results were told before the 2 new points were drawn
    study = _study(host_prefix, namespace)
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    assert [t.user_attrs["kubetune_index"] for t in trials] == [0, 1, 2, 3, 4]
    old, new = trials[:3], trials[3:]
    assert all(t.state == TrialState.COMPLETE for t in old)
    assert all(t.datetime_complete is not None for t in old)
    assert all(
        o.datetime_complete <= n.datetime_start  # type: ignore[operator]
        for o in old
        for n in new
    )

    # deleting the Experiment removes Deployment, Service, PVC, PV and the PV's directory
    directory = host_prefix / f"exp-tpe-{namespace}"
    assert directory.is_dir()
    kube.delete(EXPERIMENTS, "exp", namespace)
    wait_for(
        "everything of the Suggestion gone",
        lambda: all(
            obj is None
            for obj in (
                kube.get_or_none(DEPLOYMENTS, "exp-tpe", namespace),
                kube.get_or_none(SERVICES, "exp-tpe", namespace),
                kube.get_or_none(PERSISTENT_VOLUME_CLAIMS, "exp-tpe", namespace),
                kube.get_or_none(PERSISTENT_VOLUMES, f"exp-tpe-{namespace}"),
            )
        ),
        120,
    )
    assert not directory.exists()


def test_from_volume_survives_a_killed_algorithm_pod(
    cluster: Any,
    kube: Kube,
    namespace: str,
    controller: ServiceProcess,
    standin: StandInExperimentController,
    host_prefix: Path,
) -> None:
    standin.create("tpe", "FromVolume", PARAMETERS, SETTINGS, requests=4)
    first = standin.wait_assignments(4, 180)
    for assignment in first:
        standin.finish(assignment, _loss(assignment))
    (pod,) = standin.algorithm_pods()
    # killed while asked for more (the old pod may or may not have answered), then more again
    standin.request(6)
    kube.delete(PODS, pod["metadata"]["name"], namespace, grace_seconds=0)
    wait_for(
        "a new algorithm pod",
        lambda: [
            p for p in standin.algorithm_pods() if p["metadata"]["uid"] != pod["metadata"]["uid"]
        ],
    )
    standin.request(8)
    every = standin.wait_assignments(8, 180)
    assert [a["name"] for a in every] == [naming.trial_name("exp", str(i)) for i in range(8)]
    assert every[:4] == first
    study = _study(host_prefix, namespace)
    every_trial = study.get_trials(deepcopy=False)
    trials = [t for t in every_trial if "kubetune_index" in t.user_attrs]
    # a pod killed between drawing a point and recording its index leaves an unindexed trial;
    # the next pod marks it failed (it was never written, so it is not an assignment)
    assert all(t.state == TrialState.FAIL for t in every_trial if t not in trials)
    indexes = sorted(t.user_attrs["kubetune_index"] for t in trials)
    assert indexes == list(range(8)), indexes  # no duplicate, nothing lost
    completed = [t for t in trials if t.state == TrialState.COMPLETE]
    assert sorted(t.user_attrs["kubetune_index"] for t in completed) == [0, 1, 2, 3]
    for trial in completed:
        assert trial.value == pytest.approx(_loss(first[trial.user_attrs["kubetune_index"]]))
    (current,) = standin.algorithm_pods()
    logs = cluster.kubectl("logs", "-n", namespace, current["metadata"]["name"])
    assert "Traceback" not in logs.stdout, logs.stdout
    assert "assigned" in logs.stdout, logs.stdout


def test_invalid_settings_fail_the_suggestion_without_a_deployment(
    kube: Kube, namespace: str, controller: ServiceProcess, standin: StandInExperimentController
) -> None:
    standin.create("tpe", "Never", PARAMETERS, {"n_startup_trials": "-1"}, requests=2)
    wait_for("Suggestion Failed", lambda: is_true(standin.suggestion(), "Failed"))
    failed = conditions_of(standin.suggestion())["Failed"]
    assert failed["reason"] == "SuggestionFailed"
    assert failed["message"].startswith("Validation failed: algorithm setting n_startup_trials")
    assert kube.get_or_none(DEPLOYMENTS, "exp-tpe", namespace) is None


def test_grid_exhaustion_is_reported_by_the_algorithm(
    namespace: str, controller: ServiceProcess, standin: StandInExperimentController
) -> None:
    grid = [
        {"name": "a", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "2"}},
        {"name": "b", "parameterType": "categorical", "feasibleSpace": {"list": ["x", "y"]}},
    ]
    standin.create("grid", "Never", grid, requests=6)

    def exhausted() -> bool:
        settings = (standin.suggestion().get("status") or {}).get("algorithmSettings") or []
        return {"name": "search_exhausted", "value": "true"} in settings

    wait_for("search_exhausted", exhausted, 120)
    points = {tuple(p["value"] for p in a["parameterAssignments"]) for a in standin.assignments()}
    assert points == {("1", "x"), ("1", "y"), ("2", "x"), ("2", "y")}
    assert standin.suggestion()["status"]["suggestionCount"] == 4


MIXED = [
    {
        "name": "lr",
        "parameterType": "double",
        "feasibleSpace": {"min": "0.1", "max": "0.5", "step": "0.1"},
    },
    {"name": "layers", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "4"}},
    {"name": "batch", "parameterType": "discrete", "feasibleSpace": {"list": ["16", "32", "64"]}},
    {"name": "opt", "parameterType": "categorical", "feasibleSpace": {"list": ["sgd", "adam"]}},
]


@pytest.mark.parametrize(
    "algorithm",
    ["random", "grid", "tpe", "multivariate-tpe", "cmaes", "sobol", "bayesianoptimization"],
)
def test_every_algorithm_assigns_valid_points_in_its_pod(
    algorithm: str, namespace: str, controller: ServiceProcess, standin: StandInExperimentController
) -> None:
    settings = {"random_state": "3"}
    if algorithm == "bayesianoptimization":
        settings["n_initial_points"] = "3"
    standin.create(algorithm, "LongRunning", MIXED, settings, requests=4)
    first = standin.wait_assignments(4, 180)
    for index, assignment in enumerate(first):
        standin.finish(assignment, float(index % 3))
    standin.request(7)  # the next points come after the results were told
    every = standin.wait_assignments(7, 180)
    assert [a["name"] for a in every] == [naming.trial_name("exp", str(i)) for i in range(7)]
    for assignment in every:
        values = {p["name"]: p["value"] for p in assignment["parameterAssignments"]}
        assert list(values) == ["lr", "layers", "batch", "opt"]
        assert values["lr"] in ("0.1", "0.2", "0.3", "0.4", "0.5"), values
        assert values["layers"] in ("1", "2", "3", "4"), values
        assert values["batch"] in ("16", "32", "64"), values
        assert values["opt"] in ("sgd", "adam"), values
    if algorithm == "grid":
        points = [tuple(p["value"] for p in a["parameterAssignments"]) for a in every]
        assert len(set(points)) == 7
