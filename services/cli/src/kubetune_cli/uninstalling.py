"""`kubetune uninstall`: remove kubetune in an order that leaves nothing stuck on a finalizer.

kubetune's objects are found by the label every manifest of kustomize/base carries
(`app.kubernetes.io/part-of=kubetune`), plus what the services create at run time: their
Leases (`kubetune-*` in kubetune's namespace), the collector RoleBindings the trial-controller
makes in trial namespaces, and the algorithm Deployments and Services of Suggestions.

Two modes:

* keep (the default: nothing a user made is deleted unless asked): Experiments, Suggestions,
  Trials and the CRDs stay, so Katib can take them back. The suggestion-controller is stopped
  first, then its finalizer `kubetune.kubeflow.org/suggestion-volume` is taken off every
  Suggestion (a running controller would put it back), so deleting an Experiment later is not
  stuck. The FromVolume PVCs, their PVs and the hostPath data stay with their Experiments (the
  state a resumed Experiment needs). Deleting an Experiment later deletes its PVC (owner
  reference); its PV then follows its reclaim policy, Delete, without kubetune's finalizer:
  removed where the cluster's volume plugin can delete it, else left Released. The plan names
  those PVs.
* delete: every Experiment is deleted first, while kubetune's controllers still run and clean
  their Trials, jobs, Suggestions and volumes; then kubetune; the CRDs only with `delete_crds`,
  refused while Katib's controller is installed (the CRDs would be its too).

The namespace stays in both modes: Katib and Kubeflow share `kubeflow`.
Every wait has a deadline; when it passes the error names what is still there and the fix.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TextIO

from kubetune import errors, naming
from kubetune.kube import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CONFIGMAPS,
    CUSTOM_RESOURCE_DEFINITIONS,
    DEPLOYMENTS,
    EXPERIMENTS,
    LEASES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    NETWORK_POLICIES,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICE_ACCOUNTS,
    SERVICES,
    SUGGESTIONS,
    TRIALS,
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Kube,
    Obj,
    Resource,
)
from kubetune_cli.reading import UserError

PART_OF = "app.kubernetes.io/part-of=kubetune"
"""The label kustomize/base puts on every object of kubetune's manifests."""
COLLECTOR_BINDINGS = "app.kubernetes.io/managed-by=kubetune-trial-controller"
"""The label of the collector RoleBindings the trial-controller creates in trial namespaces."""
FINALIZER = "kubetune.kubeflow.org/suggestion-volume"
LEASE_PREFIX = "kubetune-"
DEFAULT_NAMESPACE = "kubeflow"
KATIB_CONTROLLER = "katib-controller"


ADMISSION = (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
    VALIDATING_ADMISSION_POLICIES,
)
"""Removed first: with the webhook's pods gone, its configurations would refuse pods."""
REST = (
    SERVICES,
    CONFIGMAPS,
    SECRETS,
    POD_DISRUPTION_BUDGETS,
    NETWORK_POLICIES,
    ROLE_BINDINGS,
    ROLES,
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    SERVICE_ACCOUNTS,
)
"""Removed once nothing of kubetune runs: RBAC last, so no running pod loses its rights."""


@dataclass(frozen=True)
class Ref:
    """One object to act on."""

    res: Resource
    name: str
    namespace: str | None = None

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.res.kind} {where}{self.name}"


@dataclass
class Plan:
    """What `execute` does, in order; `kept` says what stays and why."""

    delete_experiments: list[Ref] = field(default_factory=list)
    admission: list[Ref] = field(default_factory=list)
    workloads: list[Ref] = field(default_factory=list)
    finalized: list[Ref] = field(default_factory=list)
    rest: list[Ref] = field(default_factory=list)
    crds: list[Ref] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def steps(self) -> list[tuple[str, list[Ref]]]:
        return [
            ("delete every Experiment and wait for its Trials, Suggestions and volumes to go",
             self.delete_experiments),
            ("remove the admission webhooks and policies", self.admission),
            ("stop kubetune's services and algorithm pods (wait for their pods)", self.workloads),
            (f"take the finalizer {FINALIZER} off Suggestions", self.finalized),
            ("remove configuration, Services, Leases and RBAC", self.rest),
            ("remove the CRDs", self.crds),
        ]  # fmt: skip

    def text(self) -> str:
        lines = []
        for number, (title, refs) in enumerate(self.steps(), start=1):
            lines.append(f"{number}. {title}: {len(refs) or 'nothing'}")
            lines += [f"   {ref}" for ref in refs]
        lines += [f"kept: {line}" for line in self.kept]
        return "\n".join(lines)


def _listed(
    kube: Kube, res: Resource, namespace: str | None = None, selector: str | None = None
) -> list[Obj]:
    """Every object, or none when the cluster does not serve the kind (CRDs already gone, an
    API server without admission policies)."""
    try:
        return kube.list_all(res, namespace, label_selector=selector)
    except errors.NotFound:
        return []


def _ref(res: Resource, obj: Obj) -> Ref:
    meta = obj["metadata"]
    return Ref(res, meta["name"], meta.get("namespace") if res.namespaced else None)


def _refs(kube: Kube, kinds: Iterable[Resource], selector: str = PART_OF) -> list[Ref]:
    return [_ref(res, obj) for res in kinds for obj in _listed(kube, res, None, selector)]


def _owned_by_suggestion(obj: Obj) -> bool:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("kind") == "Suggestion" for o in owners)


def _algorithm_workloads(kube: Kube) -> list[Ref]:
    """The Deployments and Services the suggestion-controller made for Suggestions."""
    selector = naming.LABEL_SUGGESTION
    return [
        _ref(res, obj)
        for res in (DEPLOYMENTS, SERVICES)
        for obj in _listed(kube, res, None, selector)
        if _owned_by_suggestion(obj)
    ]


def _leases(kube: Kube, namespaces: Iterable[str]) -> list[Ref]:
    return [
        _ref(LEASES, obj)
        for namespace in sorted(set(namespaces))
        for obj in _listed(kube, LEASES, namespace)
        if obj["metadata"]["name"].startswith(LEASE_PREFIX)
    ]


def _kept_volumes(kube: Kube) -> list[str]:
    volumes = []
    for pv in _listed(kube, PERSISTENT_VOLUMES):
        annotations = pv["metadata"].get("annotations") or {}
        owner = annotations.get(naming.ANNOTATION_SUGGESTION)
        if owner:
            path = ((pv.get("spec") or {}).get("hostPath") or {}).get("path")
            where = f" (hostPath {path})" if path else ""
            volumes.append(
                f"PersistentVolume {pv['metadata']['name']}{where} of Suggestion {owner}, "
                "with its Experiment; once that is deleted, the PV's reclaim policy (Delete) "
                "applies without kubetune: if the cluster cannot delete it, it stays Released "
                f"for kubectl delete pv {pv['metadata']['name']}"
            )
    return volumes


def katib_controllers(kube: Kube) -> list[str]:
    """Katib's controller Deployments, wherever they run (the CRDs are theirs too)."""
    return [
        str(_ref(DEPLOYMENTS, d))
        for d in _listed(kube, DEPLOYMENTS)
        if d["metadata"]["name"] == KATIB_CONTROLLER
    ]


def plan(kube: Kube, *, delete_experiments: bool, delete_crds: bool) -> Plan:
    """Read the cluster and say what `execute` will do; refuses `delete_crds` when it would
    delete objects someone else still serves."""
    if delete_crds and not delete_experiments:
        raise UserError(
            "--delete-crds deletes every Experiment with its CRD: pass --delete-experiments too"
        )
    if delete_crds:
        katib = katib_controllers(kube)
        if katib:
            raise UserError(
                f"--delete-crds refused: Katib's controller runs ({', '.join(katib)}) and serves "
                "the same CRDs; uninstall Katib first, or leave out --delete-crds"
            )
    result = Plan()
    if delete_experiments:
        result.delete_experiments = [_ref(EXPERIMENTS, e) for e in _listed(kube, EXPERIMENTS)]
    result.admission = _refs(kube, ADMISSION)
    services = _refs(kube, [DEPLOYMENTS])
    result.workloads = services + ([] if delete_experiments else _algorithm_workloads(kube))
    if not delete_experiments:
        result.finalized = [
            _ref(SUGGESTIONS, s)
            for s in _listed(kube, SUGGESTIONS)
            if FINALIZER in (s["metadata"].get("finalizers") or [])
        ]
    rest = _refs(kube, REST)
    namespaces = {r.namespace for r in [*services, *rest] if r.namespace} | {DEFAULT_NAMESPACE}
    result.rest = (
        rest + _leases(kube, namespaces) + _refs(kube, [ROLE_BINDINGS], COLLECTOR_BINDINGS)
    )
    if delete_crds:
        result.crds = _refs(kube, [CUSTOM_RESOURCE_DEFINITIONS])
    else:
        result.kept.append("the CRDs experiments, suggestions and trials.kubeflow.org")
    if not delete_experiments:
        count = len(_listed(kube, EXPERIMENTS))
        result.kept.append(f"{count} Experiments with their Suggestions, Trials, jobs and PVCs")
        result.kept += _kept_volumes(kube)
    result.kept.append(
        f"the namespaces {', '.join(sorted(namespaces))} (Katib and Kubeflow share them: "
        "delete one yourself if nothing else lives there)"
    )
    return result


def _delete(kube: Kube, ref: Ref, propagation: str = "Background") -> None:
    try:
        kube.delete(ref.res, ref.name, ref.namespace, propagation=propagation)
    except errors.NotFound:
        return
    except errors.Forbidden as e:
        raise UserError(f"cannot delete {ref}: {e.message} (run as a cluster admin)") from e


def _unfinalize(kube: Kube, ref: Ref) -> None:
    """Take only kubetune's finalizer off, guarded by resourceVersion (retried on conflict)."""
    for _ in range(5):
        obj = kube.get_or_none(ref.res, ref.name, ref.namespace)
        if obj is None:
            return
        finalizers = obj["metadata"].get("finalizers") or []
        if FINALIZER not in finalizers:
            return
        patch = {
            "metadata": {
                "resourceVersion": obj["metadata"]["resourceVersion"],
                "finalizers": [f for f in finalizers if f != FINALIZER] or None,
            }
        }
        try:
            kube.patch(ref.res, ref.name, patch, ref.namespace)
            return
        except errors.Conflict:
            continue
        except errors.NotFound:
            return
    raise UserError(f"cannot take the finalizer {FINALIZER} off {ref}: it keeps changing")


def _exists(kube: Kube, ref: Ref) -> bool:
    try:
        return kube.get_or_none(ref.res, ref.name, ref.namespace) is not None
    except errors.NotFound:
        return False


def wait_gone(
    what: str, left: Callable[[], list[str]], timeout: float, fix: str, interval: float = 1.0
) -> None:
    """Poll until `left()` is empty; past the deadline, an error naming what is still there."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = left()
        if not remaining:
            return
        if time.monotonic() >= deadline:
            shown = ", ".join(remaining[:10]) + (" ..." if len(remaining) > 10 else "")
            raise UserError(
                f"{what}: still there after {timeout:.0f}s: {shown}. {fix}; then run "
                "kubetune uninstall again (it continues where it stopped)"
            )
        time.sleep(interval)


def _experiment_leftovers(kube: Kube) -> list[str]:
    return [
        str(_ref(res, obj))
        for res in (EXPERIMENTS, SUGGESTIONS, TRIALS)
        for obj in _listed(kube, res)
    ]


def execute(kube: Kube, the_plan: Plan, timeout: float, out: TextIO) -> None:
    """Carry the plan out step by step; every step is safe to repeat."""
    if the_plan.delete_experiments:
        for ref in the_plan.delete_experiments:
            _delete(kube, ref)
        print(f"deleted {len(the_plan.delete_experiments)} Experiments; waiting", file=out)
        wait_gone(
            "deleting the Experiments",
            lambda: _experiment_leftovers(kube),
            timeout,
            "Look at the Events of what is left (kubectl describe) and at the kubetune "
            "controllers' logs: they clean up, so they must still run",
        )
    for ref in the_plan.admission:
        _delete(kube, ref)
    for ref in the_plan.workloads:
        _delete(kube, ref, propagation="Foreground")
    if the_plan.workloads:
        print(f"stopping {len(the_plan.workloads)} Deployments and Services; waiting", file=out)
    wait_gone(
        "stopping kubetune's services",
        lambda: [str(r) for r in the_plan.workloads if _exists(kube, r)],
        timeout,
        "Their pods have not terminated: look at kubectl get pods -o wide and the node",
    )
    for ref in the_plan.finalized:
        _unfinalize(kube, ref)
    for ref in the_plan.rest:
        _delete(kube, ref)
    for ref in the_plan.crds:
        _delete(kube, ref)
    if the_plan.crds:
        wait_gone(
            "deleting the CRDs",
            lambda: [str(r) for r in the_plan.crds if _exists(kube, r)],
            timeout,
            "A custom resource is held by a finalizer: kubectl get <kind> -A -o yaml shows it",
        )
    for number, (title, refs) in enumerate(the_plan.steps(), start=1):
        if refs:
            print(f"{number}. {title}: {len(refs)} done", file=out)
    for line in the_plan.kept:
        print(f"kept: {line}", file=out)
