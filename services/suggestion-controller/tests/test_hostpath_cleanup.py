"""Deleting a FromVolume Experiment removes its hostPath directory on the node that held it.

The suggestion-controller cannot reach the directory (conftest runs it with an empty tmpfs over
the prefix, as its container on a real cluster has no such mount): a Pod on the node removes it,
and the Suggestion and PV go only after that Pod Succeeded. The node agent runs the Pod as a host
process, so the directory the test looks at is the host's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from kubetune import naming
from kubetune.kube import EVENTS, EXPERIMENTS, PERSISTENT_VOLUMES, PODS, SUGGESTIONS, Kube
from kubetune_suggestion_controller import cleaning
from kubetune_testkit.conditions import is_true
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.standins.services import StandInExperimentController
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}},
]


def _directory(host_prefix: Path, namespace: str) -> Path:
    return host_prefix / naming.suggestion_pv_name("exp", "random", namespace)


def _running_with_directory(
    standin: StandInExperimentController, host_prefix: Path, namespace: str
) -> Path:
    standin.create("random", "FromVolume", PARAMETERS, requests=1)
    wait_for("Suggestion Running", lambda: is_true(standin.suggestion(), "Running"), 120)
    directory = _directory(host_prefix, namespace)
    assert directory.is_dir()
    (directory / "nested").mkdir(exist_ok=True)
    (directory / "nested" / "state").write_text("kept by the algorithm")
    return directory


def _gone(kube: Kube, namespace: str, directory: Path) -> bool:
    pv = naming.suggestion_pv_name("exp", "random", namespace)
    return (
        kube.get_or_none(SUGGESTIONS, "exp", namespace) is None
        and kube.get_or_none(PERSISTENT_VOLUMES, pv) is None
        and not directory.exists()
    )


def _cleanup_pods(kube: Kube, namespace: str) -> list[Any]:
    selector = f"app.kubernetes.io/name={cleaning.APP_LABEL}"
    return list(kube.list(PODS, namespace, label_selector=selector)["items"])


def test_deleting_the_experiment_removes_the_directory_on_its_node(
    kube: Kube,
    namespace: str,
    node_name: str,
    controller: ServiceProcess,
    standin: StandInExperimentController,
    host_prefix: Path,
) -> None:
    directory = _running_with_directory(standin, host_prefix, namespace)
    kube.delete(EXPERIMENTS, "exp", namespace)
    wait_for(
        "Suggestion, PV and host directory gone", lambda: _gone(kube, namespace, directory), 120
    )
    assert host_prefix.is_dir()  # only the PV's own directory went
    wait_for("no cleanup Pod left", lambda: not _cleanup_pods(kube, namespace))
    assert f"Pod {namespace}/" in controller.output()
    assert f"on node {node_name}" in controller.output()  # pinned by the PV's node affinity


def test_a_failed_cleanup_is_reported_and_retried(
    kube: Kube,
    namespace: str,
    controller: ServiceProcess,
    standin: StandInExperimentController,
    host_prefix: Path,
) -> None:
    directory = _running_with_directory(standin, host_prefix, namespace)
    pinned = directory / "nested" / "state"
    subprocess.run(["chattr", "+i", str(pinned)], check=True)  # not even root may unlink it
    try:
        kube.delete(EXPERIMENTS, "exp", namespace)
        event = wait_for(
            "a HostPathCleanupFailed Event on the Suggestion",
            lambda: [
                e
                for e in kube.list(EVENTS, namespace)["items"]
                if e["reason"] == "HostPathCleanupFailed"
                and e["involvedObject"]["kind"] == "Suggestion"
            ],
            120,
        )[0]
        assert "attempt 1/10" in event["message"], event["message"]
        assert str(directory) in event["message"], event["message"]
        assert "retrying in 10 s" in event["message"], event["message"]
        # the Event is written before the next attempt's annotation: wait for that too
        attempt = wait_for(
            "the next attempt's annotation",
            lambda: (
                kube.get(SUGGESTIONS, "exp", namespace)["metadata"].get("annotations") or {}
            ).get(cleaning.ATTEMPT_ANNOTATION),
            30,
        )
        assert attempt.startswith("2 "), attempt
        assert directory.is_dir()
        assert kube.get_or_none(SUGGESTIONS, "exp", namespace) is not None  # held, not lost
    finally:
        subprocess.run(["chattr", "-i", str(pinned)], check=True)
    wait_for("removed by the next attempt", lambda: _gone(kube, namespace, directory), 120)
    wait_for("no cleanup Pod left", lambda: not _cleanup_pods(kube, namespace))
