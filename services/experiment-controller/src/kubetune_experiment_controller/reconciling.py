"""One reconcile of an Experiment: read, plan (pure), act, write the status once.

Reads (through the runtime's `Context`): the Experiment (`read_experiment`: the informer cache,
a GET only while the cache lags behind this controller's own last status write), its Trials
(the slim informer cache, `summaries.cached`, in tests as in production) and its Suggestion
(informer cache). Acts: creates the Suggestion or patches its
`spec.requests`, creates the Trials of new assignments, records events, and writes `status`
with one merge patch guarded by the resourceVersion (`Context.write_status`). Every write is
idempotent: names are deterministic, AlreadyExists counts as done, so a controller killed at any
point and started again neither duplicates nor loses a Trial.

A Trial whose template cannot be rendered is created without a runSpec, annotated with the
reason (`kubetune.io/render-error`, naming the field and the fix), plus a Warning event on the
Experiment. Its conditions are the trial-controller's alone: it fails such a Trial with that
message (reason `TrialFailed. Job reason: InvalidRunSpec`), so the user sees the failure where
they look for trial failures and it counts against maxFailedTrialCount. One create carries both
the missing runSpec and the reason, so no reader ever sees one without the other.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError

from kubetune import conditions, errors, naming
from kubetune.api.experiment import Experiment, ExperimentStatus
from kubetune.api.suggestion import TrialAssignment
from kubetune.clock import rfc3339
from kubetune.config import KatibConfig
from kubetune.kube import CONFIGMAPS, EXPERIMENTS, SUGGESTIONS, TRIALS, Obj
from kubetune.runtime import Context, Key, OwnWrites, Result
from kubetune.runtime.ownwrites import resource_version
from kubetune_experiment_controller import planning, rendering, summaries

CONFIG_MAP_RETRY = 10.0
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


def whole_status(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`new` as the whole status: the keys of `old` it lacks are removed (null)."""
    return {**{k: None for k in old if k not in new}, **new}


class Reconciler:
    """Holds the configuration; `reconcile` is what the runtime calls per key."""

    def __init__(
        self,
        config: KatibConfig,
        *,
        max_listed: int = planning.DEFAULT_MAX_LISTED,
        create_concurrency: int = 8,
    ) -> None:
        self.config = config
        self.max_listed = max_listed
        self.pool = ThreadPoolExecutor(create_concurrency, thread_name_prefix="create-trial")
        # Per Experiment, its last status write's answer (`kubetune.runtime.ownwrites`).
        self._written = OwnWrites()
        # Per Experiment, compacted assignments whose Trial is confirmed deleted.
        self._lost: dict[Key, set[str]] = {}

    # --- reading -------------------------------------------------------------------------

    def trials_of(
        self, ctx: Context, namespace: str, experiment: str
    ) -> list[summaries.TrialSummary]:
        """From the slim Trial cache (a pass before it synced runs again shortly: listing
        10,000 Trials from the API server instead would be costly)."""
        labels = {naming.LABEL_EXPERIMENT: naming.label_value(experiment)}
        return [summaries.summary_of(t) for t in ctx.list(TRIALS, namespace, labels)]

    def lost_assignments(
        self, ctx: Context, key: Key, suggestion: planning.SuggestionView | None, existing: set[str]
    ) -> int:
        """How many compacted assignments lost their Trial. A name missing from the Trial cache
        may only lag behind this controller's own create, so each is confirmed by a GET once;
        the confirmed names are remembered per Experiment (a compacted name is never created
        again by this controller)."""
        candidates = planning.compacted_without_trial(suggestion, existing)
        if not candidates:
            return 0
        confirmed = self._lost.setdefault(key, set())
        for name in candidates:
            if name not in confirmed and ctx.kube.get_or_none(TRIALS, name, key.namespace) is None:
                confirmed.add(name)
                ctx.log.info(
                    "trial %s was deleted after its assignment was used: replacing it", name
                )
        return sum(1 for name in candidates if name in confirmed)

    def read_experiment(self, ctx: Context, key: Key) -> Obj | None:
        """The Experiment from the informer cache; the answer of this controller's last status
        write while the cache still holds the version that write replaced (its own write not
        seen yet), since a plan from that copy would only conflict. A copy stale for another
        reason is safe too: the status write carries its resourceVersion, conflicts, and the
        pass runs again."""
        return self._written.newest(key, ctx.read(EXPERIMENTS, key))

    # --- the pass ------------------------------------------------------------------------

    def reconcile(self, ctx: Context, key: Key) -> Result:
        """One pass; a write refused for its size also shows as an event on the Experiment."""
        try:
            return self._reconcile(ctx, key)
        except errors.ApiError as e:
            if not errors.is_too_large(e):
                raise
            obj = ctx.read(EXPERIMENTS, key, fresh=True)
            if obj is not None:
                message = (
                    f"a write for Experiment {key} was refused as too large ({e.message}); "
                    "objects above the API server's limit (etcd: ~1.5 MiB) cannot be stored: "
                    "reduce the number or length of the parameters or of the trial template"
                )
                record(ctx, obj, planning.Event("Warning", TOO_LARGE, message))
            raise

    def _reconcile(self, ctx: Context, key: Key) -> Result:
        obj = self.read_experiment(ctx, key)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            self._lost.pop(key, None)
            return Result.done()  # owner references take the Suggestion and the Trials with it
        try:
            experiment = Experiment.model_validate(obj)
        except ValidationError as e:
            record(ctx, obj, planning.Event("Warning", "ReconcileError", f"invalid spec: {e}"))
            raise errors.TerminalError(f"{key}: invalid Experiment: {e}") from e
        # A Suggestion missing from the synced cache is created, and AlreadyExists is fine.
        suggestion_key = Key(key.namespace, naming.suggestion_name(key.name))
        suggestion_obj = ctx.read(SUGGESTIONS, suggestion_key, trust_absent=True)
        suggestion = planning.SuggestionView.of(suggestion_obj) if suggestion_obj else None
        trials = self.trials_of(ctx, key.namespace, key.name)
        lost = self.lost_assignments(ctx, key, suggestion, {t.name for t in trials})
        now = rfc3339(ctx.clock.now())
        plan = planning.plan(
            experiment, trials, suggestion, now, max_listed=self.max_listed, lost=lost
        )
        requeue = plan.requeue_after
        if plan.create_suggestion:
            self.create_suggestion(ctx, obj, experiment, plan.requests or 0)
        if plan.new_trials and not self.create_trials(ctx, obj, experiment, plan.new_trials):
            requeue = CONFIG_MAP_RETRY
        if not plan.create_suggestion and plan.requests is not None:
            # After the Trials: they come from assignments at hand, the request is for later
            # ones, so a finished Trial's successor does not wait for this write.
            ctx.kube.patch(
                SUGGESTIONS,
                naming.suggestion_name(key.name),
                {"spec": {"requests": plan.requests}},
                key.namespace,
            )
            ctx.log.info("suggestion requests -> %d", plan.requests)
        for event in plan.events:
            record(ctx, obj, event)

        old = normalised_status(obj.get("status"))
        written = ctx.patch_status(
            EXPERIMENTS, obj, whole_status(old, status_dict(plan.status)), stored=old
        )
        if written is not None:
            self._written.wrote(key, resource_version(obj), written)
            last = conditions.last_state(plan.status.conditions)
            ctx.log.info("status written (%s, %d trials)", last, plan.status.trials or 0)
        return Result.after(requeue) if requeue is not None else Result.done()

    # --- acting --------------------------------------------------------------------------

    def create_suggestion(
        self, ctx: Context, obj: Obj, experiment: Experiment, requests: int
    ) -> None:
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
            ctx.kube.create(SUGGESTIONS, body, namespace)
            ctx.log.info("suggestion created (requests %d)", requests)
        except errors.AlreadyExists:
            current = ctx.kube.get(SUGGESTIONS, naming.suggestion_name(name), namespace)
            if ((current.get("spec") or {}).get("requests") or 0) < requests:
                ctx.kube.patch(
                    SUGGESTIONS,
                    naming.suggestion_name(name),
                    {"spec": {"requests": requests}},
                    namespace,
                )

    def create_trials(
        self,
        ctx: Context,
        obj: Obj,
        experiment: Experiment,
        assignments: list[TrialAssignment],
    ) -> bool:
        """Create the Trials; False when the template's ConfigMap is missing (retry later)."""
        namespace = experiment.metadata.namespace or ""
        template = experiment.spec.trial_template
        config_map: Obj | None = None
        source = template.config_map if template is not None else None
        if template is not None and template.trial_spec is None and source is not None:
            config_map = ctx.kube.get_or_none(
                CONFIGMAPS,
                source.config_map_name or "",
                source.config_map_namespace or namespace,
            )
            if config_map is None:
                record(
                    ctx,
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
            self.create_trial(ctx, obj, experiment, assignment, config_map, inject)

        if len(assignments) == 1:
            create(assignments[0])
        else:
            # Up to `parallelTrialCount` Trials start at once; one request each, so in parallel.
            for future in [self.pool.submit(create, a) for a in assignments]:
                future.result()
        return True

    def create_trial(
        self,
        ctx: Context,
        obj: Obj,
        experiment: Experiment,
        assignment: TrialAssignment,
        config_map: Obj | None,
        inject: bool,
    ) -> None:
        namespace = experiment.metadata.namespace or ""
        error: str | None = None
        run_spec: Obj | None = None
        try:
            run_spec = rendering.render_run_spec(
                experiment, assignment, namespace, config_map, inject_istio=inject
            )
        except rendering.RenderError as e:
            error = (
                f"Trial template could not be rendered: {e} (in spec.trialTemplate of "
                f"Experiment {namespace}/{experiment.metadata.name}; Trials created after the "
                "fix render again)"
            )
        trial = rendering.build_trial(obj, experiment, assignment, run_spec, error)
        try:
            ctx.kube.create(TRIALS, trial, namespace)
            ctx.log.info("trial %s created", assignment.name)
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
                record(
                    ctx, obj, planning.Event("Warning", TOO_LARGE, f"{assignment.name}: {error}")
                )
            trial = rendering.build_trial(obj, experiment, assignment, None, error)
            try:
                ctx.kube.create(TRIALS, trial, namespace)
            except errors.AlreadyExists:
                return
        if error is not None:
            record(
                ctx,
                obj,
                planning.Event("Warning", "TrialTemplateError", f"{assignment.name}: {error}"),
            )


def record(ctx: Context, obj: Obj, event: planning.Event) -> None:
    """A core/v1 Event on the Experiment, once per (reason, message)."""
    ctx.record(EXPERIMENTS, obj, type_=event.type, reason=event.reason, message=event.message)
