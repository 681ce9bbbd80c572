"""A Succeeded Suggestion gets no more assignments. Its algorithm pod may still be terminating
when a restarted Experiment raises `spec.requests` (policy Never: never restarted; FromVolume
removes Succeeded before its new pod runs), and it must not answer them. Drives the real
`Syncer` against the API server; one pass is synchronous, so no wait can hide a late write."""

from __future__ import annotations

import pytest

from kubetune.kube import EXPERIMENTS, SUGGESTIONS, Kube
from kubetune_suggestion_algorithm.syncing import Syncer
from kubetune_testkit import builders

pytestmark = pytest.mark.integration


def _succeeded(status: str) -> dict[str, object]:
    return {
        "type": "Succeeded",
        "status": status,
        "reason": "Experiment is succeeded",
        "message": "Suggestion is succeeded, can't be restarted",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "lastUpdateTime": "2026-01-01T00:00:00Z",
    }


@pytest.mark.parametrize("succeeded", ["True", "False"])
def test_a_succeeded_suggestion_gets_no_more_assignments(
    kube: Kube, namespace: str, crds: None, succeeded: str
) -> None:
    spec = builders.algorithm_spec("random", {"random_state": "5"})
    parameters = [
        {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.001", "max": "1"}}
    ]
    kube.create(
        EXPERIMENTS,
        builders.experiment("exp", namespace, algorithm=spec, parameters=parameters),
        namespace,
    )
    kube.create(
        SUGGESTIONS, builders.suggestion("exp", namespace, algorithm=spec, requests=3), namespace
    )
    kube.patch(
        SUGGESTIONS,
        "exp",
        {"status": {"conditions": [_succeeded(succeeded)]}},
        namespace,
        subresource="status",
    )
    Syncer(kube, namespace, "exp", "random", None).sync([])
    status = kube.get(SUGGESTIONS, "exp", namespace).get("status") or {}
    handed_out = len(status.get("suggestions") or [])
    # The control (not Succeeded) proves the pass would have written.
    assert handed_out == (0 if succeeded == "True" else 3), status
