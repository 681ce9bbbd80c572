"""The shipped ClusterRole is enough: the controller runs as a ServiceAccount bound to exactly
those rules (kustomize/base/trial-controller/clusterrole.yaml) and does its whole job."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune.kube import JOBS, TRIALS, Kube
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.conditions import is_true, job_succeeded
from kubetune_testkit.standins.services import observe
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


def test_runs_with_the_shipped_cluster_role(
    kube: Kube, namespace: str, controller: Any, limited_kubeconfig: str
) -> None:
    controller(kubeconfig=limited_kubeconfig)
    kube.create(TRIALS, trial("least", batch_job("true"), retain=False), namespace)
    wait_for(
        "job complete",
        lambda: job_succeeded(kube.get_or_none(JOBS, "least", namespace)),
        90,
    )
    observe(kube, namespace, "least", "0.6")
    wait_for("Succeeded", lambda: is_true(kube.get(TRIALS, "least", namespace), "Succeeded"))
    wait_for("job deleted", lambda: kube.get_or_none(JOBS, "least", namespace) is None, 60)
