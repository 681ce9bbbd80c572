"""The `suggestion-algorithm` process against a real API server: waits on invalid settings
(no crash loop), continues once they are fixed, and exits 0 on SIGTERM.

The test writes the Experiment and the Suggestion spec by hand, standing in for the
experiment-controller (contract: Suggestion name = Experiment name, spec.requests).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import SCRIPT, wait_for

from kubetune import naming
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, Kube

pytestmark = pytest.mark.integration


@pytest.fixture
def process(
    cluster: Any, namespace: str, tmp_path: Path
) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    log = tmp_path / "algorithm.log"

    def start() -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [
                    SCRIPT,
                    "--kubeconfig",
                    cluster.kubeconfig,
                    "--suggestion",
                    "exp",
                    "--namespace",
                    namespace,
                    "--algorithm",
                    "random",
                    "--data-dir",
                    str(tmp_path / "data"),
                    "--probe-port",
                    "0",
                    "--resync",
                    "2",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        procs.append(proc)
        return proc

    start.log = log  # type: ignore[attr-defined]
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _create(kube: Kube, namespace: str, settings: list[dict[str, str]]) -> None:
    algorithm = {"algorithmName": "random", "algorithmSettings": settings}
    kube.create(
        EXPERIMENTS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Experiment",
            "metadata": {"name": "exp", "namespace": namespace},
            "spec": {
                "parameters": [
                    {
                        "name": "x",
                        "parameterType": "double",
                        "feasibleSpace": {"min": "0", "max": "1", "step": "0.25"},
                    },
                    {
                        "name": "n",
                        "parameterType": "discrete",
                        "feasibleSpace": {"list": ["1", "3"]},
                    },
                ],
                "objective": {"type": "maximize", "objectiveMetricName": "acc"},
                "algorithm": algorithm,
            },
        },
        namespace,
    )
    kube.create(
        SUGGESTIONS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Suggestion",
            "metadata": {"name": "exp", "namespace": namespace},
            "spec": {"algorithm": algorithm, "requests": 3, "resumePolicy": "Never"},
        },
        namespace,
    )


def test_invalid_settings_wait_without_crashing_then_continue(
    kube: Kube, namespace: str, process: Any
) -> None:
    _create(kube, namespace, [{"name": "random_state", "value": "minus one"}])
    proc = process()
    wait_for("the problem logged", lambda: "random_state" in process.log.read_text())
    assert "invalid algorithm settings" in process.log.read_text()
    # it waits (no exit, no crash loop) and writes nothing while the settings are invalid
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        assert proc.poll() is None, process.log.read_text()
        time.sleep(0.5)
    status = kube.get(SUGGESTIONS, "exp", namespace).get("status") or {}
    assert not status.get("suggestions")

    kube.patch(
        SUGGESTIONS,
        "exp",
        {
            "spec": {
                "algorithm": {
                    "algorithmName": "random",
                    "algorithmSettings": [{"name": "random_state", "value": "4"}],
                }
            }
        },
        namespace,
    )

    def assigned() -> list[dict[str, Any]]:
        return list(
            (kube.get(SUGGESTIONS, "exp", namespace).get("status") or {}).get("suggestions") or []
        )

    suggestions = wait_for("3 assignments", lambda: len(assigned()) == 3 and assigned())
    assert [s["name"] for s in suggestions] == [naming.trial_name("exp", str(i)) for i in range(3)]
    for suggestion in suggestions:
        values = {p["name"]: p["value"] for p in suggestion["parameterAssignments"]}
        assert values["x"] in ("0.0", "0.25", "0.5", "0.75", "1.0")
        assert values["n"] in ("1", "3")
    status = kube.get(SUGGESTIONS, "exp", namespace)["status"]
    assert status["suggestionCount"] == 3

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, process.log.read_text()
    assert "Traceback" not in process.log.read_text()
