"""Pure builders of the objects the trial-controller creates: the trial's job and the collector
RoleBinding.

The job is the Trial's `spec.runSpec` with the Trial's name and namespace, the Trial as its
controlling owner (so deleting the Trial deletes the job, and job events map back to the Trial)
and the experiment/trial labels. The trial label also goes on every pod template in the job
(and on Argo's `podMetadata`): the pod webhook's objectSelector selects on it, so pods that are
not a trial's never reach the webhook. The RoleBinding lets the metrics collector sidecar, which
runs with the trial pod's service account, patch `trials/status` (contracts: Trial -> job); the
webhook narrows that to the pod's own Trial. The binding is owned by every Experiment (or
standalone Trial) that needed it, so the garbage collector deletes it with the last of them.
Neighbours: `reconciling` sends what these return.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from kubetune import naming
from kubetune.api.base import API_VERSION

Obj = dict[str, Any]

COLLECTOR_BINDING = "kubetune-pns-collector"
COLLECTOR_ROLE = "kubetune-pns-collector"
DEFAULT_SERVICE_ACCOUNT = "default"
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")


def experiment_of(trial: Mapping[str, Any]) -> str:
    """The Trial's experiment: its label, else its controlling Experiment owner, else ""."""
    meta = trial.get("metadata") or {}
    label = (meta.get("labels") or {}).get(naming.LABEL_EXPERIMENT)
    if label:
        return str(label)
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "Experiment":
            return str(ref.get("name") or "")
    return ""


def owner_reference(trial: Mapping[str, Any]) -> Obj:
    meta = trial["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": "Trial",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def job_for(trial: Mapping[str, Any]) -> Obj:
    """The job object to create for a Trial (the runSpec is never modified in place)."""
    meta = trial["metadata"]
    job: Obj = copy.deepcopy(dict((trial.get("spec") or {}).get("runSpec") or {}))
    job.pop("status", None)
    job_meta: Obj = dict(job.get("metadata") or {})
    for name in _SERVER_FIELDS:
        job_meta.pop(name, None)
    job_meta["name"] = meta["name"]
    job_meta["namespace"] = meta["namespace"]
    labels = dict(job_meta.get("labels") or {})
    experiment = experiment_of(trial)
    if experiment:
        labels[naming.LABEL_EXPERIMENT] = naming.label_value(experiment)
    labels[naming.LABEL_TRIAL] = naming.label_value(meta["name"])
    job_meta["labels"] = labels
    refs = [
        r for r in job_meta.get("ownerReferences") or [] if not r.get("controller")
    ]  # a job has one controller: the Trial
    refs.append(owner_reference(trial))
    job_meta["ownerReferences"] = refs
    job["metadata"] = job_meta
    label_pod_templates(job, naming.label_value(meta["name"]))
    return job


def _pod_templates(node: Any) -> Iterator[Obj]:
    """Every pod template (a mapping whose `spec` holds a `containers` list) in an object:
    a Job's `template`, TFJob/PyTorchJob replica templates, JobSet's nested templates..."""
    if isinstance(node, dict):
        spec = node.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            yield node
        for value in node.values():
            yield from _pod_templates(value)
    elif isinstance(node, list):
        for item in node:
            yield from _pod_templates(item)


def label_pod_templates(job: Obj, trial_label: str) -> None:
    """Put `katib.kubeflow.org/trial: <trial>` on every pod the job will create.

    Pod templates get it in their metadata; an Argo Workflow in `spec.podMetadata` and in
    each of its templates' `metadata` (they hold a `container`, not a pod spec); kinds that
    copy their own labels to their pods (Tekton) have it from the job's metadata already."""
    spec = job.get("spec")
    targets = list(_pod_templates(spec))
    if str(job.get("apiVersion", "")).startswith("argoproj.io/") and isinstance(spec, dict):
        templates = spec.get("templates")
        targets += (
            [t for t in templates if isinstance(t, dict)] if isinstance(templates, list) else []
        )
        if not isinstance(spec.get("podMetadata"), dict):
            spec["podMetadata"] = {}
        targets.append({"metadata": spec["podMetadata"]})
    for target in targets:
        meta = target.get("metadata")
        if not isinstance(meta, dict):
            meta = target["metadata"] = {}
        labels = meta.get("labels")
        meta["labels"] = {**(labels if isinstance(labels, dict) else {})}
        meta["labels"][naming.LABEL_TRIAL] = trial_label


def is_owned_by(job: Mapping[str, Any], trial: Mapping[str, Any]) -> bool:
    uid = (trial.get("metadata") or {}).get("uid")
    refs = (job.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("kind") == "Trial" for r in refs)


def of_earlier_trial(job: Mapping[str, Any], trial: Mapping[str, Any]) -> bool:
    """Whether the job's controller is a Trial of this Trial's name with another uid: one that
    was deleted (two Trials of one name cannot exist at once), whose job the garbage collector
    has yet to delete. Seen when an Experiment recreates a deleted Trial under its name, e.g.
    after a take-over from Katib, whose Suggestion keeps every assignment."""
    meta = trial.get("metadata") or {}
    refs = (job.get("metadata") or {}).get("ownerReferences") or []
    return any(
        isinstance(r, Mapping)
        and r.get("controller")
        and r.get("kind") == "Trial"
        and str(r.get("apiVersion", "")).startswith("kubeflow.org/")
        and r.get("name") == meta.get("name")
        and r.get("uid") != meta.get("uid")
        for r in refs
    )


def _pod_specs(node: Any) -> Iterator[Mapping[str, Any]]:
    """Every pod spec (a mapping with a `containers` list) anywhere in an object."""
    if isinstance(node, Mapping):
        if isinstance(node.get("containers"), list):
            yield node
        for value in node.values():
            yield from _pod_specs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _pod_specs(item)


def _named_accounts(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        value = node.get("serviceAccountName")
        if isinstance(value, str) and value:
            yield value
        for child in node.values():
            yield from _named_accounts(child)
    elif isinstance(node, list):
        for item in node:
            yield from _named_accounts(item)


def service_accounts(run_spec: Mapping[str, Any] | None) -> list[str]:
    """The service accounts the runSpec's pods run as, sorted.

    Every `serviceAccountName` anywhere in the object counts (pod templates, and job kinds
    like Argo's Workflow that name it outside the pod template); `default` is added when a pod
    spec names none, or when nothing names any.
    """
    spec = run_spec or {}
    named = set(_named_accounts(spec))
    pods = list(_pod_specs(spec))
    if not named or any(not p.get("serviceAccountName") for p in pods):
        named.add(DEFAULT_SERVICE_ACCOUNT)
    return sorted(named)


def subject(namespace: str, account: str) -> Obj:
    return {"kind": "ServiceAccount", "name": account, "namespace": namespace}


def binding_owner(trial: Mapping[str, Any]) -> Obj:
    """What keeps the binding alive for this Trial: its Experiment, else the Trial itself.

    Not a controller and no blockOwnerDeletion: the binding has many owners, and deleting an
    Experiment must never wait for it."""
    meta = trial.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "Experiment" and ref.get("controller") and ref.get("uid"):
            return {
                "apiVersion": str(ref.get("apiVersion") or API_VERSION),
                "kind": "Experiment",
                "name": str(ref.get("name") or ""),
                "uid": str(ref["uid"]),
            }
    return {"apiVersion": API_VERSION, "kind": "Trial", "name": meta["name"], "uid": meta["uid"]}


def collector_binding(namespace: str, accounts: list[str], owner: Obj | None = None) -> Obj:
    """The RoleBinding of ClusterRole `kubetune-pns-collector` to the given service accounts."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": COLLECTOR_BINDING,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "kubetune-trial-controller"},
            **({"ownerReferences": [owner]} if owner else {}),
        },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": COLLECTOR_ROLE,
        },
        "subjects": [subject(namespace, a) for a in accounts],
    }


def missing_subjects(binding: Mapping[str, Any], namespace: str, accounts: list[str]) -> list[Obj]:
    """The subjects `accounts` need that the binding does not have yet (it only ever grows)."""
    have = {
        (s.get("kind"), s.get("name"), s.get("namespace") or namespace)
        for s in binding.get("subjects") or []
    }
    return [subject(namespace, a) for a in accounts if ("ServiceAccount", a, namespace) not in have]


def missing_owner(binding: Mapping[str, Any], owner: Obj) -> bool:
    """True when the binding does not list `owner` (by uid) among its owners yet."""
    refs = (binding.get("metadata") or {}).get("ownerReferences") or []
    return all(r.get("uid") != owner["uid"] for r in refs)
