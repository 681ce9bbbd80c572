"""What one pass does with a Suggestion, from what was read: pure, so every rule is a unit test.

`reconciling` reads the Suggestion, its Experiment and the objects it owns (`Seen`), calls
`decide`, and carries the `Decision` out: creates, then at most one status patch, then deletes.
Conditions move only along `conditions.SUGGESTION` (an edge the table lacks raises
`IllegalTransition`, which the reconciler turns into a `TerminalError`).

Rules (the resume policies of docs/user-guide.md; where Katib's prose and code disagree, its
code wins):

* Failed: the Deployment and Service go; nothing else.
* Succeeded: a FromVolume Suggestion whose Experiment restarted gets Running=False ("Experiment is
  restarting", "Suggestion is not running") and loses Succeeded; the next passes bring the
  Deployment back on the same PVC. Otherwise the Deployment and Service go.
* The Experiment ended and the policy is Never or FromVolume: Running=False and
  DeploymentReady=False ("Suggestion is succeeded"), Succeeded=True ("Experiment is succeeded",
  the message names the policy), completionTime; then the Deployment and Service go (PVC and PV
  stay). LongRunning is never completed here. A Suggestion not yet Created gets Created first, so
  every Suggestion's record starts with Created (the state machine's only first move).
* Not Created yet: Created and startTime, alone (as upstream; its event brings the next pass).
* Invalid algorithm settings or no katib-config entry for the algorithm: Failed, "Validation
  failed: <problems>". A Katib-protocol image judges its own settings: kubetune's rules are
  skipped, and the refusal its bridge sidecar wrote (`status.algorithmSettings`
  `kubetune_validation_failed`) fails the Suggestion with upstream's message.
* FromVolume with a PV in the config: the finalizer first, alone (a metadata write; its event
  brings the next pass), because only the finalizer deletes a cluster-scoped PV.
* A fallback name `owning` chose because another owner holds Katib's: recorded in the
  Suggestion's annotations first, alone (a metadata write; its event brings the next pass).
* Then whatever is missing is created (PV, PVC, the algorithm's ServiceAccount and RoleBinding
  unless the config names its own account, Service, Deployment) and the Deployment's availability
  gives DeploymentReady=False (look again in 5 s) or DeploymentReady=True then Running=True.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubetune import algorithmsettings, conditions, nas
from kubetune.api.base import Condition
from kubetune.api.experiment import Experiment, ResumePolicy
from kubetune.api.suggestion import Suggestion
from kubetune.conditions import (
    FALSE,
    SUGGESTION,
    TRUE,
    ExperimentCondition,
    SuggestionCondition,
    SuggestionReason,
)
from kubetune.config import ConfigError, KatibConfig
from kubetune_suggestion_controller import composing
from kubetune_suggestion_controller.composing import Names, Obj

S = SuggestionCondition
R = SuggestionReason

FINALIZER = "kubetune.kubeflow.org/suggestion-volume"
NOT_READY_REQUEUE = 5.0
"""Seconds until a pass looks at a Deployment that is not available yet (besides its events)."""

MSG_CREATED = "Suggestion is created"
MSG_DEPLOYMENT_NOT_READY = "Deployment is not ready"
MSG_DEPLOYMENT_READY = "Deployment is ready"
MSG_RUNNING = "Suggestion is running"
MSG_NOT_RUNNING = "Suggestion is not running"
MSG_SUCCEEDED = "Suggestion is succeeded"
MSG_NEVER = "Suggestion is succeeded, can't be restarted"
MSG_FROM_VOLUME = "Suggestion is succeeded, suggestion volume is not deleted, can be restarted"
MSG_VALIDATION = "Validation failed: "


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
    """The Suggestion's own policy, else its Experiment's, else Never (upstream's default)."""
    policy = suggestion.spec.resume_policy or (
        experiment.spec.resume_policy if experiment else None
    )
    return policy or ResumePolicy.NEVER


def deployment_available(deployment: Obj | None) -> bool:
    """Available=True with a ready replica; without an Available condition, a ready replica."""
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Available":
            return bool(condition.get("status") == TRUE and status.get("readyReplicas"))
    return bool(status.get("readyReplicas"))


@dataclass(frozen=True)
class Seen:
    """What the reconciler read besides the Suggestion; None/False means absent (an object of
    another owner under the name counts as absent: it is never adopted)."""

    experiment: Experiment | None = None
    deployment: Obj | None = None
    service: bool = False
    pvc: bool = False
    pv: bool = False
    service_account: bool = False
    role_binding: bool = False
    names: Names | None = None
    """The objects' names (`owning`); None = Katib's."""
    record: dict[str, str] = field(default_factory=dict)
    """Fallback names to record in the Suggestion's annotations (annotation key -> name)."""


@dataclass(frozen=True)
class Decision:
    """The pass, in order: `create`, then `status` (one patch), then `delete`.

    `add_finalizer` and `annotate` are passes of their own (a metadata write, nothing else
    happens with it).
    """

    create: list[Obj] = field(default_factory=list)
    status: dict[str, Any] | None = None  # status fields to patch; None = nothing changed
    delete: list[tuple[str, str]] = field(default_factory=list)  # (kind, name)
    add_finalizer: bool = False
    annotate: dict[str, str] = field(default_factory=dict)
    """Annotations to add to the Suggestion, in a pass of their own (like `add_finalizer`)."""
    requeue_after: float | None = None
    note: str = ""  # what happened, for the log


class _Status:
    """The Suggestion's conditions and times as they become; compared with the read ones."""

    def __init__(self, suggestion: Suggestion, now: str) -> None:
        status = suggestion.status
        self.now = now
        self.before: list[Condition] = list((status.conditions if status else None) or [])
        self.conds = list(self.before)
        self.times: dict[str, str] = {}
        self._start = status.start_time if status else None

    def put(self, type_: str, status: str, reason: str, message: str) -> None:
        self.conds, _ = SUGGESTION.set(self.conds, type_, status, reason, message, now=self.now)

    def remove(self, type_: str) -> None:
        self.conds, _ = conditions.remove_condition(self.conds, type_)

    def created(self) -> None:
        if conditions.find(self.conds, S.CREATED) is None:
            self.put(S.CREATED, TRUE, R.CREATED, MSG_CREATED)
            if not self._start:
                self.times["startTime"] = self.now

    def completed(self) -> None:
        self.times["completionTime"] = self.now

    def patch(self) -> dict[str, Any] | None:
        """The status fields to write, or None when they equal what was read."""
        wire = [c.to_wire() for c in self.conds]
        if wire == [c.to_wire() for c in self.before] and not self.times:
            return None
        return {"conditions": wire, **self.times}


def _names(suggestion: Suggestion, seen: Seen) -> Names:
    return seen.names or composing.katib_names(suggestion)


def _teardown(suggestion: Suggestion, seen: Seen) -> list[tuple[str, str]]:
    """(kind, name) of the Deployment and Service, which live only while the Suggestion runs."""
    names = _names(suggestion, seen)
    present = {"Deployment": seen.deployment is not None, "Service": seen.service}
    return [(kind, names.of(kind)) for kind in ("Deployment", "Service") if present[kind]]


def problems_of(
    suggestion: Suggestion, experiment: Experiment | None, config: KatibConfig
) -> list[str]:
    """Why the algorithm cannot run: bad settings, or no katib-config entry for it."""
    algorithm = composing.algorithm_of(suggestion)
    try:
        bridged = config.suggestion(algorithm).katib_grpc()
    except ConfigError:
        bridged = False
    if bridged:
        return []  # the image's ValidateAlgorithmSettings decides (through the bridge)
    problems = algorithmsettings.validate(
        algorithm,
        suggestion.spec.algorithm.algorithm_settings if suggestion.spec.algorithm else None,
        experiment.spec.parameters if experiment else None,
        experiment.spec.parallel_trial_count if experiment else None,
    )
    if experiment is not None:  # upstream's NAS services check nasConfig here too
        problems[:0] = [
            p.message for p in nas.validate_config(algorithm, experiment.spec.nas_config)
        ]
    try:
        config.suggestion(algorithm)
    except ConfigError as e:
        problems.append(str(e))
    return problems


def decide(suggestion: Suggestion, seen: Seen, config: KatibConfig, *, now: str) -> Decision:
    """The whole decision of one pass over a Suggestion that is not being deleted.

    Raises:
        IllegalTransition: the read conditions allow no move the rules want (someone else wrote
            them); retrying cannot help.
    """
    st = _Status(suggestion, now)
    policy = policy_of(suggestion, seen.experiment)
    state = experiment_state(seen.experiment)

    if conditions.is_true(st.conds, S.FAILED):
        return Decision(delete=_teardown(suggestion, seen))
    if conditions.is_true(st.conds, S.SUCCEEDED):
        if state == "restarting" and policy == ResumePolicy.FROM_VOLUME:
            st.put(S.RUNNING, FALSE, R.RESTARTING, MSG_NOT_RUNNING)
            st.remove(S.SUCCEEDED)
            return Decision(status=st.patch(), note="restarting from its volume")
        return Decision(delete=_teardown(suggestion, seen))
    if state == "completed" and policy in (ResumePolicy.NEVER, ResumePolicy.FROM_VOLUME):
        st.created()
        st.put(S.RUNNING, FALSE, R.SUGGESTION_SUCCEEDED, MSG_SUCCEEDED)
        st.put(S.DEPLOYMENT_READY, FALSE, R.SUGGESTION_SUCCEEDED, MSG_SUCCEEDED)
        message = MSG_FROM_VOLUME if policy == ResumePolicy.FROM_VOLUME else MSG_NEVER
        st.put(S.SUCCEEDED, TRUE, R.EXPERIMENT_SUCCEEDED, message)
        st.completed()
        return Decision(status=st.patch(), delete=_teardown(suggestion, seen), note="succeeded")

    if conditions.find(st.conds, S.CREATED) is None:
        st.created()
        return Decision(status=st.patch())

    refusal = algorithmsettings.validation_failure(
        suggestion.status.algorithm_settings if suggestion.status else None
    )
    problems = [refusal] if refusal else problems_of(suggestion, seen.experiment, config)
    if problems:
        st.put(S.FAILED, TRUE, R.FAILED, MSG_VALIDATION + "; ".join(problems))
        return Decision(status=st.patch(), note="failed validation")
    entry = config.suggestion(composing.algorithm_of(suggestion))
    if seen.record:
        taken = ", ".join(f"{k.rsplit('/', 1)[-1]} {v}" for k, v in seen.record.items())
        return Decision(annotate=dict(seen.record), note=f"Katib's name is taken: {taken}")
    names = _names(suggestion, seen)

    create: list[Obj] = []
    volume = policy == ResumePolicy.FROM_VOLUME
    if volume:
        if entry.persistent_volume_spec:
            if FINALIZER not in (suggestion.metadata.finalizers or []):
                return Decision(add_finalizer=True)
            if not seen.pv:
                create.append(composing.pv(suggestion, entry, names))
        if not seen.pvc:
            create.append(composing.pvc(suggestion, entry, names))
    namespace = suggestion.metadata.namespace
    if not entry.service_account_name and namespace:
        if not seen.service_account:
            create.append(composing.service_account(namespace))
        if not seen.role_binding:
            create.append(composing.role_binding(namespace))
    if not seen.service:
        create.append(composing.service(suggestion, names))
    if seen.deployment is None:
        early = None
        if seen.experiment is not None and seen.experiment.spec.early_stopping is not None:
            early = config.bridged_early_stopping(
                seen.experiment.spec.early_stopping.algorithm_name
            )
        create.append(
            composing.deployment(
                suggestion,
                entry,
                volume,
                bridge_image=config.bridge_image(entry),
                early_stopping=early,
                names=names,
                warm_start=seen.experiment.spec.warm_start if seen.experiment else None,
                state_image=config.cleanup_image(entry),
            )
        )

    if not deployment_available(seen.deployment):
        st.put(S.DEPLOYMENT_READY, FALSE, R.DEPLOYMENT_NOT_READY, MSG_DEPLOYMENT_NOT_READY)
        return Decision(create=create, status=st.patch(), requeue_after=NOT_READY_REQUEUE)
    st.put(S.DEPLOYMENT_READY, TRUE, R.DEPLOYMENT_READY, MSG_DEPLOYMENT_READY)
    st.put(S.RUNNING, TRUE, R.RUNNING, MSG_RUNNING)
    return Decision(create=create, status=st.patch())
