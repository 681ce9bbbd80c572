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
import os
import shutil
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kubetune import conditions, errors
from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import Suggestion
from kubetune.clock import rfc3339
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
from kubetune.runtime import Context, Key, Result
from kubetune_suggestion_controller import composing, deciding
from kubetune_suggestion_controller.deciding import FINALIZER

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
    config: KatibConfig

    # -- reading -------------------------------------------------------------------------------

    def observe(
        self, ctx: Context, suggestion: Suggestion, experiment: Experiment | None
    ) -> deciding.Seen:
        """The objects a decision depends on (the ServiceAccount and RoleBinding are per
        namespace, shared by every Suggestion there)."""
        namespace = suggestion.metadata.namespace or ""

        def exists(res: Resource, name: str, namespace: str) -> bool:
            return ctx.read(res, Key(namespace, name)) is not None

        return deciding.Seen(
            experiment=experiment,
            deployment=ctx.read(DEPLOYMENTS, Key(namespace, composing.deployment_name(suggestion))),
            service=exists(SERVICES, composing.service_name(suggestion), namespace),
            pvc=exists(PERSISTENT_VOLUME_CLAIMS, composing.pvc_name(suggestion), namespace),
            pv=exists(PERSISTENT_VOLUMES, composing.pv_name(suggestion), ""),
            service_account=exists(SERVICE_ACCOUNTS, composing.ALGORITHM_SA, namespace),
            role_binding=exists(ROLE_BINDINGS, composing.ALGORITHM_SA, namespace),
        )

    # -- writing -------------------------------------------------------------------------------

    @staticmethod
    def _create(kube: Kube, body: dict[str, Any]) -> None:
        res = BY_KIND[body["kind"]]
        namespace = body["metadata"].get("namespace") if res.namespaced else None
        with contextlib.suppress(errors.AlreadyExists):  # made meanwhile: there, as wanted
            kube.create(res, body, namespace)

    @staticmethod
    def _delete(kube: Kube, res: Resource, name: str, namespace: str | None) -> None:
        with contextlib.suppress(errors.NotFound):
            kube.delete(res, name, namespace, propagation="Background")

    @staticmethod
    def _patch_meta(kube: Kube, suggestion: Suggestion, finalizers: list[str] | None) -> None:
        kube.patch(
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

    def reconcile(self, ctx: Context, key: Key) -> Result:
        # Fresh, not cached: the status write below carries this resourceVersion.
        raw = ctx.read(SUGGESTIONS, key, fresh=True)
        if raw is None:
            return Result.done()
        try:
            suggestion = Suggestion.model_validate(raw)
        except ValidationError as e:
            raise errors.TerminalError(
                f"Suggestion {key} does not match the v1beta1 schema: {e}"
            ) from e
        if suggestion.metadata.deletion_timestamp:
            self._finalize(ctx, suggestion)
            return Result.done()
        experiment_raw = ctx.read(EXPERIMENTS, key)
        try:
            experiment = Experiment.model_validate(experiment_raw) if experiment_raw else None
        except ValidationError as e:
            raise errors.TerminalError(
                f"Experiment {key} of Suggestion {key} does not match the v1beta1 schema: {e}"
            ) from e
        try:
            decision = deciding.decide(
                suggestion,
                self.observe(ctx, suggestion, experiment),
                self.config,
                now=rfc3339(ctx.clock.now()),
            )
        except conditions.IllegalTransition as e:
            raise errors.TerminalError(f"Suggestion {key}: {e}") from e

        if decision.add_finalizer:
            finalizers = [*(suggestion.metadata.finalizers or []), FINALIZER]
            self._patch_meta(ctx.kube, suggestion, finalizers)
            return Result.done()  # the update event brings us back
        for body in decision.create:
            self._create(ctx.kube, body)
        if decision.status is not None:
            now = rfc3339(ctx.clock.now())
            ctx.write_status(SUGGESTIONS, raw, {**decision.status, "lastReconcileTime": now})
        for kind, name in decision.delete:
            self._delete(ctx.kube, BY_KIND[kind], name, key.namespace)
        if decision.note:
            ctx.log.info("suggestion %s", decision.note)
        if decision.requeue_after is not None:
            return Result.after(decision.requeue_after)
        return Result.done()

    def _finalize(self, ctx: Context, suggestion: Suggestion) -> None:
        """Delete the PV (and the hostPath directory kubetune derived for it), then let go."""
        if FINALIZER not in (suggestion.metadata.finalizers or []):
            return
        name = composing.pv_name(suggestion)
        pv = ctx.read(PERSISTENT_VOLUMES, Key("", name))
        if pv is not None:
            path = ((pv.get("metadata") or {}).get("annotations") or {}).get(composing.CREATED_DIR)
            self._delete(ctx.kube, PERSISTENT_VOLUMES, name, None)
            if path and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
                ctx.log.info("removed host directory %s of PV %s", path, name)
        kept = [f for f in suggestion.metadata.finalizers or [] if f != FINALIZER]
        self._patch_meta(ctx.kube, suggestion, kept or None)
