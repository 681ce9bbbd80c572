"""Katib's names collide; each Suggestion still gets objects of its own, and never another's.

`<suggestion>-<algorithm>` is ambiguous (algorithm names contain `-`): `e1` with multivariate-tpe
and `e1-multivariate` with tpe derive one Deployment name, and the PV name
`<suggestion>-<algorithm>-<namespace>` collides across namespaces (`x`/random in `tpe-<ns>` and
`x-random`/tpe in `<ns>`). On a real cluster with the real controller and algorithm pods.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from kubetune import errors, naming
from kubetune.api.suggestion import Suggestion
from kubetune.config import default as default_config
from kubetune.kube import (
    DEPLOYMENTS,
    EXPERIMENTS,
    NAMESPACES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    SERVICE_ACCOUNTS,
    SERVICES,
    Kube,
    Obj,
)
from kubetune.runtime import Context
from kubetune_suggestion_controller import composing, owning, reconciling
from kubetune_testkit.conditions import is_true
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.standins.services import StandInExperimentController
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}},
]


def _running(standin: StandInExperimentController) -> bool:
    return is_true(standin.suggestion(), "Running")


def _owned_by(obj: Obj, owner: Obj) -> bool:
    refs = obj["metadata"].get("ownerReferences") or []
    return any(r.get("controller") and r["uid"] == owner["metadata"]["uid"] for r in refs)


@pytest.fixture
def other_namespace(kube: Kube, namespace: str) -> Iterator[str]:
    """`tpe-<namespace>`: `x`/random there and `x-random`/tpe in `namespace` derive one PV."""
    name = f"tpe-{namespace}"
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    wait_for(
        "the namespace's default ServiceAccount",
        lambda: kube.get_or_none(SERVICE_ACCOUNTS, "default", name),
    )
    yield name
    with contextlib.suppress(errors.NotFound):
        kube.delete(NAMESPACES, name)


def test_two_suggestions_whose_katib_names_collide_both_run(
    kube: Kube, namespace: str, controller: ServiceProcess
) -> None:
    katib = naming.suggestion_deployment_name("e1", "multivariate-tpe")
    assert katib == naming.suggestion_deployment_name("e1-multivariate", "tpe")
    first = StandInExperimentController(kube, namespace, "e1")
    second = StandInExperimentController(kube, namespace, "e1-multivariate")
    first.create("multivariate-tpe", "Never", PARAMETERS, requests=1)
    wait_for("e1 Running", lambda: _running(first), 120)
    second.create("tpe", "Never", PARAMETERS, requests=1)
    wait_for("e1-multivariate Running", lambda: _running(second), 120)

    one, two = first.suggestion(), second.suggestion()
    assert _owned_by(kube.get(DEPLOYMENTS, katib, namespace), one)  # the first keeps Katib's
    recorded = two["metadata"]["annotations"][naming.NAME_ANNOTATIONS["Deployment"]]
    assert recorded != katib
    assert _owned_by(kube.get(DEPLOYMENTS, recorded, namespace), two)
    service = two["metadata"]["annotations"][naming.NAME_ANNOTATIONS["Service"]]
    assert _owned_by(kube.get(SERVICES, service, namespace), two)
    for standin in (first, second):  # each one's own algorithm wrote its assignment
        assert len(standin.wait_assignments(1)) == 1
        (pod,) = standin.algorithm_pods()
        assert pod["metadata"]["labels"][naming.LABEL_SUGGESTION] == standin.name


def test_from_volume_suggestions_whose_pv_names_collide_across_namespaces(
    kube: Kube,
    namespace: str,
    other_namespace: str,
    start_controller: Callable[[str], ServiceProcess],
    host_prefix: Path,
) -> None:
    katib = naming.suggestion_pv_name("x", "random", other_namespace)
    assert katib == naming.suggestion_pv_name("x-random", "tpe", namespace)
    start_controller(other_namespace)
    start_controller(namespace)
    first = StandInExperimentController(kube, other_namespace, "x")
    second = StandInExperimentController(kube, namespace, "x-random")
    first.create("random", "FromVolume", PARAMETERS, {"random_state": "1"}, requests=1)
    wait_for("x Running", lambda: _running(first), 120)
    second.create("tpe", "FromVolume", PARAMETERS, requests=1)
    wait_for("x-random Running", lambda: _running(second), 120)

    one, two = first.suggestion(), second.suggestion()
    pv_one = kube.get(PERSISTENT_VOLUMES, katib)
    assert (
        pv_one["metadata"]["annotations"][naming.ANNOTATION_SUGGESTION_UID]
        == (one["metadata"]["uid"])
    )
    assert pv_one["spec"]["claimRef"]["namespace"] == other_namespace
    other = two["metadata"]["annotations"][naming.NAME_ANNOTATIONS["PersistentVolume"]]
    pv_two = kube.get(PERSISTENT_VOLUMES, other)
    assert pv_two["metadata"]["annotations"][naming.ANNOTATION_SUGGESTION] == (
        f"{namespace}/x-random"
    )
    assert pv_two["spec"]["claimRef"]["namespace"] == namespace
    assert pv_two["spec"]["hostPath"]["path"] == str(host_prefix / other)
    claim = kube.get(PERSISTENT_VOLUME_CLAIMS, "x-random-tpe", namespace)
    assert claim["spec"]["volumeName"] == other

    # Each finalizer deletes its own PV only.
    kube.delete(EXPERIMENTS, "x", other_namespace)
    wait_for("x's PV gone", lambda: kube.get_or_none(PERSISTENT_VOLUMES, katib) is None, 120)
    assert kube.get(PERSISTENT_VOLUMES, other)["metadata"]["uid"] == pv_two["metadata"]["uid"]
    kube.delete(EXPERIMENTS, "x-random", namespace)
    wait_for("x-random's PV gone", lambda: kube.get_or_none(PERSISTENT_VOLUMES, other) is None, 120)


def _foreign_deployment(name: str, namespace: str) -> Obj:
    """A Deployment of someone else's (no pods: zero replicas) under the Katib name."""
    labels = {"app": "someone-else"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "someone/else:1"}]},
            },
        },
    }


def _untouched(after: Obj, before: Obj) -> None:
    """Same object, same spec (generation), no owner added, labels unchanged (its status is the
    deployment controller's to write)."""
    for key in ("uid", "generation", "labels"):
        assert after["metadata"].get(key) == before["metadata"].get(key), key
    assert not after["metadata"].get("ownerReferences")


def test_an_object_of_another_owner_is_not_adopted(
    kube: Kube, namespace: str, controller: ServiceProcess
) -> None:
    foreign = kube.create(DEPLOYMENTS, _foreign_deployment("exp-random", namespace), namespace)
    standin = StandInExperimentController(kube, namespace, "exp")
    standin.create("random", "Never", PARAMETERS, {"random_state": "1"}, requests=1)
    wait_for("Suggestion Running", lambda: _running(standin), 120)

    suggestion = standin.suggestion()
    after = kube.get(DEPLOYMENTS, "exp-random", namespace)
    _untouched(after, foreign)
    chosen = suggestion["metadata"]["annotations"][naming.NAME_ANNOTATIONS["Deployment"]]
    uid = suggestion["metadata"]["uid"]
    assert chosen == naming.owned_name("exp-random", naming.LABEL_LIMIT, namespace, "exp", uid)
    assert _owned_by(kube.get(DEPLOYMENTS, chosen, namespace), suggestion)
    # Katib's Service name was free: kept.
    assert _owned_by(kube.get(SERVICES, "exp-random", namespace), suggestion)

    # Ending the Suggestion removes its own Deployment only.
    standin.set_experiment([("Succeeded", "True", "ExperimentMaxTrialsReached")])
    wait_for(
        "its Deployment deleted", lambda: kube.get_or_none(DEPLOYMENTS, chosen, namespace) is None
    )
    assert (
        kube.get(DEPLOYMENTS, "exp-random", namespace)["metadata"]["uid"]
        == (foreign["metadata"]["uid"])
    )


def test_create_leaves_an_object_made_meanwhile_by_another_owner(
    kube: Kube, namespace: str, installed: None
) -> None:
    """The race: Katib's name was free when read, another owner's object came before the
    create. The AlreadyExists is not taken as success, and the object is not touched."""
    foreign = kube.create(DEPLOYMENTS, _foreign_deployment("exp-random", namespace), namespace)
    suggestion = Suggestion.model_validate(
        {
            "metadata": {"name": "exp", "namespace": namespace, "uid": "u-exp"},
            "spec": {"algorithm": {"algorithmName": "random"}, "requests": 1},
        }
    )
    entry = default_config().suggestion("random")
    body = composing.deployment(suggestion, entry, False)
    ctx = cast(Context, SimpleNamespace(kube=kube, log=logging.getLogger("test")))
    assert not reconciling.Reconciler._create(ctx, suggestion, body)
    after = kube.get(DEPLOYMENTS, "exp-random", namespace)
    _untouched(after, foreign)
    assert not owning.owns(suggestion, after)
