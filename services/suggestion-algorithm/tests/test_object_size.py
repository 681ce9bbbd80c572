"""The Suggestion stays below the object size limit (issue 13, defect 7).

400 parameters with long names make one assignment ~95 KB; etcd refuses a request above
1.5 MiB, so with every assignment stored whole the Suggestion stopped growing at ~16 of 24
(`etcdserver: request is too large`, retried for ever, nothing on the Experiment). Now an
assignment whose Trial exists keeps only its name, new ones wait when they would not fit, and
a write that cannot be made shows on the Experiment as a Warning Event `ObjectTooLarge`. The test
plays the experiment-controller: it raises `spec.requests` and creates the Trials.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from kubetune import naming
from kubetune.kube import EVENTS, SUGGESTIONS, TRIALS, Kube
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration
PARAMETERS = 400
NAME_PAD = "x" * 190


def _create(search: Any, requests: int) -> None:
    parameters = [
        {
            "name": f"p{i:03d}-{NAME_PAD}",
            "parameterType": "double",
            "feasibleSpace": {"min": "0", "max": "1"},
        }
        for i in range(PARAMETERS)
    ]
    search(parameters, {"random_state": "3"}, requests)


def _status(kube: Kube, namespace: str) -> dict[str, Any]:
    return dict(kube.get(SUGGESTIONS, "exp", namespace).get("status") or {})


def _trial_for(kube: Kube, namespace: str, entry: dict[str, Any]) -> None:
    """The Trial of an assignment, as the experiment-controller creates it (spec only)."""
    kube.create(
        TRIALS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Trial",
            "metadata": {"name": entry["name"], "labels": {naming.LABEL_EXPERIMENT: "exp"}},
            "spec": {"parameterAssignments": entry["parameterAssignments"]},
        },
        namespace,
    )


def _size(obj: dict[str, Any]) -> int:
    """Bytes as stored (compact JSON)."""
    return len(json.dumps(obj, separators=(",", ":")).encode())


def _events(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return [
        e
        for e in kube.list_all(EVENTS, namespace)
        if e.get("reason") == "ObjectTooLarge"
        and e["involvedObject"]["kind"] == "Experiment"
        and e["involvedObject"]["name"] == "exp"
    ]


def test_large_assignments_reach_max_trial_count(
    kube: Kube,
    namespace: str,
    algorithm: Callable[..., ServiceProcess],
    search: Any,
) -> None:
    """parallelTrialCount 3, maxTrialCount 24: all 24 assignments arrive, the object stays
    below 1 MiB, and those with a Trial are stored as their name only."""
    _create(search, 3)
    process = algorithm()
    try:
        deadline = time.monotonic() + 150
        requests = 3
        created: set[str] = set()
        while time.monotonic() < deadline:
            status = _status(kube, namespace)
            assigned = status.get("suggestions") or []
            for entry in assigned:
                if entry["name"] not in created:  # not yet a Trial: play the controller
                    created.add(entry["name"])
                    _trial_for(kube, namespace, entry)
            if len(assigned) == 24:
                break
            if len(assigned) == requests:
                requests = min(24, requests + 3)
                kube.patch(SUGGESTIONS, "exp", {"spec": {"requests": requests}}, namespace)
            time.sleep(0.5)
        log = process.output()
        assert len(assigned) == 24, f"stalled at {len(assigned)} assignments:\n{log[-3000:]}"
        assert "too large" not in log, log[-3000:]
        assert status["suggestionCount"] == 24
        assert [s["name"] for s in assigned] == [
            naming.trial_name("exp", str(i)) for i in range(24)
        ]
        suggestion = kube.get(SUGGESTIONS, "exp", namespace)
        assert _size(suggestion) <= 1024 * 1024
        whole = [s["name"] for s in assigned if "parameterAssignments" in s]
        # Only entries whose Trial the algorithm had not seen yet stay whole: the last batch,
        # and at most the one before it (its Trials are created while the algorithm's Trial
        # cache may still lag by a watch event; a fixed count of 3 failed on that race).
        assert whole and set(whole) <= {s["name"] for s in assigned[-6:]}, whole
        assert not _events(kube, namespace)
    finally:
        process.kill()


def test_a_write_refused_as_too_large_shows_on_the_experiment(
    kube: Kube,
    namespace: str,
    algorithm: Callable[..., ServiceProcess],
    search: Any,
) -> None:
    """20 assignments at once (~1.9 MB) with the algorithm's own bound lifted above etcd's
    limit: the API server refuses the write, and the Experiment gets an ObjectTooLarge event."""
    _create(search, 20)
    process = algorithm("--max-suggestion-bytes=10000000")
    try:
        (event,) = wait_for("an ObjectTooLarge event", lambda: _events(kube, namespace), 90)
        assert event["type"] == "Warning"
        assert f"Suggestion {namespace}/exp cannot hold more assignments" in event["message"]
        assert "too large" in event["message"] and "parallelTrialCount" in event["message"]
        assert process.alive()  # waits, does not crash
    finally:
        process.kill()


def test_assignments_wait_when_they_would_not_fit(
    kube: Kube,
    namespace: str,
    algorithm: Callable[..., ServiceProcess],
    search: Any,
) -> None:
    """With the default bound, 20 requested at once: as many as fit below 1 MiB come now; and
    with a bound below one assignment nothing is written and the Experiment says why."""
    _create(search, 20)
    process = algorithm()
    try:
        wait_for("some assignments", lambda: _status(kube, namespace).get("suggestions"), 90)
        count = len(_status(kube, namespace)["suggestions"])
        assert 5 <= count < 20
        assert _size(kube.get(SUGGESTIONS, "exp", namespace)) <= 1024 * 1024
        assert not _events(kube, namespace)
    finally:
        process.kill()
    # Their Trials exist now; with a bound below one assignment nothing more can come.
    for entry in _status(kube, namespace)["suggestions"]:
        _trial_for(kube, namespace, entry)
    kube.patch(SUGGESTIONS, "exp", {"spec": {"requests": 21}}, namespace)
    process = algorithm("--max-suggestion-bytes=50000")
    try:
        (event,) = wait_for("an ObjectTooLarge event", lambda: _events(kube, namespace), 90)
        assert "above this algorithm's limit of 50000 bytes" in event["message"]
        would_be = int(event["message"].split("it would be ")[1].split(" bytes")[0])
        assert would_be > 50000, event["message"]  # the size that did not fit, not what did

        def compacted() -> list[dict[str, Any]] | None:
            """The stored entries once only names are left (the Trials hold the rest); the
            event and the compacting patch are separate writes, in either order."""
            stored: list[dict[str, Any]] = _status(kube, namespace)["suggestions"]
            return stored if all(set(s) == {"name"} for s in stored) else None

        stored = wait_for("the stored assignments compacted to names", compacted, 30)
        assert len(stored) == count
    finally:
        process.kill()
