"""Reconcile one Suggestion: its algorithm Deployment/Service/PVC/PV and its conditions.

Neighbours: `composing` builds the objects; `main` wires this into `kubetune.runtime`. Writes:
the objects it owns, the Suggestion's finalizer (only with a PV), and of the Suggestion status
only `conditions`, `startTime`, `completionTime`, `lastReconcileTime` (contract), in one merge
patch per pass.

Completion and restart follow the owning Experiment (contract): Experiment ended and policy
Never/FromVolume -> Running=False, DeploymentReady=False ("Suggestion is succeeded"), Succeeded=True
("Experiment is succeeded"), Deployment and Service deleted (FromVolume keeps PVC/PV). A
Succeeded FromVolume Suggestion whose Experiment is Restarting -> Running=False ("Experiment is
restarting", "Suggestion is not running"), Succeeded removed, Deployment and Service recreated on
the same PVC -> DeploymentReady -> Running. LongRunning is never completed here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from dataclasses import dataclass
from typing import Any

from kubetune import algorithmsettings, conditions, errors
from kubetune.api.base import Condition
from kubetune.api.experiment import Experiment, ResumePolicy
from kubetune.api.suggestion import Suggestion
from kubetune.conditions import (
    FALSE,
    TRUE,
    ExperimentCondition,
    SuggestionCondition,
    SuggestionReason,
)
from kubetune.config import ConfigError, KatibConfig
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, Kube, Resource
from kubetune.runtime import Key, Result
from kubetune_suggestion_controller import composing

log = logging.getLogger(__name__)

DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
SERVICES = Resource("", "v1", "services", "Service")
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
FINALIZER = "kubetune.kubeflow.org/suggestion-volume"

MSG_NEVER = "Suggestion is succeeded, can't be restarted"
MSG_FROM_VOLUME = "Suggestion is succeeded, suggestion volume is not deleted, can be restarted"


def experiment_state(experiment: Experiment | None) -> str:
    """ "completed", "restarting" or "" from the Experiment's conditions.

    Level-based: a restart removes Succeeded/Failed and leaves Restarting=True for good, and the
    experiment-controller moves on to Running within milliseconds, so "restarting" means "not
    completed and restarted at some point", never "Restarting is the last condition".
    """
    conds = experiment.status.conditions if experiment and experiment.status else None
    if conditions.is_true(conds, ExperimentCondition.SUCCEEDED) or conditions.is_true(
        conds, ExperimentCondition.FAILED
    ):
        return "completed"
    if conditions.is_true(conds, ExperimentCondition.RESTARTING):
        return "restarting"
    return ""


def policy_of(suggestion: Suggestion, experiment: Experiment | None) -> ResumePolicy:
    policy = suggestion.spec.resume_policy or (
        experiment.spec.resume_policy if experiment else None
    )
    return policy or ResumePolicy.NEVER


def deployment_available(deployment: dict[str, Any] | None) -> bool:
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Available":
            return bool(condition.get("status") == TRUE and status.get("readyReplicas"))
    return bool(status.get("readyReplicas"))


@dataclass
class Reconciler:
    kube: Kube
    config: KatibConfig

    # -- small helpers -------------------------------------------------------------------------

    def _ensure(self, res: Resource, body: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        existing = self.kube.get_or_none(res, body["metadata"]["name"], namespace)
        if existing is not None:
            return existing
        try:
            return self.kube.create(res, body, namespace)
        except errors.AlreadyExists:
            return self.kube.get(res, body["metadata"]["name"], namespace)

    def _delete(self, res: Resource, name: str, namespace: str | None) -> None:
        with contextlib.suppress(errors.NotFound):
            self.kube.delete(res, name, namespace, propagation="Background")

    def _delete_runtime(self, suggestion: Suggestion) -> None:
        name = composing.deployment(suggestion, _blank_entry(suggestion), False)["metadata"]["name"]
        self._delete(DEPLOYMENTS, name, suggestion.metadata.namespace)
        self._delete(SERVICES, name, suggestion.metadata.namespace)

    def _write(self, suggestion: Suggestion, conds: list[Condition], extra: dict[str, Any]) -> None:
        status: dict[str, Any] = {
            "conditions": [c.to_wire() for c in conds],
            "lastReconcileTime": conditions.rfc3339_now(),
            **extra,
        }
        self.kube.patch(
            SUGGESTIONS,
            suggestion.metadata.name or "",
            {
                "metadata": {"resourceVersion": suggestion.metadata.resource_version},
                "status": status,
            },
            suggestion.metadata.namespace,
            subresource="status",
        )

    # -- the pass ------------------------------------------------------------------------------

    def reconcile(self, key: Key) -> Result | None:
        raw = self.kube.get_or_none(SUGGESTIONS, key.name, key.namespace)
        if raw is None:
            return Result.done()
        suggestion = Suggestion.model_validate(raw)
        if suggestion.metadata.deletion_timestamp:
            self._finalize(suggestion)
            return Result.done()
        experiment_raw = self.kube.get_or_none(EXPERIMENTS, key.name, key.namespace)
        experiment = Experiment.model_validate(experiment_raw) if experiment_raw else None
        status = suggestion.status
        conds = list((status.conditions if status else None) or [])
        policy = policy_of(suggestion, experiment)
        state = experiment_state(experiment)
        algorithm = composing.algorithm_of(suggestion)

        if conditions.is_true(conds, SuggestionCondition.FAILED):
            self._delete_runtime(suggestion)
            return Result.done()
        if conditions.is_true(conds, SuggestionCondition.SUCCEEDED):
            if state == "restarting" and policy == ResumePolicy.FROM_VOLUME:
                conds, _ = conditions.set_condition(
                    conds,
                    SuggestionCondition.RUNNING,
                    FALSE,
                    SuggestionReason.RESTARTING,
                    "Suggestion is not running",
                )
                conds, _ = conditions.remove_condition(conds, SuggestionCondition.SUCCEEDED)
                self._write(suggestion, conds, {})
                log.info("suggestion %s restarting from its volume", key)
                return Result.done()
            self._delete_runtime(suggestion)
            return Result.done()
        if state == "completed" and policy in (ResumePolicy.NEVER, ResumePolicy.FROM_VOLUME):
            for type_ in (SuggestionCondition.RUNNING, SuggestionCondition.DEPLOYMENT_READY):
                conds, _ = conditions.set_condition(
                    conds,
                    type_,
                    FALSE,
                    SuggestionReason.SUGGESTION_SUCCEEDED,
                    "Suggestion is succeeded",
                )
            message = MSG_FROM_VOLUME if policy == ResumePolicy.FROM_VOLUME else MSG_NEVER
            conds, _ = conditions.set_condition(
                conds,
                SuggestionCondition.SUCCEEDED,
                TRUE,
                SuggestionReason.EXPERIMENT_SUCCEEDED,
                message,
            )
            self._write(suggestion, conds, {"completionTime": conditions.rfc3339_now()})
            self._delete_runtime(suggestion)
            return Result.done()

        if not conditions.find(conds, SuggestionCondition.CREATED):
            conds, _ = conditions.set_condition(
                conds,
                SuggestionCondition.CREATED,
                TRUE,
                SuggestionReason.CREATED,
                "Suggestion is created",
            )
            self._write(suggestion, conds, {"startTime": conditions.rfc3339_now()})
            return Result.done()

        problems = algorithmsettings.validate(
            algorithm,
            suggestion.spec.algorithm.algorithm_settings if suggestion.spec.algorithm else None,
            experiment.spec.parameters if experiment else None,
        )
        try:
            entry = self.config.suggestion(algorithm)
        except ConfigError as e:
            problems.append(str(e))
        if problems:
            conds, _ = conditions.set_condition(
                conds,
                SuggestionCondition.FAILED,
                TRUE,
                SuggestionReason.FAILED,
                "Validation failed: " + "; ".join(problems),
            )
            self._write(suggestion, conds, {})
            return Result.done()

        namespace = suggestion.metadata.namespace
        volume = policy == ResumePolicy.FROM_VOLUME
        if volume:
            if entry.persistent_volume_spec:
                if FINALIZER not in (suggestion.metadata.finalizers or []):
                    self.kube.patch(
                        SUGGESTIONS,
                        key.name,
                        {
                            "metadata": {
                                "finalizers": [*(suggestion.metadata.finalizers or []), FINALIZER],
                                "resourceVersion": suggestion.metadata.resource_version,
                            }
                        },
                        namespace,
                    )
                    return Result.done()  # the update event brings us back
                self._ensure(PVS, composing.pv(suggestion, entry), None)
            self._ensure(PVCS, composing.pvc(suggestion, entry), namespace)
        if not entry.service_account_name and namespace:
            self._ensure(SERVICE_ACCOUNTS, composing.service_account(namespace), namespace)
            self._ensure(ROLE_BINDINGS, composing.role_binding(namespace), namespace)
        self._ensure(SERVICES, composing.service(suggestion), namespace)
        deployment = self._ensure(
            DEPLOYMENTS, composing.deployment(suggestion, entry, volume), namespace
        )

        if not deployment_available(deployment):
            conds, changed = conditions.set_condition(
                conds,
                SuggestionCondition.DEPLOYMENT_READY,
                FALSE,
                SuggestionReason.DEPLOYMENT_NOT_READY,
                "Deployment is not ready",
            )
            if changed:
                self._write(suggestion, conds, {})
            return Result.after(5.0)
        changed_any = False
        conds, changed = conditions.set_condition(
            conds,
            SuggestionCondition.DEPLOYMENT_READY,
            TRUE,
            SuggestionReason.DEPLOYMENT_READY,
            "Deployment is ready",
        )
        changed_any |= changed
        conds, changed = conditions.set_condition(
            conds,
            SuggestionCondition.RUNNING,
            TRUE,
            SuggestionReason.RUNNING,
            "Suggestion is running",
        )
        changed_any |= changed
        if changed_any:
            self._write(suggestion, conds, {})
        return Result.done()

    def _finalize(self, suggestion: Suggestion) -> None:
        """Delete the PV (and the hostPath directory kubetune derived for it), then let go."""
        if FINALIZER not in (suggestion.metadata.finalizers or []):
            return
        name = composing.pv_name(suggestion)
        pv = self.kube.get_or_none(PVS, name)
        if pv is not None:
            path = ((pv.get("metadata") or {}).get("annotations") or {}).get(composing.CREATED_DIR)
            self._delete(PVS, name, None)
            if path and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
                log.info("removed host directory %s of PV %s", path, name)
        kept = [f for f in suggestion.metadata.finalizers or [] if f != FINALIZER]
        self.kube.patch(
            SUGGESTIONS,
            suggestion.metadata.name or "",
            {
                "metadata": {
                    "finalizers": kept or None,
                    "resourceVersion": suggestion.metadata.resource_version,
                }
            },
            suggestion.metadata.namespace,
        )


def _blank_entry(suggestion: Suggestion) -> Any:
    from kubetune.config import SuggestionConfig

    return SuggestionConfig(algorithm_name=composing.algorithm_of(suggestion), image="-")
