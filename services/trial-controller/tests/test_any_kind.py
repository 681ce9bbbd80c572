"""Trials of other kinds: a TFJob and an Argo Workflow (real CRDs, stand-in operators) and a
custom kind of our own with a successCondition on its own status field."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune.kube import PODS, ROLE_BINDINGS, SERVICE_ACCOUNTS, TRIALS, Kube
from kubetune_testkit.builders import trial
from kubetune_testkit.conditions import conditions_of, is_true
from kubetune_testkit.crds import WIDGET_CRD, WIDGET_FAILURE, WIDGET_KIND, WIDGET_SUCCESS, WIDGETS
from kubetune_testkit.standins import running
from kubetune_testkit.standins.argo import WORKFLOWS, ArgoWorkflowStandIn
from kubetune_testkit.standins.services import observe
from kubetune_testkit.standins.tfjob import TFJOBS, TFJobOperatorStandIn
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration
ARGO_SUCCESS = 'status.[@this].#(phase=="Succeeded")#'
ARGO_FAILURE = 'status.[@this].#(phase=="Failed")#'


def _ended(kube: Kube, ns: str, name: str, type_: str, timeout: float = 90) -> dict[str, Any]:
    result: dict[str, Any] = wait_for(
        f"{name} {type_}",
        lambda: is_true(t := kube.get_or_none(TRIALS, name, ns), type_) and t,
        timeout,
    )
    return result


def _tfjob(command: str) -> dict[str, Any]:
    def replica(replicas: int) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "restartPolicy": "Never",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "tensorflow/tensorflow:2.16.1",
                            "command": ["sh", "-c", command],
                        }
                    ]
                }
            },
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {},
        "spec": {"tfReplicaSpecs": {"Chief": replica(1), "Worker": replica(2)}},
    }


@pytest.mark.parametrize(("command", "final"), [("sleep 1", "Succeeded"), ("exit 2", "Failed")])
def test_tfjob_through_standin_operator(
    kube: Kube, namespace: str, controller: Any, thirdparty_crds: Any, command: str, final: str
) -> None:
    thirdparty_crds("kubeflow.org_tfjobs.yaml")
    controller()  # the default allow-list has TFJob.v1.kubeflow.org
    with running(TFJobOperatorStandIn(kube, namespace).controller, kube):
        kube.create(TRIALS, trial("tf", _tfjob(command), retain=False), namespace)
        wait_for("Running", lambda: is_true(kube.get_or_none(TRIALS, "tf", namespace), "Running"))
        pods = wait_for(
            "3 replica pods",
            lambda: (
                (
                    p := kube.list_all(
                        PODS, namespace, label_selector="training.kubeflow.org/job-name=tf"
                    )
                )
                and len(p) == 3
                and p
            ),
        )
        roles = {
            p["metadata"]["name"]: p["metadata"]["labels"].get("training.kubeflow.org/job-role")
            for p in pods
        }
        assert roles == {"tf-chief-0": "master", "tf-worker-0": None, "tf-worker-1": None}
        if final == "Succeeded":
            wait_for(
                "TFJob Succeeded",
                lambda: any(
                    c["type"] == "Succeeded" and c["status"] == "True"
                    for c in (
                        (kube.get(TFJOBS, "tf", namespace).get("status") or {}).get("conditions")
                        or []
                    )
                ),
                90,
            )
            observe(kube, namespace, "tf", "0.8")
        done = _ended(kube, namespace, "tf", final)
        reason = conditions_of(done)[final]["reason"]
        assert reason == f"Trial{final}. Job reason: TFJob{final}"
        wait_for(
            "TFJob deleted (retain false)",
            lambda: kube.get_or_none(TFJOBS, "tf", namespace) is None,
            60,
        )


def _workflow(command: str, account: str) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {},
        "spec": {
            "serviceAccountName": account,
            "entrypoint": "hp-tuning",
            "templates": [
                {
                    "name": "hp-tuning",
                    "metadata": {"labels": {"katib.kubeflow.org/model-training": "true"}},
                    "container": {
                        "name": "",
                        "image": "docker/whalesay:latest",
                        "command": ["sh", "-c", command],
                    },
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("command", "final"), [("echo accuracy=0.9", "Succeeded"), ("exit 1", "Failed")]
)
def test_argo_workflow_through_standin_operator(
    kube: Kube, namespace: str, controller: Any, thirdparty_crds: Any, command: str, final: str
) -> None:
    thirdparty_crds("argoproj.io_workflows.yaml")
    kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": "argo-trials"}}, namespace)
    controller()  # the default allow-list has Workflow.v1alpha1.argoproj.io
    with running(ArgoWorkflowStandIn(kube, namespace).controller, kube):
        kube.create(
            TRIALS,
            trial(
                "wf", _workflow(command, "argo-trials"), success=ARGO_SUCCESS, failure=ARGO_FAILURE
            ),
            namespace,
        )
        pod = wait_for(
            "the workflow pod", lambda: kube.get_or_none(PODS, "wf-hp-tuning", namespace)
        )
        assert [c["name"] for c in pod["spec"]["containers"]] == ["wait", "main"]
        binding = kube.get(ROLE_BINDINGS, "kubetune-pns-collector", namespace)
        assert [s["name"] for s in binding["subjects"]] == ["argo-trials"]
        if final == "Succeeded":
            wait_for(
                "Workflow Succeeded",
                lambda: (
                    (kube.get(WORKFLOWS, "wf", namespace).get("status") or {}).get("phase")
                    == "Succeeded"
                ),
                90,
            )
            running_cond = conditions_of(kube.get(TRIALS, "wf", namespace))["Running"]
            assert running_cond["status"] == "True"  # no success without an observation
            observe(kube, namespace, "wf", "0.9")
        done = _ended(kube, namespace, "wf", final)
        assert [c["type"] for c in done["status"]["conditions"]] == ["Created", "Running", final]
        assert kube.get_or_none(WORKFLOWS, "wf", namespace) is not None  # retain: true


@pytest.mark.parametrize(
    ("state", "final", "reason"),
    [
        (
            {"state": "Done", "reason": "AllPolished"},
            "Succeeded",
            "TrialSucceeded. Job reason: AllPolished",
        ),
        (
            {"state": "Broken", "reason": "GearsJammed", "message": "jam"},
            "Failed",
            "TrialFailed. Job reason: GearsJammed",
        ),
    ],
)
def test_custom_kind_with_custom_conditions(
    kube: Kube,
    namespace: str,
    controller: Any,
    thirdparty_crds: Any,
    state: dict[str, str],
    final: str,
    reason: str,
) -> None:
    thirdparty_crds(WIDGET_CRD)
    controller("--trial-resources", f"Job.v1.batch,{WIDGET_KIND}")
    widget = {
        "apiVersion": "standin.kubetune.test/v1",
        "kind": "Widget",
        "metadata": {},
        "spec": {"size": 3},
    }
    kube.create(
        TRIALS, trial("w", widget, success=WIDGET_SUCCESS, failure=WIDGET_FAILURE), namespace
    )
    wait_for("Running", lambda: is_true(kube.get_or_none(TRIALS, "w", namespace), "Running"))
    message = conditions_of(kube.get(TRIALS, "w", namespace))["Running"]["message"]
    assert "waiting for Widget w to match successCondition" in message and WIDGET_SUCCESS in message
    # The test plays the Widget's operator: one status write.
    kube.patch(WIDGETS, "w", {"status": {"state": "Working"}}, namespace, subresource="status")
    observe(kube, namespace, "w", "0.4")
    assert not is_true(kube.get(TRIALS, "w", namespace), "Succeeded")
    kube.patch(WIDGETS, "w", {"status": state}, namespace, subresource="status")
    done = _ended(kube, namespace, "w", final)
    assert conditions_of(done)[final]["reason"] == reason
