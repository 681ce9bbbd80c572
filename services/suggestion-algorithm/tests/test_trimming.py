"""At scale `status.suggestions` keeps only its tail (issue 18): 100,000 name-only entries were
~3 MB, above what etcd stores. Entries whose Trial exists are dropped from the head beyond the
last `keep_named`; `suggestionCount` still counts every assignment, and a restart without the
volume replays exactly what it would have replayed from the whole list. The test drives the
real `Syncer` against the API server and plays the experiment-controller (raises
`spec.requests`, creates the Trials, finishes them with an objective value).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubetune import naming
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, TRIALS, Kube
from kubetune_suggestion_algorithm.syncing import Syncer
from kubetune_testkit import builders
from kubetune_testkit.standins.services import trial_status

pytestmark = pytest.mark.integration
PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.001", "max": "1"}},
    {"name": "units", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "64"}},
]


def _create(kube: Kube, namespace: str, algorithm: str, settings: dict[str, str]) -> None:
    """Experiment and Suggestion `exp` maximizing `acc`, as the experiment-controller makes."""
    spec = builders.algorithm_spec(algorithm, settings)
    objective = builders.objective("acc", strategies=False)
    kube.create(
        EXPERIMENTS,
        builders.experiment(
            "exp", namespace, objective_spec=objective, algorithm=spec, parameters=PARAMETERS
        ),
        namespace,
    )
    kube.create(
        SUGGESTIONS, builders.suggestion("exp", namespace, algorithm=spec, requests=0), namespace
    )


def _status(kube: Kube, namespace: str) -> dict[str, Any]:
    return dict(kube.get(SUGGESTIONS, "exp", namespace).get("status") or {})


def _trials(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return kube.list_all(TRIALS, namespace)


def _play_controller(kube: Kube, namespace: str, upto: int, syncer: Syncer) -> None:
    """Raise requests 3 at a time to `upto`; every assignment becomes a finished Trial."""
    created = {t["metadata"]["name"] for t in _trials(kube, namespace)}
    requests = int(kube.get(SUGGESTIONS, "exp", namespace)["spec"].get("requests") or 0)
    while True:
        syncer.sync(_trials(kube, namespace))
        for entry in _status(kube, namespace).get("suggestions") or []:
            if entry["name"] in created or "parameterAssignments" not in entry:
                continue
            body = {
                "apiVersion": "kubeflow.org/v1beta1",
                "kind": "Trial",
                "metadata": {"name": entry["name"], "labels": {naming.LABEL_EXPERIMENT: "exp"}},
                "spec": {"parameterAssignments": entry["parameterAssignments"]},
            }
            kube.create(TRIALS, body, namespace)
            value = float(entry["parameterAssignments"][0]["value"])
            kube.patch(
                TRIALS,
                entry["name"],
                {"status": trial_status("Succeeded", value, "acc")},
                namespace,
                subresource="status",
            )
            created.add(entry["name"])
        if requests >= upto and len(created) >= upto:
            syncer.sync(_trials(kube, namespace))  # the last Trials shrink their entries
            return
        requests = min(upto, requests + 3)
        kube.patch(SUGGESTIONS, "exp", {"spec": {"requests": requests}}, namespace)


def _syncer(kube: Kube, namespace: str, keep: int) -> Syncer:
    """A fresh process's syncer without a volume (the study starts empty)."""
    return Syncer(kube, namespace, "exp", "tpe", None, keep_named=keep)


def _next_three(kube: Kube, namespace: str, status: dict[str, Any], keep: int) -> list[Any]:
    """Put `status` back, then what a new process hands out for 3 more requests."""
    kube.patch(SUGGESTIONS, "exp", {"status": status}, namespace, subresource="status")
    kube.patch(SUGGESTIONS, "exp", {"spec": {"requests": 15}}, namespace)
    _syncer(kube, namespace, keep).sync(_trials(kube, namespace))
    after = _status(kube, namespace)
    kube.patch(SUGGESTIONS, "exp", {"spec": {"requests": 12}}, namespace)
    return [e for e in after["suggestions"] if "parameterAssignments" in e]


def test_only_the_tail_is_kept_and_a_restart_replays_the_same(
    kube: Kube, namespace: str, crds: None
) -> None:
    _create(kube, namespace, "tpe", {"random_state": "5", "n_startup_trials": "4"})
    _play_controller(kube, namespace, 12, _syncer(kube, namespace, keep=2))
    status = _status(kube, namespace)
    kept = status["suggestions"]
    assert status["suggestionCount"] == 12
    # The last three were handed out whole; they shrink on the next write.
    assert sum(e.keys() == {"name"} for e in kept) == 2, kept
    assert len(kept) == 5, kept
    offset = 12 - len(kept)
    assert [e["name"] for e in kept] == [
        naming.trial_name("exp", str(i)) for i in range(offset, 12)
    ]

    # The same history stored whole (as before trimming) and stored trimmed: a new process
    # without its volume replays both into the same study, so hands out the same three.
    head = [{"name": naming.trial_name("exp", str(i))} for i in range(offset)]
    whole = {**status, "suggestions": head + kept}
    from_whole = _next_three(kube, namespace, whole, keep=1000)
    from_tail = _next_three(kube, namespace, status, keep=2)
    assert len(from_tail) == 3
    assert from_tail == from_whole
    assert [e["name"] for e in from_tail] == [
        naming.trial_name("exp", str(i)) for i in (12, 13, 14)
    ]


def test_small_experiments_keep_the_whole_list(kube: Kube, namespace: str, crds: None) -> None:
    """Below `keep_named` nothing is dropped: clients reading the whole list still can."""
    _create(kube, namespace, "random", {"random_state": "5"})
    _play_controller(kube, namespace, 9, Syncer(kube, namespace, "exp", "random", None))
    status = _status(kube, namespace)
    assert status["suggestionCount"] == 9
    assert [e["name"] for e in status["suggestions"]] == [
        naming.trial_name("exp", str(i)) for i in range(9)
    ]
