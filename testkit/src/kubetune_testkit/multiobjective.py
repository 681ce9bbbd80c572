"""A stand-in for the multi-objective Experiment schema where the installed CRD lacks it: the
fields `spec.objective.objectives` and `status.paretoFront` / `status.paretoFrontSize`, added
to the Experiment CRD when missing (additive: every other field, and Katib clients, unchanged).
Once the CRD in kustomize/base/crds carries them, this changes nothing.
"""

from __future__ import annotations

from kubetune.kube import CUSTOM_RESOURCE_DEFINITIONS, EXPERIMENTS, Kube
from kubetune_testkit import builders
from kubetune_testkit.waiting import wait_for

FREE_OBJECT = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def ensure_experiment_fields(kube: Kube, namespace: str) -> bool:
    """Add the fields when missing and wait until the API server keeps them (a dry-run create
    in `namespace`). Call it before starting a watcher of Experiments: a watch opened before a
    CRD changes may still see the old schema. Returns whether the CRD was changed."""
    crd = kube.get(CUSTOM_RESOURCE_DEFINITIONS, "experiments.kubeflow.org")
    changed = False
    for version in crd["spec"]["versions"]:
        root = version["schema"]["openAPIV3Schema"]["properties"]
        objective = root["spec"]["properties"]["objective"].setdefault("properties", {})
        status = root["status"].setdefault("properties", {})
        for where, field, schema in (
            (objective, "objectives", {"type": "array", "items": FREE_OBJECT}),
            (status, "paretoFront", {"type": "array", "items": FREE_OBJECT}),
            (status, "paretoFrontSize", {"type": "integer"}),
        ):
            if field not in where:
                where[field] = schema
                changed = True
    if changed:
        kube.replace(CUSTOM_RESOURCE_DEFINITIONS, crd)
    probe = builders.experiment("probe", namespace)
    probe["spec"]["objective"]["objectives"] = [{"metricName": "accuracy", "type": "maximize"}]
    wait_for(
        "spec.objective.objectives kept",
        lambda: kube.create(EXPERIMENTS, probe, namespace, dry_run=True)["spec"]["objective"].get(
            "objectives"
        ),
    )
    return changed
