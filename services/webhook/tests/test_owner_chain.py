"""Against a real API server: the `trials/status` check reads a pod's job and Trial through the
pod webhook's cache, and a job and Trial recreated under the same names are read again (the
cache answers only with the uid a reference names)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune.kube import JOBS, PODS, TRIALS, Kube
from kubetune.trialpods import trial_of_pod
from kubetune_testkit.builders import objective, trial
from kubetune_testkit.trialpods import job_pod
from kubetune_testkit.waiting import wait_for
from kubetune_webhook.lookups import KubeCluster, OwnerChain

pytestmark = pytest.mark.integration


def _trial_with_pod(kube: Kube, ns: str) -> tuple[dict[str, Any], dict[str, Any]]:
    body = trial("t", experiment="e", objective_spec=objective("loss", "minimize"))
    created: dict[str, Any] = kube.create(TRIALS, body, ns)
    return created, job_pod(kube, ns, created)


def test_a_recreated_trial_and_job_are_read_again(kube: Kube, namespace: str, crds: None) -> None:
    chain = OwnerChain(KubeCluster(kube, cache_seconds=600))
    first, pod = _trial_with_pod(kube, namespace)
    assert trial_of_pod(pod, namespace, chain) == ("t", first["metadata"]["uid"])

    for res, name in ((JOBS, "t"), (TRIALS, "t")):
        kube.delete(res, name, namespace, propagation="Background")
    wait_for(
        "the Trial, its job and pod to go",
        lambda: (
            kube.get_or_none(TRIALS, "t", namespace) is None
            and kube.get_or_none(JOBS, "t", namespace) is None
            and not kube.list_all(PODS, namespace)
        ),
    )
    second, pod = _trial_with_pod(kube, namespace)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert trial_of_pod(pod, namespace, chain) == ("t", second["metadata"]["uid"])
