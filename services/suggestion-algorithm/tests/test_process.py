"""The `suggestion-algorithm` process against a real API server: waits on invalid settings
(no crash loop), continues once they are fixed, and exits 0 on SIGTERM.

The test writes the Experiment and the Suggestion spec by hand, standing in for the
experiment-controller (contract: Suggestion name = Experiment name, spec.requests).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from kubetune import naming
from kubetune.kube import SUGGESTIONS, Kube
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


PARAMETERS = [
    {
        "name": "x",
        "parameterType": "double",
        "feasibleSpace": {"min": "0", "max": "1", "step": "0.25"},
    },
    {"name": "n", "parameterType": "discrete", "feasibleSpace": {"list": ["1", "3"]}},
]


def test_invalid_settings_wait_without_crashing_then_continue(
    kube: Kube, namespace: str, algorithm: Callable[..., ServiceProcess], search: Any
) -> None:
    search(PARAMETERS, {"random_state": "minus one"}, 3)
    process = algorithm()
    proc = process.popen
    wait_for("the problem logged", lambda: "random_state" in process.output())
    assert "invalid algorithm settings" in process.output()
    # it waits (no exit, no crash loop) and writes nothing while the settings are invalid
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        assert proc.poll() is None, process.output()
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
    assert proc.wait(30) == 0, process.output()
    assert "Traceback" not in process.output()
