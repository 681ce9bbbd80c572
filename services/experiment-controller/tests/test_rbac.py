"""The ClusterRole of kustomize/base/experiment-controller is enough, and the controller works
with a trial template from a ConfigMap, when it runs as its service account (impersonated)."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kubetune import errors
from kubetune.kube import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CONFIGMAPS,
    EXPERIMENTS,
    SUGGESTIONS,
    Kube,
    connect,
)
from kubetune.runtime import running
from kubetune_experiment_controller import main
from kubetune_testkit.builders import trial_job
from kubetune_testkit.paths import REPO
from kubetune_testkit.standins.services import StandInAlgorithm, set_trial
from kubetune_testkit.waiting import wait_for
from tests.standins import experiment_manifest, experiment_status, last_condition, trials_of

pytestmark = pytest.mark.integration

BASE = REPO / "kustomize" / "base" / "experiment-controller"


@pytest.fixture
def service_account_kube(kube: Kube, cluster: Any, namespace: str) -> Iterator[Kube]:
    """A client impersonating a service account bound (only) to the shipped ClusterRole."""
    suffix = uuid.uuid4().hex[:6]
    role = yaml.safe_load((BASE / "clusterrole.yaml").read_text())
    role["metadata"]["name"] = f"kubetune-experiment-controller-test-{suffix}"
    binding = yaml.safe_load((BASE / "clusterrolebinding.yaml").read_text())
    binding["metadata"]["name"] = role["metadata"]["name"]
    binding["roleRef"]["name"] = role["metadata"]["name"]
    user = f"system:serviceaccount:{namespace}:experiment-controller"
    binding["subjects"] = [
        {"kind": "ServiceAccount", "name": "experiment-controller", "namespace": namespace}
    ]
    kube.create(CLUSTER_ROLES, role)
    kube.create(CLUSTER_ROLE_BINDINGS, binding)
    api = connect(cluster.kubeconfig)
    api.set_default_header("Impersonate-User", user)
    try:
        yield Kube(api)
    finally:
        for res, name in ((CLUSTER_ROLE_BINDINGS, binding), (CLUSTER_ROLES, role)):
            with contextlib.suppress(errors.NotFound):
                kube.delete(res, name["metadata"]["name"])


def test_runs_as_its_service_account_with_a_config_map_template(
    kube: Kube, service_account_kube: Kube, namespace: str, crds: None
) -> None:
    kube.create(
        CONFIGMAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "trial-templates", "namespace": namespace},
            "data": {"job.yaml": yaml.safe_dump(trial_job())},
        },
        namespace,
    )
    manifest = experiment_manifest("rbac", namespace, max_trials=2, parallel=2)
    template = manifest["spec"]["trialTemplate"]
    del template["trialSpec"]
    template["configMap"] = {
        "configMapName": "trial-templates",
        "configMapNamespace": namespace,
        "templatePath": "job.yaml",
    }
    kube.create(EXPERIMENTS, manifest, namespace)
    args = main.parser().parse_args(
        [
            "--no-leader-elect",
            "--probe-port=0",
            "--probe-address=127.0.0.1",
            f"--watch-namespace={namespace}",
        ]
    )
    controller = main.build(args)
    process = running.Process(service_account_kube, [controller], args)
    thread = threading.Thread(target=process.run, daemon=True)
    thread.start()
    try:
        wait_for("the Suggestion", lambda: kube.get_or_none(SUGGESTIONS, "rbac", namespace))
        StandInAlgorithm(kube, namespace, "rbac").fulfil()
        trials = wait_for(
            "2 trials",
            lambda: len(found := trials_of(kube, namespace, "rbac")) == 2 and found,
        )
        command = trials[0]["spec"]["runSpec"]["spec"]["template"]["spec"]["containers"][0]
        assert command["command"][-1].startswith("echo lr=0.0")
        for trial in trials:
            set_trial(kube, namespace, trial["metadata"]["name"], "Succeeded", 0.5)
        wait_for(
            "MaxTrialsReached",
            lambda: (
                last_condition(kube, namespace, "rbac")
                == ("Succeeded", "True", "ExperimentMaxTrialsReached")
            ),
        )
        assert experiment_status(kube, namespace, "rbac")["trialsSucceeded"] == 2
    finally:
        process.stop.set()
        thread.join(30)
