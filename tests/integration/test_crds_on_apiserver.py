"""The generated CRDs are accepted by a real API server and store every example unchanged."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubetune.kube import EXPERIMENTS, SUGGESTIONS, TRIALS, Kube
from kubetune_testkit.examples import examples
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

RESOURCES = {"Experiment": EXPERIMENTS, "Suggestion": SUGGESTIONS, "Trial": TRIALS}


EXAMPLES = examples()


@pytest.mark.parametrize("manifest", [d for _, d in EXAMPLES], ids=[i for i, _ in EXAMPLES])
def test_example_is_stored_without_pruning(
    crds: None, kube: Kube, namespace: str, manifest: dict[str, Any]
) -> None:
    body = copy.deepcopy(manifest)
    status = body.pop("status", None)
    meta = body["metadata"]
    assert isinstance(meta, dict)
    meta["namespace"] = namespace
    meta.pop("ownerReferences", None)
    resource = RESOURCES[str(body["kind"])]
    stored = kube.create(resource, body, namespace)
    assert json.dumps(stored["spec"], sort_keys=True) == json.dumps(body["spec"], sort_keys=True)
    if status is not None:
        written = kube.patch(
            resource, meta["name"], {"status": status}, namespace, subresource="status"
        )
        assert written["status"] == status


def test_kubectl_get_shows_the_printer_columns(
    crds: None, cluster: ClusterHandle, kube: Kube, namespace: str
) -> None:
    trial = next(d for _, d in EXAMPLES if d["kind"] == "Trial")
    body = copy.deepcopy(trial)
    status = body.pop("status")
    body["metadata"]["namespace"] = namespace
    kube.create(TRIALS, body, namespace)
    kube.patch(
        TRIALS,
        body["metadata"]["name"],
        {"status": status},
        namespace,
        subresource="status",
    )
    out = cluster.kubectl("get", "trials", "-n", namespace).stdout
    header, row = out.splitlines()[:2]
    assert header.split()[:3] == ["NAME", "TYPE", "STATUS"]
    assert row.split()[1:3] == ["Succeeded", "True"]
    assert "trial" in cluster.kubectl("get", "katib", "-n", namespace).stdout
