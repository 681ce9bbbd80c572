"""One reconcile of an Experiment: read, plan (pure), act, write the status once.

Reads: the Experiment (a fresh GET, so the status write rarely conflicts), its Trials (the slim
informer cache, `summaries.cached`; or a labelled list when no informer runs, as in tests and the
bench) and its Suggestion (informer cache, else a GET). Acts: creates the Suggestion or patches
its `spec.requests`, creates the Trials of new assignments, records events, and writes
`status` with one merge patch guarded by the resourceVersion. Every write is idempotent: names
are deterministic, AlreadyExists counts as done, so a controller killed at any point and started
again neither duplicates nor loses a Trial.

A Trial whose template cannot be rendered is created without a runSpec, annotated with the
reason (`kubetune.io/render-error`) and marked Failed (reason TrialFailed, message "Trial template
could not be rendered: ...") plus a Warning event on the Experiment: the user sees the failure
where they look for trial failures, it counts against maxFailedTrialCount, and the
trial-controller has nothing to run (it must leave a Trial without runSpec alone). A crash between
create and status write is healed on the next pass from the annotation.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError

from kubetune import conditions, errors, events, naming
from kubetune.api.experiment import Experiment, ExperimentStatus
from kubetune.api.suggestion import TrialAssignment
from kubetune.clock import SYSTEM, Clock, rfc3339
from kubetune.conditions import TRUE, TrialCondition, TrialReason
from kubetune.config import KatibConfig
from kubetune.kube import CONFIGMAPS, EXPERIMENTS, SUGGESTIONS, TRIALS, Kube, Obj
from kubetune.runtime import Controller, Key, Result
from kubetune_experiment_controller import planning, rendering, summaries

log = logging.getLogger(__name__)

COMPONENT = "experiment-controller"
CONFIG_MAP_RETRY = 10.0
CACHE_WAIT = 0.2
TOO_LARGE = "ObjectTooLarge"


def status_dict(status: ExperimentStatus) -> dict[str, Any]:
    dumped: dict[str, Any] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def normalised_status(raw: Obj | None) -> dict[str, Any]:
    """The stored status in the same form `status_dict` produces (for the change check)."""
    try:
        return status_dict(ExperimentStatus.model_validate(raw or {}))
    except ValidationError:
        return dict(raw or {})


def status_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch turning `old` into `new` (removed keys as null)."""
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    patch.update({k: None for k in old if k not in new})
    return patch


class Reconciler:
    """Holds the client and configuration; `reconcile` is what the runtime calls per key."""

    def __init__(
        self,
        kube: Kube,
        config: KatibConfig,
        *,
        max_listed: int = planning.DEFAULT_MAX_LISTED,
        create_concurrency: int = 8,
        clock: Clock = SYSTEM,
    ) -> None:
        self.kube = kube
        self.config = config
        self.max_listed = max_listed
        self.clock = clock
        self.controller: Controller | None = None
        self.pool = ThreadPoolExecutor(create_concurrency, thread_name_prefix="create-trial")

    # --- reading -------------------------------------------------------------------------

    def trials_of(self, namespace: str, experiment: str) -> list[summaries.TrialSummary]:
        label = naming.label_value(experiment)
        informer = self.controller.informer_for(TRIALS) if self.controller else None
        if informer is not None:
            objects = informer.objects()
        else:
            objects = [
                summaries.cached(t)
                for t in self.kube.list_all(
                    TRIALS, namespace, label_selector=f"{naming.LABEL_EXPERIMENT}={label}"
                )
            ]
        return [
            summaries.summary_of(t)
            for t in objects
            if (t.get("metadata") or {}).get("namespace") == namespace
            and ((t.get("metadata") or {}).get("labels") or {}).get(naming.LABEL_EXPERIMENT)
            == label
        ]

    def suggestion_of(self, namespace: str, experiment: str) -> Obj | None:
        name = naming.suggestion_name(experiment)
        informer = self.controller.informer_for(SUGGESTIONS) if self.controller else None
        if informer is not None:
            return informer.cache.get((namespace, name))
        return self.kube.get_or_none(SUGGESTIONS, name, namespace)

    # --- the pass ------------------------------------------------------------------------

    def reconcile(self, key: Key) -> Result | None:
        """One pass; a write refused for its size also shows as an event on the Experiment."""
        try:
            return self._reconcile(key)
        except errors.ApiError as e:
            if not errors.is_too_large(e):
                raise
            obj = self.kube.get_or_none(EXPERIMENTS, key.name, key.namespace)
            if obj is not None:
                message = (
                    f"a write for Experiment {key} was refused as too large ({e.message}); "
                    "objects above the API server's limit (etcd: ~1.5 MiB) cannot be stored: "
                    "reduce the number or length of the parameters or of the trial template"
                )
                self.record(obj, planning.Event("Warning", TOO_LARGE, message))
            raise

    def _reconcile(self, key: Key) -> Result | None:
        if self.controller is not None and not self.controller.synced():
            # The runtime starts workers before the caches are filled; a pass now would list
            # every Trial from the API server (10,000 objects at once), so wait for the cache.
            return Result.after(CACHE_WAIT)
        obj = self.kube.get_or_none(EXPERIMENTS, key.name, key.namespace)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None  # owner references take the Suggestion and the Trials with it
        try:
            experiment = Experiment.model_validate(obj)
        except ValidationError as e:
            self.record(obj, planning.Event("Warning", "ReconcileError", f"invalid spec: {e}"))
            raise errors.TerminalError(f"{key}: invalid Experiment: {e}") from e
        suggestion_obj = self.suggestion_of(key.namespace, key.name)
        suggestion = planning.SuggestionView.of(suggestion_obj) if suggestion_obj else None
        trials = self.trials_of(key.namespace, key.name)
        now = rfc3339(self.clock.now())
        plan = planning.plan(experiment, trials, suggestion, now, max_listed=self.max_listed)
        requeue = plan.requeue_after

        for trial in trials:
            if trial.render_error and trial.state != conditions.TrialState.FAILED:
                self.mark_trial_failed(key.namespace, trial.name, trial.render_error, now)
        if plan.create_suggestion:
            self.create_suggestion(obj, experiment, plan.requests or 0)
        elif plan.requests is not None:
            self.kube.patch(
                SUGGESTIONS,
                naming.suggestion_name(key.name),
                {"spec": {"requests": plan.requests}},
                key.namespace,
            )
            log.info("%s: suggestion requests -> %d", key, plan.requests)
        if plan.new_trials and not self.create_trials(obj, experiment, plan.new_trials, now):
            requeue = CONFIG_MAP_RETRY
        for event in plan.events:
            self.record(obj, event)

        old = normalised_status(obj.get("status"))
        new = status_dict(plan.status)
        if old != new:
            patch = status_patch(old, new)
            self.kube.patch(
                EXPERIMENTS,
                key.name,
                {
                    "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                    "status": patch,
                },
                key.namespace,
                subresource="status",
            )
            last = conditions.last_state(plan.status.conditions)
            log.info("%s: status written (%s, %d trials)", key, last, plan.status.trials or 0)
        return Result.after(requeue) if requeue is not None else None

    # --- acting --------------------------------------------------------------------------

    def create_suggestion(self, obj: Obj, experiment: Experiment, requests: int) -> None:
        name = experiment.metadata.name or ""
        namespace = experiment.metadata.namespace or ""
        spec: dict[str, Any] = {
            "requests": requests,
            "resumePolicy": (experiment.spec.resume_policy or "Never"),
        }
        if experiment.spec.algorithm is not None:
            spec["algorithm"] = experiment.spec.algorithm.to_wire()
        if experiment.spec.early_stopping is not None:
            spec["earlyStopping"] = experiment.spec.early_stopping.to_wire()
        body: Obj = {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Suggestion",
            "metadata": {
                "name": naming.suggestion_name(name),
                "namespace": namespace,
                "labels": {
                    **(experiment.metadata.labels or {}),
                    naming.LABEL_EXPERIMENT: naming.label_value(name),
                },
                "ownerReferences": [rendering.owner_reference(obj)],
            },
            "spec": spec,
        }
        if experiment.metadata.annotations:
            body["metadata"]["annotations"] = dict(experiment.metadata.annotations)
        try:
            self.kube.create(SUGGESTIONS, body, namespace)
            log.info("%s/%s: suggestion created (requests %d)", namespace, name, requests)
        except errors.AlreadyExists:
            current = self.kube.get(SUGGESTIONS, naming.suggestion_name(name), namespace)
            if ((current.get("spec") or {}).get("requests") or 0) < requests:
                self.kube.patch(
                    SUGGESTIONS,
                    naming.suggestion_name(name),
                    {"spec": {"requests": requests}},
                    namespace,
                )

    def create_trials(
        self, obj: Obj, experiment: Experiment, assignments: list[TrialAssignment], now: str
    ) -> bool:
        """Create the Trials; False when the template's ConfigMap is missing (retry later)."""
        namespace = experiment.metadata.namespace or ""
        template = experiment.spec.trial_template
        config_map: Obj | None = None
        source = template.config_map if template is not None else None
        if template is not None and template.trial_spec is None and source is not None:
            config_map = self.kube.get_or_none(
                CONFIGMAPS,
                source.config_map_name or "",
                source.config_map_namespace or namespace,
            )
            if config_map is None:
                self.record(
                    obj,
                    planning.Event(
                        "Warning",
                        "TrialTemplateNotFound",
                        f"ConfigMap {source.config_map_namespace or namespace}/"
                        f"{source.config_map_name} of the trial template not found; retrying",
                    ),
                )
                return False
        inject = bool(self.config.init.controller.inject_istio_annotation)

        def create(assignment: TrialAssignment) -> None:
            self.create_trial(obj, experiment, assignment, config_map, inject, now)

        if len(assignments) == 1:
            create(assignments[0])
        else:
            # Up to `parallelTrialCount` Trials start at once; one request each, so in parallel.
            for future in [self.pool.submit(create, a) for a in assignments]:
                future.result()
        return True

    def create_trial(
        self,
        obj: Obj,
        experiment: Experiment,
        assignment: TrialAssignment,
        config_map: Obj | None,
        inject: bool,
        now: str,
    ) -> None:
        namespace = experiment.metadata.namespace or ""
        error: str | None = None
        run_spec: Obj | None = None
        try:
            run_spec = rendering.render_run_spec(
                experiment, assignment, namespace, config_map, inject_istio=inject
            )
        except rendering.RenderError as e:
            error = f"Trial template could not be rendered: {e}"
        trial = rendering.build_trial(obj, experiment, assignment, run_spec, error)
        try:
            self.kube.create(TRIALS, trial, namespace)
            log.info("%s/%s: trial %s created", namespace, obj["metadata"]["name"], assignment.name)
        except errors.AlreadyExists:
            return
        except errors.ApiError as e:
            # The API server refused the object the template produced (invalid, or above the
            # object size limit: refused again on every retry): create it without runSpec.
            too_large = errors.is_too_large(e)
            if not (isinstance(e, errors.Invalid) or too_large):
                raise
            error = f"Trial could not be created: {e.message}"
            if too_large:
                size = len(json.dumps(trial, separators=(",", ":")).encode())
                error = (
                    f"Trial could not be created: it is {size} bytes, too large for the "
                    f"API server ({e.message}); the rendered trial template is too large: "
                    "shorten the template or the parameter values it repeats"
                )
                self.record(
                    obj, planning.Event("Warning", TOO_LARGE, f"{assignment.name}: {error}")
                )
            trial = rendering.build_trial(obj, experiment, assignment, None, error)
            try:
                self.kube.create(TRIALS, trial, namespace)
            except errors.AlreadyExists:
                return
        if error is not None:
            self.record(
                obj, planning.Event("Warning", "TrialTemplateError", f"{assignment.name}: {error}")
            )
            self.mark_trial_failed(namespace, assignment.name, error, now)

    def mark_trial_failed(self, namespace: str, name: str, message: str, now: str) -> None:
        conds, _ = conditions.set_condition(
            None, TrialCondition.CREATED, TRUE, TrialReason.CREATED, "Trial is created", now=now
        )
        conds, _ = conditions.set_condition(
            conds, TrialCondition.FAILED, TRUE, TrialReason.FAILED, message, now=now
        )
        self.kube.patch(
            TRIALS,
            name,
            {
                "status": {
                    "startTime": now,
                    "completionTime": now,
                    "conditions": [c.to_wire() for c in conds],
                }
            },
            namespace,
            subresource="status",
        )
        log.warning("%s/%s: trial failed: %s", namespace, name, message)

    def record(self, obj: Obj, event: planning.Event) -> None:
        """A core/v1 Event on the Experiment, once per (reason, message)."""
        events.record(
            self.kube,
            EXPERIMENTS,
            obj,
            type_=event.type,
            reason=event.reason,
            message=event.message,
            component=COMPONENT,
            clock=self.clock,
        )
