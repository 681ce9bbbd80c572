"""The owner chain that proves a pod runs for a Trial, over objects held in a dict (pure; the
API server's side is tested by the webhook's and db-manager's integration tests)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetune import trialpods

Obj = dict[str, Any]
TEKTON = "tekton.dev/v1"


def _ref(api_version: str, kind: str, name: str, uid: str, controller: bool = True) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": controller,
    }


def _obj(api_version: str, kind: str, name: str, uid: str, *refs: Obj, **spec: Any) -> Obj:
    meta = {"name": name, "uid": uid, "ownerReferences": list(refs)}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


class Objects:
    def __init__(self, *objs: Obj) -> None:
        self.objs = {(o["kind"], o["metadata"]["name"]): o for o in objs}

    def pod(self, namespace: str, name: str) -> Obj | None:
        return self.objs.get(("Pod", name))

    def owner(
        self, api_version: str, kind: str, name: str, namespace: str, uid: str = ""
    ) -> Obj | None:
        return self.objs.get((kind, name))


def _pipeline() -> tuple[Obj, Objects]:
    """Trial t runs PipelineRun t, whose TaskRun t-task made pod t-pod (two hops)."""
    trial = _obj(
        "kubeflow.org/v1beta1",
        "Trial",
        "t",
        "ut",
        runSpec={"apiVersion": TEKTON, "kind": "PipelineRun"},
    )
    run = _obj(TEKTON, "PipelineRun", "t", "ur", _ref("kubeflow.org/v1beta1", "Trial", "t", "ut"))
    task = _obj(TEKTON, "TaskRun", "t-task", "uk", _ref(TEKTON, "PipelineRun", "t", "ur"))
    pod = _obj("v1", "Pod", "t-pod", "up", _ref(TEKTON, "TaskRun", "t-task", "uk"))
    return pod, Objects(trial, run, task, pod)


def test_the_controller_chain_through_any_kinds_reaches_the_trial() -> None:
    pod, objects = _pipeline()
    assert trialpods.trial_of_pod(pod, "ns", objects) == ("t", "ut")


def _two_controllers(pod: Obj) -> None:
    pod["metadata"]["ownerReferences"].append(_ref(TEKTON, "TaskRun", "other", "uo"))


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda pod, o: pod["metadata"].update(ownerReferences=[]), id="no-owner"),
        pytest.param(lambda pod, o: _two_controllers(pod), id="two-controllers"),
        pytest.param(
            lambda pod, o: pod["metadata"]["ownerReferences"][0].update(controller=False),
            id="not-controller",
        ),
        pytest.param(
            lambda pod, o: o.objs[("TaskRun", "t-task")]["metadata"].update(uid="new"),
            id="recreated-owner",
        ),
        pytest.param(
            lambda pod, o: o.objs[("Trial", "t")]["spec"].update(runSpec={"kind": "Job"}),
            id="not-the-trials-kind",
        ),
        pytest.param(
            lambda pod, o: o.objs[("Trial", "t")]["metadata"].update(uid="other"),
            id="another-trial-of-that-name",
        ),
    ],
)
def test_a_chain_the_trial_controller_did_not_make_reaches_no_trial(forge: Any) -> None:
    pod, objects = _pipeline()
    pod = copy.deepcopy(pod)
    forge(pod, objects)
    assert trialpods.trial_of_pod(pod, "ns", objects) is None


def test_a_pod_controlled_by_the_trial_itself_is_no_trials() -> None:
    """The trial-controller never creates pods: such a reference was written by someone else."""
    _, objects = _pipeline()
    pod = _obj("v1", "Pod", "forger", "uf", _ref("kubeflow.org/v1beta1", "Trial", "t", "ut"))
    assert trialpods.trial_of_pod(pod, "ns", objects) is None
