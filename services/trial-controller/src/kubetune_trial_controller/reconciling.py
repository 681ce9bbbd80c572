"""One Trial's reconcile: read it, make sure its job exists, read the job, write the status.

Shape: read (`Context.read`: informer caches, the API server when a cache cannot answer; a job
kind is watched from the first Trial that uses it, limited to the objects this controller
labelled, so installing a CRD later needs no restart) -> `deciding.decide`
(pure) -> one status patch on the `status` subresource carrying the resourceVersion that was
read (so a condition the collector appended meanwhile, e.g. EarlyStopped, is never overwritten:
the patch fails with 409 and the key is read again). Side effects before the status write are
idempotent: the job has the Trial's name (AlreadyExists means it is there already, so a restart
between create and status write neither duplicates nor fails) and the collector RoleBinding
only ever gains subjects and owners (the garbage collector deletes it with its last owner). A
finished Trial with `retainRun: false` gets its job deleted on the next pass, after the final
status is stored.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from kubetune import conditions, errors, jobstatus, naming
from kubetune.api.trial import Trial
from kubetune.conditions import TrialCondition
from kubetune.jobstatus import JobPhase
from kubetune.kube import EVENTS, PODS, ROLE_BINDINGS, TRIALS, Kube, Obj, Resource
from kubetune.runtime import Context, Key, OnDemand, Result, owner_keys
from kubetune.runtime.versioned import PerVersion
from kubetune_trial_controller import building, deciding, katibpods, kinds, podverdict, refusals
from kubetune_trial_controller.kinds import JobKind

JOB_PROPAGATION = "Foreground"

# Short reasons carried as "TrialFailed. Job reason: <reason>" when the controller fails a Trial;
# the kind problems name the kind too ("JobKindNotAllowed: Deployment.v1.apps").
INVALID_RUN_SPEC = "InvalidRunSpec"
KIND_NOT_ALLOWED = "JobKindNotAllowed"
KIND_NOT_INSTALLED = "JobKindNotInstalled"
NO_CONDITIONS = "NoJobConditions"
INVALID_CONDITION = "InvalidJobCondition"
JOB_DELETED = "JobDeleted"
JOB_NOT_OWNED = "JobNotOwned"
JOB_REJECTED = "JobRejected"

# A job kind is watched from the first Trial that uses it, only the jobs this controller made.
JOBS = OnDemand(owner_keys("Trial", "kubeflow.org/v1beta1"), naming.LABEL_TRIAL)
BATCH_JOB = JobKind("Job", "v1", "batch")


EARLIER_JOB_RECHECK = 5.0
"""Seconds between looks at a job an earlier Trial of the same name left (besides the watch)."""


class _EarlierTrialsJob(Exception):
    """The Trial's job name is taken by the job of a deleted Trial of the same name (another
    uid): the garbage collector deletes it, then this Trial's job is created. Nothing is written
    meanwhile, so the Trial is not yet `Created` and its job's absence then is no deletion."""


BINDING_RECHECK = 60.0
"""Seconds a collector RoleBinding seen to hold an Experiment's service accounts is trusted to
still hold them (it only ever gains subjects; the garbage collector deletes it with its last
owner, and a new Experiment is a new owner): the Trials of one Experiment read it once."""
BINDINGS_REMEMBERED = 4096


class TrialReconciler:
    """Reconciles Trials of the allowed job kinds."""

    def __init__(
        self, allowed: frozenset[JobKind], *, metrics_timeout: float = 600.0, pods: bool = False
    ) -> None:
        self.allowed = allowed
        self.metrics_timeout = metrics_timeout
        # Whether the controller watches the trial pods (`main.build`), so that a batch/v1
        # Job's success can be read from them (`podverdict`).
        self.pods = pods
        self._resources: dict[JobKind, Resource] = {}
        # (namespace, owner uid, service accounts) -> when the binding was last seen to hold
        # them: the next Trials of that Experiment need no GET of it for a while.
        self._bound: dict[tuple[str, str, tuple[str, ...]], float] = {}
        # A pass runs on every change of the Trial, its job and its pods: the Trial is parsed
        # and the job judged once per version of each (`versioned`).
        self._trials: PerVersion[Trial] = PerVersion()
        self._job_states: PerVersion[jobstatus.JobStatus] = PerVersion()

    # --- reading ------------------------------------------------------------------------------

    def _resource(self, kube: Kube, kind: JobKind) -> Resource:
        """Discovery, cached once found (a missing kind is asked again next time)."""
        resource = self._resources.get(kind)
        if resource is None:
            resource = kube.resource_for(kind.api_version, kind.kind)
            self._resources[kind] = resource
        return resource

    # --- the job ------------------------------------------------------------------------------

    def _rules(self, trial: Trial, kind: JobKind) -> jobstatus.ConditionRules | None:
        spec = trial.spec
        if spec.success_condition and spec.failure_condition:
            return jobstatus.ConditionRules(spec.success_condition, spec.failure_condition)
        return jobstatus.default_conditions(kind.kind, kind.api_version)

    def _ensure_collector_binding(self, kube: Kube, raw: Mapping[str, Any]) -> None:
        namespace = raw["metadata"]["namespace"]
        accounts = building.service_accounts((raw.get("spec") or {}).get("runSpec") or {})
        owner = building.binding_owner(raw)
        seen = (namespace, owner["uid"], tuple(accounts))
        last = self._bound.get(seen)
        if last is not None and time.monotonic() - last < BINDING_RECHECK:
            return
        self._ensure_binding(kube, namespace, accounts, owner)
        if len(self._bound) >= BINDINGS_REMEMBERED:
            self._bound.clear()
        self._bound[seen] = time.monotonic()

    @staticmethod
    def _ensure_binding(kube: Kube, namespace: str, accounts: list[str], owner: Obj) -> None:
        binding = kube.get_or_none(ROLE_BINDINGS, building.COLLECTOR_BINDING, namespace)
        if binding is None:
            try:
                kube.create(
                    ROLE_BINDINGS, building.collector_binding(namespace, accounts, owner), namespace
                )
                return
            except errors.AlreadyExists:
                binding = kube.get(ROLE_BINDINGS, building.COLLECTOR_BINDING, namespace)
        missing = building.missing_subjects(binding, namespace, accounts)
        if missing or building.missing_owner(binding, owner):
            binding["subjects"] = [*(binding.get("subjects") or []), *missing]
            meta = binding["metadata"]
            if building.missing_owner(binding, owner):
                meta["ownerReferences"] = [*(meta.get("ownerReferences") or []), owner]
            kube.replace(ROLE_BINDINGS, binding, namespace)  # carries resourceVersion

    def _create_job(self, ctx: Context, raw: Obj, resource: Resource) -> Obj:
        meta = raw["metadata"]
        self._ensure_collector_binding(ctx.kube, raw)
        try:
            job = ctx.kube.create(resource, building.job_for(raw), meta["namespace"])
            ctx.log.info("created %s", resource.kind)
            return job
        except errors.AlreadyExists:
            return ctx.kube.get(resource, meta["name"], meta["namespace"])

    def observe(self, ctx: Context, raw: Obj, trial: Trial) -> deciding.Seen:
        """Make sure the job exists and evaluate it; every bad input becomes a `problem`."""
        meta = raw["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        run_spec = (raw.get("spec") or {}).get("runSpec")
        try:
            kind = kinds.of_run_spec(run_spec)
        except kinds.KindError as e:
            return deciding.Seen(problem=INVALID_RUN_SPEC, message=_no_job_message(raw, e))
        if kind not in self.allowed:
            allowed = ", ".join(sorted(str(k) for k in self.allowed)) or "none"
            return deciding.Seen(
                problem=f"{KIND_NOT_ALLOWED}: {kind}",
                message=f"job kind {kind} is not in the trial resources allow-list ({allowed})",
            )
        rules = self._rules(trial, kind)
        if rules is None:
            return deciding.Seen(
                problem=NO_CONDITIONS,
                message=f"job kind {kind} has no default conditions: "
                "set successCondition and failureCondition in the trial template",
            )
        for field, expr in _fields(rules):
            try:
                jobstatus.validate_expression(expr)
            except jobstatus.InvalidConditionExpression as e:
                return deciding.Seen(
                    problem=INVALID_CONDITION, message=f"{field} {expr!r} is invalid: {e.reason}"
                )
        try:
            resource = self._resource(ctx.kube, kind)
        except errors.NotFound:
            return deciding.Seen(
                problem=f"{KIND_NOT_INSTALLED}: {kind}",
                message=f"job kind {kind} is not installed in the cluster "
                f"(the API server does not serve {kind.kind} in {kind.api_version})",
            )
        # An absent job of a Created Trial may be lag of the cache behind our own create: read()
        # asks the server. Before Created the cache's "absent" is trusted: a create that finds
        # the job there after all reads it (AlreadyExists).
        created = conditions.is_true(trial.status.conditions if trial.status else None, "Created")
        job = ctx.read(resource, Key(namespace, name), watch=JOBS, trust_absent=not created)
        if job is None:
            if created:
                return deciding.Seen(
                    problem=JOB_DELETED,
                    message=f"{kind.kind} {name} was deleted by someone else "
                    "while the Trial was running",
                )
            try:
                job = self._create_job(ctx, raw, resource)
            except errors.Invalid as e:
                return deciding.Seen(
                    problem=JOB_REJECTED,
                    message=f"the API server rejected {kind.kind} {name}: {e.message}",
                )
        if building.of_earlier_trial(job, raw):
            raise _EarlierTrialsJob(f"{kind.kind} {name}")
        if not building.is_owned_by(job, raw):
            return deciding.Seen(
                problem=JOB_NOT_OWNED,
                message=f"{kind.kind} {name} already exists and is not owned by this Trial",
            )
        if (job.get("metadata") or {}).get("deletionTimestamp"):
            return deciding.Seen(
                problem=JOB_DELETED,
                message=f"{kind.kind} {name} is being deleted by someone else "
                "while the Trial is running",
            )
        try:
            state = self._job_states.get(
                job,
                lambda: jobstatus.evaluate_job(job, rules, kind.kind, kind.api_version),
                rules,
                kind,
            )
        except jobstatus.ConditionError as e:
            named = next(
                (f for f, x in _fields(rules) if x == getattr(e, "expression", None)), None
            )
            message = f"{named}: {e}" if named else str(e)
            return deciding.Seen(problem=INVALID_CONDITION, message=message)
        if state.phase is JobPhase.RUNNING and self.pods:
            pods = ctx.list(PODS, namespace, {naming.LABEL_TRIAL: naming.label_value(name)})
            katibpods.report(ctx, raw, pods)
            if self._reads_pods(kind, rules):
                state = podverdict.success(job, pods, ctx.clock.now().timestamp())
        if state.phase is JobPhase.RUNNING:
            refused = refusals.find(ctx.list(EVENTS), job["metadata"].get("uid") or "")
            if refused is not None and refused.persistent:
                return deciding.Seen(
                    problem=refused.reason,
                    message=f"the pods of {kind.kind} {name} are refused: {refused.message}",
                )
        return deciding.Seen(
            phase=state.phase,
            reason=state.reason,
            message=state.message,
            waiting_for=f"waiting for {kind.kind} {name} to match successCondition "
            f"{rules.success_condition!r} or failureCondition {rules.failure_condition!r}",
        )

    def _reads_pods(self, kind: JobKind, rules: jobstatus.ConditionRules) -> bool:
        """Whether a running job's pods may decide it: a batch/v1 Job judged by Katib's
        default rules (custom rules are the user's), when the pods are watched."""
        return self.pods and kind == BATCH_JOB and rules == jobstatus.BATCH_JOB_CONDITIONS

    def _delete_job(self, ctx: Context, raw: Obj) -> None:
        """After the Trial finished with retainRun false: delete its job (and so its pods)."""
        meta = raw["metadata"]
        try:
            kind = kinds.of_run_spec((raw.get("spec") or {}).get("runSpec"))
        except kinds.KindError:
            return
        if kind not in self.allowed:
            return
        try:
            resource = self._resource(ctx.kube, kind)
        except errors.NotFound:
            return
        key = Key(meta["namespace"], meta["name"])
        job = ctx.read(resource, key, watch=JOBS, trust_absent=True)
        if job is None or not building.is_owned_by(job, raw):
            return
        if (job.get("metadata") or {}).get("deletionTimestamp"):
            return
        try:
            ctx.kube.delete(
                resource,
                meta["name"],
                meta["namespace"],
                propagation=JOB_PROPAGATION,
                uid=job["metadata"].get("uid"),
            )
            ctx.log.info("deleted %s", resource.kind)
        except (errors.NotFound, errors.Conflict):
            pass  # gone already, or another object of that name now

    # --- the reconcile ------------------------------------------------------------------------

    def reconcile(self, ctx: Context, key: Key) -> Result:
        raw = ctx.read(TRIALS, key)
        if raw is None or (raw.get("metadata") or {}).get("deletionTimestamp"):
            return Result.done()
        try:
            trial = self._trials.get(raw, lambda: Trial.model_validate(raw))
        except ValidationError as e:
            raise errors.TerminalError(f"Trial {key} does not match the v1beta1 schema: {e}") from e
        if deciding.needs_job(trial):
            try:
                seen = self.observe(ctx, raw, trial)
            except _EarlierTrialsJob as e:
                # Its deletion wakes this key (the jobs' watch maps a job to its Trial's name).
                ctx.log.info("waiting until %s of an earlier Trial of this name is deleted", e)
                return Result.after(EARLIER_JOB_RECHECK)
        elif deciding.awaiting_observation(trial):
            seen = deciding.Seen()
        else:
            if not trial.spec.retain_run:
                self._delete_job(ctx, raw)
            return Result.done()
        now = ctx.clock.now().timestamp()
        try:
            decision = deciding.decide(
                trial, seen, now=_stamp(now), now_ts=now, metrics_timeout=self.metrics_timeout
            )
        except conditions.IllegalTransition as e:
            # Someone else wrote conditions this controller cannot follow; retrying won't help.
            raise errors.TerminalError(f"Trial {key}: {e}") from e
        if decision.status is not None and ctx.write_status(TRIALS, raw, decision.status):
            for event in decision.events:
                if event != TrialCondition.CREATED:
                    ctx.log.info("trial %s", event)
        if decision.requeue_after is not None:
            return Result.after(decision.requeue_after)
        return Result.done()


def _no_job_message(raw: Obj, error: kinds.KindError) -> str:
    """Why a Trial has no job to run, for its Failed condition. The experiment-controller
    creates a Trial whose template it could not render without runSpec and with the reason
    (naming the template's field and the fix), so that reason is what the Experiment's author
    reads; a Trial made by hand gets the runSpec's own fault."""
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    reason = annotations.get(naming.ANNOTATION_RENDER_ERROR)
    if isinstance(reason, str) and reason:
        return reason
    return f"{error}: set spec.runSpec to the job to run (an object with apiVersion and kind)"


def _fields(rules: jobstatus.ConditionRules) -> tuple[tuple[str, str], ...]:
    """The rules by the name of their field in the trial template (for messages)."""
    return (
        ("successCondition", rules.success_condition),
        ("failureCondition", rules.failure_condition),
    )


def _stamp(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
