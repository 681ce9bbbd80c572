"""Reconcile one Suggestion: read, let `deciding` decide, carry the decision out.

Neighbours: `deciding` (pure: which objects to create or delete and the next conditions),
`composing` (the objects), `owning` (their names, and whose an object found there is), `main`
(wires this into `kubetune.runtime`). Writes: the objects it owns (creates before the status
write, deletes after it; never an object of another owner), the Suggestion's finalizer (only
with a PV) and its name annotations (`naming.NAME_ANNOTATIONS`), each in a pass of its own, and
of the Suggestion status only `conditions`, `startTime`, `completionTime`, `lastReconcileTime`
(contract): at most one merge patch per pass, made only
when the decided status differs from the one read, carrying the resourceVersion that was read
(the algorithm writes the other status fields; a 409 makes the runtime read again).

A Suggestion that does not match the v1beta1 schema, or whose conditions allow none of the
moves the rules want, is a `TerminalError`: retrying cannot help until someone changes it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kubetune import conditions, errors, events, naming
from kubetune.api.experiment import Experiment, ResumePolicy
from kubetune.api.suggestion import Suggestion
from kubetune.clock import rfc3339
from kubetune.config import SUGGESTION_IMAGE, ConfigError, KatibConfig
from kubetune.kube import (
    DEPLOYMENTS as DEPLOYMENTS,  # re-exported: main watches the Deployments this reconciler owns
)
from kubetune.kube import (
    EXPERIMENTS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    ROLE_BINDINGS,
    SERVICE_ACCOUNTS,
    SERVICES,
    SUGGESTIONS,
    Kube,
    Resource,
)
from kubetune.runtime import Context, Key, Result
from kubetune_suggestion_controller import cleaning, composing, deciding, owning
from kubetune_suggestion_controller.composing import Obj
from kubetune_suggestion_controller.deciding import FINALIZER

CLAIM = PERSISTENT_VOLUME_CLAIMS.kind
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


COMPONENT = "suggestion-controller"


@dataclass
class Reconciler:
    config: KatibConfig
    cleanup_namespace: str = "kubeflow"
    """Where the Pods that remove hostPath directories on their nodes run (the controller's
    own namespace: its only rights on Pods are there)."""

    # -- reading -------------------------------------------------------------------------------

    def observe(
        self, ctx: Context, suggestion: Suggestion, experiment: Experiment | None
    ) -> deciding.Seen:
        """The objects a decision depends on (the ServiceAccount and RoleBinding are per
        namespace, shared by every Suggestion there), each under the name `owning` picks."""
        namespace = suggestion.metadata.namespace or ""

        def exists(res: Resource, name: str, namespace: str) -> bool:
            return ctx.read(res, Key(namespace, name)) is not None

        volume = deciding.policy_of(suggestion, experiment) == ResumePolicy.FROM_VOLUME
        chosen: dict[str, str] = {}
        found: dict[str, Obj | None] = {}
        record: dict[str, str] = {}
        for kind in owning.KINDS if volume else owning.KINDS[:2]:
            name, found[kind], taken = self._choose(ctx, suggestion, kind, found.get(CLAIM))
            chosen[kind] = name
            if taken:
                record[naming.NAME_ANNOTATIONS[kind]] = name
        recorded = owning.recorded(suggestion)
        names = composing.Names(*(chosen.get(k, recorded.of(k)) for k in owning.KINDS))
        return deciding.Seen(
            experiment=experiment,
            deployment=found["Deployment"],
            service=found["Service"] is not None,
            pvc=found.get(CLAIM) is not None,
            pv=found.get("PersistentVolume") is not None,
            service_account=exists(SERVICE_ACCOUNTS, composing.ALGORITHM_SA, namespace),
            role_binding=exists(ROLE_BINDINGS, composing.ALGORITHM_SA, namespace),
            names=names,
            record=record,
        )

    @staticmethod
    def _read(ctx: Context, kind: str, name: str, namespace: str) -> Obj | None:
        res = BY_KIND[kind]
        return ctx.read(res, Key(namespace if res.namespaced else "", name))

    def _choose(
        self, ctx: Context, suggestion: Suggestion, kind: str, claim: Obj | None
    ) -> tuple[str, Obj | None, bool]:
        """(name, the Suggestion's object there or None, whether the name is a fallback not
        recorded yet) for `kind`: the recorded name, else Katib's unless another owner holds
        it. An object of another owner is never returned (it would be adopted)."""
        namespace = suggestion.metadata.namespace or ""
        who = f"Suggestion {namespace}/{suggestion.metadata.name}"
        name = owning.recorded(suggestion).of(kind)
        obj = self._read(ctx, kind, name, namespace)
        if obj is None or owning.owns(suggestion, obj, claim):
            return name, obj, False
        other = owning.fallback(suggestion, kind)
        if name == other:  # its own fallback taken: left alone, never deleted
            ctx.log.warning("%s %s belongs to %s, not to %s", kind, name, owning.holder(obj), who)
            return name, None, False
        ctx.log.info("%s %s belongs to %s: %s takes %s", kind, name, owning.holder(obj), who, other)
        obj = self._read(ctx, kind, other, namespace)
        if obj is not None and not owning.owns(suggestion, obj, claim):
            ctx.log.warning("%s %s belongs to %s, not to %s", kind, other, owning.holder(obj), who)
            obj = None
        return other, obj, True

    # -- writing -------------------------------------------------------------------------------

    @staticmethod
    def _create(ctx: Context, suggestion: Suggestion, body: dict[str, Any]) -> bool:
        """Create `body`; False when another owner made one of that name meanwhile (left
        alone: the next pass sees it and picks the fallback name)."""
        res = BY_KIND[body["kind"]]
        namespace = body["metadata"].get("namespace") if res.namespaced else None
        name = body["metadata"]["name"]
        try:
            ctx.kube.create(res, body, namespace)
            return True
        except errors.AlreadyExists:
            existing = ctx.kube.get_or_none(res, name, namespace)
        if existing is None or owning.owns(suggestion, existing):
            return True  # ours, made by an earlier pass (or gone again: the next pass makes it)
        ctx.log.warning(
            "%s %s belongs to %s, not to Suggestion %s/%s: not adopted",
            body["kind"], name, owning.holder(existing), suggestion.metadata.namespace,
            suggestion.metadata.name,
        )  # fmt: skip
        return False

    @staticmethod
    def _delete(kube: Kube, res: Resource, name: str, namespace: str | None) -> None:
        with contextlib.suppress(errors.NotFound):
            kube.delete(res, name, namespace, propagation="Background")

    @staticmethod
    def _patch_meta(kube: Kube, suggestion: Suggestion, meta: dict[str, Any]) -> None:
        """A metadata merge patch guarded by the resourceVersion that was read."""
        kube.patch(
            SUGGESTIONS,
            suggestion.metadata.name or "",
            {"metadata": {**meta, "resourceVersion": suggestion.metadata.resource_version}},
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
            return self._finalize(ctx, suggestion, raw)
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
            self._patch_meta(ctx.kube, suggestion, {"finalizers": finalizers})
            return Result.done()  # the update event brings us back
        if decision.annotate:
            self._patch_meta(ctx.kube, suggestion, {"annotations": decision.annotate})
            ctx.log.info("suggestion %s", decision.note)
            return Result.done()  # the update event brings us back
        made = [self._create(ctx, suggestion, body) for body in decision.create]
        if decision.status is not None:
            now = rfc3339(ctx.clock.now())
            ctx.write_status(SUGGESTIONS, raw, {**decision.status, "lastReconcileTime": now})
        for kind, name in decision.delete:
            self._delete(ctx.kube, BY_KIND[kind], name, key.namespace)
        if decision.note:
            ctx.log.info("suggestion %s", decision.note)
        if decision.requeue_after is not None:
            return Result.after(decision.requeue_after)
        if not all(made):
            return Result.after(deciding.NOT_READY_REQUEUE)
        return Result.done()

    def _finalize(self, ctx: Context, suggestion: Suggestion, raw: Obj) -> Result:
        """Delete the PV (after its hostPath directory kubetune derived is gone from its node)
        if it is this Suggestion's, then let go."""
        if FINALIZER not in (suggestion.metadata.finalizers or []):
            return Result.done()
        names = owning.recorded(suggestion)
        name = names.pv
        pv = ctx.read(PERSISTENT_VOLUMES, Key("", name))
        claim = ctx.read(
            PERSISTENT_VOLUME_CLAIMS, Key(suggestion.metadata.namespace or "", names.pvc)
        )
        if claim is not None and not owning.owns(suggestion, claim):
            claim = None
        if pv is not None and not owning.owns(suggestion, pv, claim):
            ctx.log.info("PV %s belongs to %s: left alone", name, owning.holder(pv))
        elif pv is not None:
            path = ((pv.get("metadata") or {}).get("annotations") or {}).get(composing.CREATED_DIR)
            annotations = suggestion.metadata.annotations or {}
            if path and annotations.get(cleaning.SKIP_ANNOTATION) == "true":
                ctx.log.warning(
                    "%s set: host directory %s of PV %s left", cleaning.SKIP_ANNOTATION, path, name
                )
            elif path:
                waiting = self._remove_directory(ctx, suggestion, raw, pv, path)
                if waiting is not None:
                    return waiting
            self._delete(ctx.kube, PERSISTENT_VOLUMES, name, None)
        kept = [f for f in suggestion.metadata.finalizers or [] if f != FINALIZER]
        self._patch_meta(ctx.kube, suggestion, {"finalizers": kept or None})
        return Result.done()

    def _remove_directory(
        self, ctx: Context, suggestion: Suggestion, raw: Obj, pv: Obj, path: str
    ) -> Result | None:
        """Run `cleaning`'s Pod on each node that may hold `path`; None once every one
        Succeeded (or the attempts ran out), else when to look again."""
        now = ctx.clock.now()
        namespace = self.cleanup_namespace
        pv_name = pv["metadata"]["name"]
        attempt, not_before = cleaning.attempt_of(suggestion.metadata.annotations, now)
        if now < not_before:
            return Result.after((not_before - now).total_seconds())
        pods = []
        for target in cleaning.targets(pv, path):
            pod_name = cleaning.pod_name(pv_name, target.node, attempt)
            pods.append((target, pod_name, ctx.kube.get_or_none(PODS, pod_name, namespace)))
        failed: list[tuple[str, Obj]] = []
        running = False
        for target, pod_name, pod in pods:
            if pod is None:
                image, pull_policy = self._cleanup_image(suggestion)
                body = cleaning.pod(
                    pv_name, target, attempt, namespace=namespace, image=image,
                    pull_policy=pull_policy,
                )  # fmt: skip
                with contextlib.suppress(errors.AlreadyExists):
                    ctx.kube.create(PODS, body, namespace)
                ctx.log.info(
                    "removing host directory %s of PV %s: Pod %s/%s on node %s",
                    path, pv_name, namespace, pod_name, target.node or "(scheduler's choice)",
                )  # fmt: skip
                running = True
                continue
            state = cleaning.finished(pod, now)
            if state == "Failed":
                failed.append((pod_name, pod))
            running = running or state is None
        if failed:
            self._report_failed(ctx, raw, path, attempt, failed)
        elif running:
            return Result.after(cleaning.POLL_SECONDS)
        retry = bool(failed) and attempt < cleaning.MAX_ATTEMPTS
        if retry:  # first: a conflict here leaves the failed Pods to be seen again
            later = cleaning.next_attempt(attempt, now)
            self._patch_meta(
                ctx.kube, suggestion, {"annotations": {cleaning.ATTEMPT_ANNOTATION: later}}
            )
        for _, pod_name, _ in pods:
            self._delete(ctx.kube, PODS, pod_name, namespace)
        if retry:
            return Result.done()  # the update event brings us back
        if failed:
            return None  # given up: the Events name the directory left behind
        ctx.log.info("removed host directory %s of PV %s", path, pv_name)
        return None

    def _cleanup_image(self, suggestion: Suggestion) -> tuple[str, str | None]:
        """(image, pull policy) of the cleanup Pod, from the algorithm's katib-config entry;
        kubetune's algorithm image when the entry is gone (a finalizer must not wait on it)."""
        try:
            entry = self.config.suggestion(composing.algorithm_of(suggestion))
        except ConfigError:
            return SUGGESTION_IMAGE, None
        return self.config.cleanup_image(entry), entry.image_pull_policy

    def _report_failed(
        self, ctx: Context, raw: Obj, path: str, attempt: int, failed: list[tuple[str, Obj]]
    ) -> None:
        """Each failed cleanup Pod as a Warning Event on the Suggestion (once per Pod)."""
        namespace = self.cleanup_namespace
        if attempt >= cleaning.MAX_ATTEMPTS:
            then = "the directory is left: remove it on the node by hand"
        else:
            then = f"retrying in {int(cleaning.backoff(attempt).total_seconds())} s"
        for pod_name, pod in failed:
            node = (pod.get("spec") or {}).get("nodeName") or "(unscheduled)"
            message = (
                f"attempt {attempt}/{cleaning.MAX_ATTEMPTS} to remove host directory {path} "
                f"failed: Pod {namespace}/{pod_name} on node {node}: "
                f"{cleaning.failure(pod)}; {then}"
            )
            ctx.log.warning("suggestion %s", message)
            events.record(
                ctx.kube, SUGGESTIONS, raw, type_="Warning", reason="HostPathCleanupFailed",
                message=message, component=COMPONENT, cause=pod_name, clock=ctx.clock,
            )  # fmt: skip
