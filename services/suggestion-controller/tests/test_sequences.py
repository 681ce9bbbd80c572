"""The seed's Suggestion condition sequences, step by step, from the real suggestion-controller.

A watch records every version of the Suggestion the API server stores, so each move the
controller made is seen (type, status, reason, message, in order), not only the end state. The
test stands in for the experiment-controller (Experiment status: ended, restarted), see conftest;
the algorithm pod is real (its readiness makes DeploymentReady True).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubetune import errors
from kubetune.kube import DEPLOYMENTS, SERVICES, SUGGESTIONS, Kube
from kubetune_testkit.conditions import is_true
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.standins.services import StandInExperimentController
from kubetune_testkit.waiting import wait_for

from . import seed

pytestmark = pytest.mark.integration

PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}},
]


class Recorder:
    """Every stored version of one Suggestion's `status.conditions`, in resourceVersion order."""

    def __init__(self, kube: Kube, namespace: str, name: str) -> None:
        self.kube, self.namespace, self.name = kube, namespace, name
        self.versions: list[list[dict[str, Any]]] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        listed = kube.list(SUGGESTIONS, namespace, field_selector=f"metadata.name={name}")
        assert not listed.get("items"), "the Suggestion must not exist before recording starts"
        self._since = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for event in self.kube.watch(
                    SUGGESTIONS,
                    self.namespace,
                    resource_version=self._since,
                    timeout_seconds=60,
                    field_selector=f"metadata.name={self.name}",
                ):
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        raise errors.ApiError(obj.get("code", 0), "watch", str(obj))
                    self._since = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        conds = (obj.get("status") or {}).get("conditions") or []
                        if not self.versions or self.versions[-1] != conds:
                            self.versions.append(conds)
        except BaseException as e:  # noqa: BLE001 - reported by `history`
            self.errors.append(e)

    def history(self) -> list[seed.Step]:
        assert not self.errors, self.errors
        return seed.history(list(self.versions))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(1)  # a daemon; its watch ends by itself


@pytest.fixture
def recorder(kube: Kube, namespace: str, installed: None) -> Iterator[Recorder]:
    rec = Recorder(kube, namespace, "exp")
    yield rec
    rec.stop()


def _run_to_the_end(kube: Kube, namespace: str, standin: StandInExperimentController) -> None:
    """The Suggestion runs, then its Experiment ends; wait until Deployment and Service went."""
    wait_for("Suggestion Running", lambda: is_true(standin.suggestion(), "Running"), 120)
    standin.set_experiment([("Running", "False", "ExperimentRunning")])
    standin.set_experiment([("Succeeded", "True", "ExperimentMaxTrialsReached")])
    wait_for("Suggestion Succeeded", lambda: is_true(standin.suggestion(), "Succeeded"))
    wait_for(
        "Deployment and Service deleted",
        lambda: (
            kube.get_or_none(DEPLOYMENTS, "exp-random", namespace) is None
            and kube.get_or_none(SERVICES, "exp-random", namespace) is None
        ),
    )


def test_from_volume_first_run_and_restart_follow_the_seed(
    kube: Kube,
    namespace: str,
    controller: ServiceProcess,
    recorder: Recorder,
    standin: StandInExperimentController,
) -> None:
    standin.create("random", "FromVolume", PARAMETERS, {"random_state": "1"}, requests=1)
    _run_to_the_end(kube, namespace, standin)
    wait_for(  # the watch may lag behind the GET that saw Succeeded
        "the first run recorded", lambda: len(recorder.history()) >= len(seed.FIRST_RUN)
    )
    assert recorder.history() == seed.FIRST_RUN, "first run"

    standin.restart_experiment()
    wait_for("restart marked", lambda: len(recorder.history()) > len(seed.FIRST_RUN))
    _run_to_the_end(kube, namespace, standin)
    wait_for(
        "the whole restart recorded",
        lambda: len(recorder.history()) >= len(seed.FIRST_RUN) + len(seed.RESTART),
    )
    again = recorder.history()[len(seed.FIRST_RUN) :]
    assert again == seed.RESTART, "restart"
    # the seed restarts without a Restarting condition on the Suggestion, in every version
    assert not any(c["type"] == "Restarting" for v in recorder.versions for c in v)
    final = recorder.versions[-1]
    assert [c["type"] for c in final] == ["Created", "Running", "DeploymentReady", "Succeeded"]


def test_conditions_the_controller_cannot_follow_are_left_alone(
    kube: Kube, namespace: str, controller: ServiceProcess, standin: StandInExperimentController
) -> None:
    """Someone else wrote a condition the Suggestion machine does not know: each pass gives up
    on that Suggestion (TerminalError: an error line, no traceback, no retry) and writes
    nothing; the controller keeps running (the fixture checks its clean exit)."""
    standin.create("random", "FromVolume", PARAMETERS, {"random_state": "1"}, requests=1)
    wait_for("Created", lambda: is_true(standin.suggestion(), "Created"))
    foreign = [
        {"type": "Created", "status": "True", "reason": "SuggestionCreated", "message": "m"},
        {"type": "Restarting", "status": "True", "reason": "Elsewhere", "message": "not ours"},
    ]
    kube.patch(
        SUGGESTIONS, "exp", {"status": {"conditions": foreign}}, namespace, subresource="status"
    )
    wait_for("the controller gave up", lambda: "cannot set" in controller.logs())
    lines = [line for line in controller.logs().splitlines() if "cannot set" in line]
    assert f"gave up: Suggestion {namespace}/exp: Suggestion: cannot set" in lines[0], lines
    for _ in range(10):  # and leaves the conditions as they were
        conds = [(c["type"], c["reason"]) for c in standin.suggestion()["status"]["conditions"]]
        assert conds == [("Created", "SuggestionCreated"), ("Restarting", "Elsewhere")]
        time.sleep(0.5)
    assert controller.proc.poll() is None
