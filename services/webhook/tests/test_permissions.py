"""The author of an Experiment must hold the rights kubetune uses on their behalf."""

from __future__ import annotations

import json
from typing import Any

import pytest
from webhook_cases import NS, StaticCluster, experiment, review

from kubetune import config as katib_config
from kubetune_webhook import reviewing
from kubetune_webhook.permissions import Permission, guessed_plural

ALICE = {"username": "alice", "groups": ["team-a", "system:authenticated"]}
CREATE_JOBS = Permission("create", "batch", "jobs", NS)


def _answer(cluster: StaticCluster, manifest: dict[str, Any], **kw: Any) -> dict[str, Any]:
    admission = reviewing.Admission(katib_config.default(), cluster)
    body = json.dumps(review(manifest, "Experiment", **kw)).encode()
    status, answer = admission.handle("/validate-experiment", body)
    assert status == 200
    response: dict[str, Any] = answer["response"]
    return response


def _configmap_experiment() -> tuple[dict[str, Any], StaticCluster]:
    manifest = experiment()
    template = manifest["spec"]["trialTemplate"]
    body = template.pop("trialSpec")
    body["kind"] = "TFJob"
    body["apiVersion"] = "kubeflow.org/v1"
    template["configMap"] = {
        "configMapName": "templates",
        "configMapNamespace": "kubeflow",
        "templatePath": "tf.yaml",
    }
    template["primaryContainerName"] = "training-container"
    cluster = StaticCluster(config_maps={("kubeflow", "templates"): {"tf.yaml": json.dumps(body)}})
    return manifest, cluster


def test_an_author_who_may_create_the_job_is_admitted() -> None:
    assert _answer(StaticCluster(), experiment(), user=ALICE)["allowed"] is True


def test_an_author_who_may_not_create_the_job_is_refused_with_the_permission() -> None:
    response = _answer(StaticCluster(forbidden={CREATE_JOBS}), experiment(), user=ALICE)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert f"alice may not create jobs.batch in namespace {NS}" in message
    assert "spec.trialTemplate" in message


def test_the_template_configmap_must_be_readable_by_the_author() -> None:
    manifest, cluster = _configmap_experiment()
    assert _answer(cluster, manifest, user=ALICE)["allowed"] is True
    cluster.forbidden = {Permission("get", "", "configmaps", "kubeflow", "templates")}
    message = _answer(cluster, manifest, user=ALICE)["status"]["message"]
    assert "alice may not get configmaps templates in namespace kubeflow" in message


def test_the_kind_of_a_configmap_template_is_the_one_checked() -> None:
    manifest, cluster = _configmap_experiment()
    cluster.forbidden = {Permission("create", "kubeflow.org", "tfjobs", NS)}
    message = _answer(cluster, manifest, user=ALICE)["status"]["message"]
    assert "create tfjobs.kubeflow.org" in message


def test_updates_are_not_rechecked() -> None:
    """The template cannot change after creation; the author's later rights do not matter."""
    manifest = experiment()
    changed = experiment(maxTrialCount=8)
    cluster = StaticCluster(forbidden={CREATE_JOBS})
    answer = _answer(cluster, changed, operation="UPDATE", old=manifest, user=ALICE)
    assert answer["allowed"] is True


def _widget_experiment() -> dict[str, Any]:
    manifest = experiment()
    template = manifest["spec"]["trialTemplate"]
    template["trialSpec"].update(apiVersion="example.com/v1", kind="Widget")
    template["successCondition"] = "status.done == true"
    template["failureCondition"] = "status.failed == true"
    return manifest


def test_a_kind_not_installed_is_admitted_with_a_warning_as_katib_admits_it() -> None:
    """Not a 500 asking to retry: CRD and Experiment may come in one `kubectl apply`."""
    cluster = StaticCluster(uninstalled={"Widget"})
    response = _answer(cluster, _widget_experiment(), user=ALICE)
    assert response["allowed"] is True, response
    (warning,) = response["warnings"]
    assert "kind Widget of apiVersion example.com/v1 is not installed in the cluster" in warning
    assert "JobKindNotInstalled until its operator is installed" in warning


def test_the_right_to_create_a_kind_not_installed_is_checked_on_its_guessed_resource() -> None:
    cluster = StaticCluster(
        uninstalled={"Widget"}, forbidden={Permission("create", "example.com", "widgets", NS)}
    )
    response = _answer(cluster, _widget_experiment(), user=ALICE)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    message = response["status"]["message"]
    assert f"alice may not create widgets.example.com in namespace {NS}" in message
    assert "kind Widget of apiVersion example.com/v1 is not installed" in message
    assert "install its operator first" in message


@pytest.mark.parametrize(
    ("kind", "plural"),
    [("Widget", "widgets"), ("Status", "statuses"), ("Policy", "policies"), ("TFJob", "tfjobs")],
)
def test_the_guessed_resource_is_kubernetes_guess(kind: str, plural: str) -> None:
    assert guessed_plural(kind) == plural
