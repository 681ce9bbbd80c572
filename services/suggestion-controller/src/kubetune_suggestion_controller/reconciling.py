"""Reconcile one Suggestion: read, let `deciding` decide, carry the decision out.

Neighbours: `deciding` (pure: which objects to create or delete and the next conditions),
`composing` (the objects), `main` (wires this into `kubetune.runtime`). Writes: the objects it
owns (creates before the status write, deletes after it), the Suggestion's finalizer (only with
a PV, in a pass of its own), and of the Suggestion status only `conditions`, `startTime`,
`completionTime`, `lastReconcileTime` (contract): at most one merge patch per pass, made only
when the decided status differs from the one read, carrying the resourceVersion that was read
(the algorithm writes the other status fields; a 409 makes the runtime read again).

A Suggestion that does not match the v1beta1 schema, or whose conditions allow none of the
moves the rules want, is a `TerminalError`: retrying cannot help until someone changes it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kubetune import conditions, errors
from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import Suggestion
from kubetune.clock import SYSTEM, Clock, rfc3339
from kubetune.config import KatibConfig
from kubetune.kube import (
    DEPLOYMENTS as DEPLOYMENTS,  # re-exported: main watches the Deployments this reconciler owns
)
from kubetune.kube import (
    EXPERIMENTS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    ROLE_BINDINGS,
    SERVICE_ACCOUNTS,
    SERVICES,
    SUGGESTIONS,
    Kube,
    Resource,
)
from kubetune.runtime import Key, Result
from kubetune_suggestion_controller import composing, deciding
from kubetune_suggestion_controller.deciding import FINALIZER

log = logging.getLogger(__name__)

BY_KIND = {
    r.kind: r
    for r in (
        DEPLOYMENTS,
        SERVICES,
        PERSISTENT_VOLUME_CLAIMS,
        PERSISTENT_VOLUMES,
        SERVICE_ACCOUNTS,
        ROLE_BINDINGS,
    )
}


@dataclass
class Reconciler:
    kube: Kube
    config: KatibConfig
    clock: Clock = SYSTEM

    # -- reading -------------------------------------------------------------------------------

    def _exists(self, res: Resource, name: str, namespace: str | None) -> bool:
        return self.kube.get_or_none(res, name, namespace) is not None

    def observe(self, suggestion: Suggestion, experiment: Experiment | None) -> deciding.Seen:
        """The objects a decision depends on (the ServiceAccount and RoleBinding are per
        namespace, shared by every Suggestion there)."""
        namespace = suggestion.metadata.namespace
        return deciding.Seen(
            experiment=experiment,
            deployment=self.kube.get_or_none(
                DEPLOYMENTS, composing.deployment_name(suggestion), namespace
            ),
            service=self._exists(SERVICES, composing.service_name(suggestion), namespace),
            pvc=self._exists(PERSISTENT_VOLUME_CLAIMS, composing.pvc_name(suggestion), namespace),
            pv=self._exists(PERSISTENT_VOLUMES, composing.pv_name(suggestion), None),
            service_account=self._exists(SERVICE_ACCOUNTS, composing.ALGORITHM_SA, namespace),
            role_binding=self._exists(ROLE_BINDINGS, composing.ALGORITHM_SA, namespace),
        )

    # -- writing -------------------------------------------------------------------------------

    def _create(self, body: dict[str, Any]) -> None:
        res = BY_KIND[body["kind"]]
        namespace = body["metadata"].get("namespace") if res.namespaced else None
        with contextlib.suppress(errors.AlreadyExists):  # made meanwhile: there, as wanted
            self.kube.create(res, body, namespace)

    def _delete(self, res: Resource, name: str, namespace: str | None) -> None:
        with contextlib.suppress(errors.NotFound):
            self.kube.delete(res, name, namespace, propagation="Background")

    def _patch_meta(self, suggestion: Suggestion, finalizers: list[str] | None) -> None:
        self.kube.patch(
            SUGGESTIONS,
            suggestion.metadata.name or "",
            {
                "metadata": {
                    "finalizers": finalizers,
                    "resourceVersion": suggestion.metadata.resource_version,
                }
            },
            suggestion.metadata.namespace,
        )

    # -- the pass ------------------------------------------------------------------------------

    def reconcile(self, key: Key) -> Result | None:
        raw = self.kube.get_or_none(SUGGESTIONS, key.name, key.namespace)
        if raw is None:
            return Result.done()
        try:
            suggestion = Suggestion.model_validate(raw)
        except ValidationError as e:
            raise errors.TerminalError(
                f"Suggestion {key} does not match the v1beta1 schema: {e}"
            ) from e
        if suggestion.metadata.deletion_timestamp:
            self._finalize(suggestion)
            return Result.done()
        experiment_raw = self.kube.get_or_none(EXPERIMENTS, key.name, key.namespace)
        try:
            experiment = Experiment.model_validate(experiment_raw) if experiment_raw else None
        except ValidationError as e:
            raise errors.TerminalError(
                f"Experiment {key} of Suggestion {key} does not match the v1beta1 schema: {e}"
            ) from e
        try:
            decision = deciding.decide(
                suggestion,
                self.observe(suggestion, experiment),
                self.config,
                now=rfc3339(self.clock.now()),
            )
        except conditions.IllegalTransition as e:
            raise errors.TerminalError(f"Suggestion {key}: {e}") from e

        if decision.add_finalizer:
            self._patch_meta(suggestion, [*(suggestion.metadata.finalizers or []), FINALIZER])
            return Result.done()  # the update event brings us back
        for body in decision.create:
            self._create(body)
        if decision.status is not None:
            self.kube.patch(
                SUGGESTIONS,
                key.name,
                {
                    "metadata": {"resourceVersion": suggestion.metadata.resource_version},
                    "status": {**decision.status, "lastReconcileTime": rfc3339(self.clock.now())},
                },
                key.namespace,
                subresource="status",
            )
        for kind, name in decision.delete:
            self._delete(BY_KIND[kind], name, key.namespace)
        if decision.note:
            log.info("suggestion %s: %s", key, decision.note)
        if decision.requeue_after is not None:
            return Result.after(decision.requeue_after)
        return Result.done()

    def _finalize(self, suggestion: Suggestion) -> None:
        """Delete the PV (and the hostPath directory kubetune derived for it), then let go."""
        if FINALIZER not in (suggestion.metadata.finalizers or []):
            return
        name = composing.pv_name(suggestion)
        pv = self.kube.get_or_none(PERSISTENT_VOLUMES, name)
        if pv is not None:
            path = ((pv.get("metadata") or {}).get("annotations") or {}).get(composing.CREATED_DIR)
            self._delete(PERSISTENT_VOLUMES, name, None)
            if path and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
                log.info("removed host directory %s of PV %s", path, name)
        kept = [f for f in suggestion.metadata.finalizers or [] if f != FINALIZER]
        self._patch_meta(suggestion, kept or None)
