"""The collector RoleBinding lives as long as an Experiment needs it (issue 13, defect 3).

It is owned by every Experiment whose Trials needed it, so the garbage collector of the real
kube-controller-manager deletes it with the last of them.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubetune import errors
from kubetune.kube import EXPERIMENTS, ROLE_BINDINGS, TRIALS, Kube
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration
BINDING = "kubetune-pns-collector"


def _experiment(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    body = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": name}}
    experiment: dict[str, Any] = kube.create(EXPERIMENTS, body, ns)
    return experiment


def _trial_of(kube: Kube, ns: str, experiment: dict[str, Any]) -> None:
    name = experiment["metadata"]["name"]
    body = trial(f"{name}-t1", batch_job("true"), experiment=name)
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Experiment",
            "name": name,
            "uid": experiment["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    kube.create(TRIALS, body, ns)


def _owners(kube: Kube, ns: str) -> set[str] | None:
    binding = kube.get_or_none(ROLE_BINDINGS, BINDING, ns)
    if binding is None:
        return None
    return {r["name"] for r in binding["metadata"].get("ownerReferences") or []}


def test_the_binding_goes_with_the_last_experiment(
    kube: Kube, namespace: str, controller: Any
) -> None:
    controller()
    first, second = _experiment(kube, namespace, "e1"), _experiment(kube, namespace, "e2")
    _trial_of(kube, namespace, first)
    _trial_of(kube, namespace, second)
    wait_for(
        "both Experiments to own the binding", lambda: _owners(kube, namespace) == {"e1", "e2"}
    )

    kube.delete(EXPERIMENTS, "e1", namespace)
    wait_for("e1's Trial to go", lambda: kube.get_or_none(TRIALS, "e1-t1", namespace) is None)
    # e2 still needs it: the binding stays (the dangling owner is dropped by the collector).
    wait_for("e1 dropped from the owners", lambda: _owners(kube, namespace) == {"e2"})

    kube.delete(EXPERIMENTS, "e2", namespace)
    wait_for(
        "the binding to be deleted with the last Experiment",
        lambda: _owners(kube, namespace) is None,
    )
    with pytest.raises(errors.NotFound):
        kube.get(ROLE_BINDINGS, BINDING, namespace)
