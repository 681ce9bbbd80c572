"""Pure planning: from an Experiment, its Trials and its Suggestion to what should happen next.

`plan` is the whole decision of one reconcile with no I/O: the next Experiment
status (counts, bounded name lists, optimal trial, conditions, times), the Suggestion's wanted
`spec.requests`, the assignments to turn into Trials now, and events to record. `reconciling`
reads the inputs and carries the plan out with one status write.

Deviations from upstream, all to keep the promise "never more than maxTrialCount Trials":
- `requests` never exceeds maxTrialCount (plus one for each assignment whose Trial was deleted
  after the algorithm compacted it: a new assignment replaces it) and never shrinks;
  MetricsUnavailable trials count as finished for the parallelism arithmetic too (upstream
  left them out, so an experiment with metrics-unavailable trials could ask for more than
  maxTrialCount);
- only assignments at an index below maxTrialCount (plus those lost) become Trials, and never
  more than `parallel - active` per pass nor more than `maxTrialCount - len(trials)` in total;
- lowering parallelTrialCount does not delete running trials (upstream deleted the newest);
  new trials wait until the active count is below the new limit;
- EarlyStopped trials without an objective are not subtracted from `requests`;
- for algorithms that do not learn from results, `requests` runs `parallel` ahead of the Trials
  (`assignments_ahead`), so a finished Trial's successor never waits for the algorithm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kubetune import conditions, multiobjective, observations
from kubetune.api.common import Observation
from kubetune.api.experiment import Experiment, ExperimentStatus, OptimalTrial, ResumePolicy
from kubetune.api.suggestion import TrialAssignment
from kubetune.api.warmstart import WarmStartStatus
from kubetune.conditions import (
    EXPERIMENT,
    FALSE,
    TRUE,
    ExperimentCondition,
    ExperimentReason,
    SuggestionCondition,
    TrialState,
)
from kubetune.kube import Obj
from kubetune_experiment_controller.fronts import pareto_front
from kubetune_experiment_controller.summaries import (
    Counts,
    TrialSummary,
    count,
    in_creation_order,
)
from kubetune_experiment_controller.summaries import optimal as find_optimal

DEFAULT_PARALLEL = 3
DEFAULT_MAX_LISTED = 1000
EXHAUSTED_ANNOTATION = "kubetune.io/search-exhausted"
EXHAUSTED_SETTING = "search_exhausted"
ASSIGN_AHEAD = frozenset({"random", "grid"})
"""Algorithms whose assignments do not depend on results: asked for ahead of need."""

MSG_CREATED = "Experiment is created"
MSG_RUNNING = "Experiment is running"
MSG_RESTARTING = "Experiment is restarted"
MSG_GOAL = "Experiment has succeeded because Objective goal has reached"
MSG_MAX_TRIALS = "Experiment has succeeded because max trial count has reached"
MSG_END = "Experiment has succeeded because suggestion service has reached the end"
MSG_MAX_FAILED = "Experiment has failed because max failed count has reached"
MSG_SUGGESTION_FAILED = "Suggestion has failed"

_LISTS: dict[TrialState, str] = {
    TrialState.RUNNING: "running_trial_list",
    TrialState.PENDING: "pending_trial_list",
    TrialState.FAILED: "failed_trial_list",
    TrialState.SUCCEEDED: "succeeded_trial_list",
    TrialState.KILLED: "killed_trial_list",
    TrialState.EARLY_STOPPED: "early_stopped_trial_list",
    TrialState.METRICS_UNAVAILABLE: "metrics_unavailable_trial_list",
}
_COUNTERS: dict[TrialState, str] = {
    TrialState.SUCCEEDED: "trials_succeeded",
    TrialState.FAILED: "trials_failed",
    TrialState.KILLED: "trials_killed",
    TrialState.PENDING: "trials_pending",
    TrialState.RUNNING: "trials_running",
    TrialState.EARLY_STOPPED: "trials_early_stopped",
    TrialState.METRICS_UNAVAILABLE: "trial_metrics_unavailable",
}


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Plan:
    status: ExperimentStatus
    create_suggestion: bool = False
    requests: int | None = None
    """The Suggestion's `spec.requests` to write (None: leave it)."""
    new_trials: list[TrialAssignment] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None


def parallel_of(experiment: Experiment) -> int:
    value = experiment.spec.parallel_trial_count
    return DEFAULT_PARALLEL if value is None else value


def is_completed(status: ExperimentStatus) -> bool:
    return conditions.is_true(status.conditions, ExperimentCondition.SUCCEEDED) or (
        conditions.is_true(status.conditions, ExperimentCondition.FAILED)
    )


def search_exhausted(suggestion: Obj) -> bool:
    """The algorithm has nothing more to suggest (a finished grid): annotation or setting."""
    annotations = (suggestion.get("metadata") or {}).get("annotations") or {}
    if annotations.get(EXHAUSTED_ANNOTATION) == "true":
        return True
    settings = (suggestion.get("status") or {}).get("algorithmSettings") or []
    return any(
        s.get("name") == EXHAUSTED_SETTING and str(s.get("value")).lower() == "true"
        for s in settings
    )


def suggestion_failed(suggestion: Obj) -> bool:
    return any(
        c.get("type") == SuggestionCondition.FAILED and c.get("status") == TRUE
        for c in (suggestion.get("status") or {}).get("conditions") or []
    )


@dataclass(frozen=True)
class SuggestionView:
    """What planning reads of a Suggestion. Assignments stay raw dicts: validating 10,000 of
    them into models on every reconcile would cost about half a second."""

    requests: int = 0
    failed: bool = False
    exhausted: bool = False
    assignments: Sequence[Obj] = ()
    offset: int = 0
    """The index of `assignments[0]`: the algorithm drops the oldest name-only entries at
    scale, `suggestionCount` still counts them."""
    warm_start: Obj | None = None
    """The algorithm's `status.warmStart`, mirrored on the Experiment (imported results are
    not Trials: they change no count)."""

    @staticmethod
    def of(suggestion: Obj) -> SuggestionView:
        status = suggestion.get("status") or {}
        assignments = tuple(status.get("suggestions") or ())
        count = int(status.get("suggestionCount") or 0)
        return SuggestionView(
            requests=int((suggestion.get("spec") or {}).get("requests") or 0),
            failed=suggestion_failed(suggestion),
            exhausted=search_exhausted(suggestion),
            assignments=assignments,
            offset=max(0, count - len(assignments)),
            warm_start=status.get("warmStart"),
        )


def bounded(names: list[str], limit: int) -> list[str]:
    """The newest `limit` names (names come oldest first)."""
    return names[-limit:] if limit >= 0 and len(names) > limit else names


def apply_counts(status: ExperimentStatus, counts: Counts, max_listed: int) -> None:
    """Exact counters; name lists bounded to the newest `max_listed` per state."""
    status.trials = counts.total
    for state, attribute in _COUNTERS.items():
        setattr(status, attribute, counts[state])
    for state, attribute in _LISTS.items():
        names = bounded(counts.names.get(state, []), max_listed)
        setattr(status, attribute, names or None)


def _complete(status: ExperimentStatus, type_: str, reason: str, message: str, now: str) -> None:
    """Succeeded or Failed; an existing Running goes False first with its own reason."""
    running = conditions.find(status.conditions, ExperimentCondition.RUNNING)
    conds = list(status.conditions or [])
    if running is not None and running.status == TRUE:
        conds, _ = EXPERIMENT.set(
            conds,
            ExperimentCondition.RUNNING,
            FALSE,
            running.reason or "",
            running.message or "",
            now=now,
        )
    conds, _ = EXPERIMENT.set(conds, type_, TRUE, reason, message, now=now)
    status.conditions = conds
    status.completion_time = now


def assignments_ahead(experiment: Experiment) -> int:
    """How many assignments to ask for beyond the Trials that may start now: `parallel` for
    random and grid, whose points do not depend on results, so a finished Trial's successor is
    created by the pass that sees it finish instead of after a round trip through the algorithm
    (about half a second on a busy node). 0 for the algorithms that learn from results
    (sobol too: Optuna's QMC sampler draws at random until a Trial has completed), nor with
    `spec.earlyStopping` (an assignment's rules are those of the moment it is handed out)."""
    algorithm = experiment.spec.algorithm
    name = algorithm.algorithm_name if algorithm is not None else ""
    if name not in ASSIGN_AHEAD or experiment.spec.early_stopping is not None:
        return 0
    return parallel_of(experiment)


def compacted_without_trial(suggestion: SuggestionView | None, existing: set[str]) -> list[str]:
    """Names of name-only entries (compacted by the algorithm once their Trial existed) with no
    Trial in `existing`: Trials deleted since, or (for a moment) not in a lagging cache yet.
    Their parameters are gone, so a deleted one is replaced by a new assignment, not
    recreated; `reconciling` confirms each with the API server before it counts as lost."""
    if suggestion is None:
        return []
    return [
        name
        for a in suggestion.assignments
        if "parameterAssignments" not in a and (name := a.get("name")) and name not in existing
    ]


def required_requests(
    experiment: Experiment, counts: Counts, current: int, lost: int = 0
) -> tuple[int, int]:
    """(wanted spec.requests, how many trials may start now). `lost` assignments (their Trial
    deleted after the algorithm compacted them) take an index each, so the cap on requests is
    maxTrialCount plus them: a deleted Trial is replaced instead of leaving the Experiment
    short of maxTrialCount forever."""
    parallel = parallel_of(experiment)
    maximum = experiment.spec.max_trial_count
    required = parallel if maximum is None else max(0, min(maximum - counts.finished, parallel))
    add = max(0, required - counts.active)
    # Above a lowered parallelTrialCount no slot opens soon: nothing is asked ahead then.
    ahead = assignments_ahead(experiment) if counts.active <= parallel else 0
    wanted = counts.total + lost + add + ahead
    if maximum is not None:
        wanted = min(wanted, maximum + lost)
    return max(wanted, current), add


def select_assignments(
    experiment: Experiment,
    suggestion: SuggestionView | None,
    existing: set[str],
    total: int,
    add: int,
    lost: int = 0,
) -> list[TrialAssignment]:
    """Assignments without a Trial, oldest first, within parallelism and maxTrialCount (the
    index limit moved on by the `lost` assignments; the number of Trials is not)."""
    if suggestion is None or add <= 0:
        return []
    maximum = experiment.spec.max_trial_count
    room = add if maximum is None else min(add, maximum - total)
    chosen: list[TrialAssignment] = []
    for index, assignment in enumerate(suggestion.assignments, start=suggestion.offset):
        if len(chosen) >= room:
            break
        if maximum is not None and index >= maximum + lost:
            break
        # Without parameterAssignments: compacted by the algorithm once its Trial existed.
        if assignment.get("name") not in existing and "parameterAssignments" in assignment:
            chosen.append(TrialAssignment.model_validate(assignment))
    return chosen


def plan(
    experiment: Experiment,
    trials: Sequence[TrialSummary],
    suggestion: SuggestionView | None,
    now: str,
    *,
    max_listed: int = DEFAULT_MAX_LISTED,
    lost: int = 0,
) -> Plan:
    """Everything one reconcile decides (no I/O). `lost`: assignments whose Trial was deleted
    after the algorithm compacted them (`compacted_without_trial`, confirmed absent)."""
    status = (experiment.status or ExperimentStatus()).model_copy(deep=True)
    events: list[Event] = []
    if not conditions.is_true(status.conditions, ExperimentCondition.CREATED):
        status.conditions, _ = EXPERIMENT.set(
            status.conditions,
            ExperimentCondition.CREATED,
            TRUE,
            ExperimentReason.CREATED,
            MSG_CREATED,
            now=now,
        )
        status.start_time = status.start_time or now
        status.completion_time = None

    ordered = in_creation_order(trials)
    counts = count(ordered)
    apply_counts(status, counts, max_listed)
    if suggestion is not None and suggestion.warm_start is not None:
        status.warm_start = WarmStartStatus.model_validate(suggestion.warm_start)
    objective = experiment.spec.objective
    best = find_optimal(objective, ordered) if objective is not None else None
    if best is not None:
        status.current_optimal_trial = OptimalTrial(
            best_trial_name=best.name,
            parameter_assignments=best.assignments,
            observation=best.observation,
        )
    elif status.current_optimal_trial is None:
        # Upstream always writes it (empty until a trial succeeds); SDK code reading
        # `status.current_optimal_trial.best_trial_name` must not meet None.
        status.current_optimal_trial = OptimalTrial(observation=Observation())
    if objective is not None and multiobjective.is_multi(objective):
        # currentOptimalTrial stays Katib's: the best trial by the first objective.
        front = pareto_front(objective, ordered)
        status.pareto_front, status.pareto_front_size = front.trials, front.size

    if is_completed(status):
        return _plan_completed(experiment, status, counts, events, now)

    maximum = experiment.spec.max_trial_count
    max_failed = experiment.spec.max_failed_trial_count
    failed = counts[TrialState.FAILED] + counts[TrialState.METRICS_UNAVAILABLE]
    existing = {t.name for t in trials}
    assignments = suggestion.assignments if suggestion is not None else ()
    # Entries without a Trial in the cache, less the lost ones (name-only, their Trial
    # confirmed deleted: they can never become Trials); one missing only from a lagging cache
    # still holds the Experiment open.
    unconsumed = sum(1 for a in assignments if a.get("name") not in existing) - lost
    if (
        objective is not None
        and best is not None
        and observations.goal_reached(objective, best.value)
    ):
        _complete(
            status, ExperimentCondition.SUCCEEDED, ExperimentReason.GOAL_REACHED, MSG_GOAL, now
        )
    elif max_failed is not None and failed != 0 and failed >= max_failed:
        _complete(status, ExperimentCondition.FAILED, ExperimentReason.FAILED, MSG_MAX_FAILED, now)
    elif maximum is not None and counts.finished >= maximum:
        _complete(
            status,
            ExperimentCondition.SUCCEEDED,
            ExperimentReason.MAX_TRIALS_REACHED,
            MSG_MAX_TRIALS,
            now,
        )
    elif suggestion is not None and suggestion.failed:
        _complete(
            status, ExperimentCondition.FAILED, ExperimentReason.FAILED, MSG_SUGGESTION_FAILED, now
        )
    elif suggestion is not None and suggestion.exhausted and counts.active == 0 and unconsumed <= 0:
        _complete(
            status,
            ExperimentCondition.SUCCEEDED,
            ExperimentReason.SUGGESTION_END_REACHED,
            MSG_END,
            now,
        )
    elif counts.total > 0:
        status.conditions, _ = EXPERIMENT.set(
            status.conditions,
            ExperimentCondition.RUNNING,
            TRUE,
            ExperimentReason.RUNNING,
            MSG_RUNNING,
            now=now,
        )
    if is_completed(status):
        return Plan(status=status, events=events)

    current = suggestion.requests if suggestion is not None else 0
    wanted, add = required_requests(experiment, counts, current, lost)
    new_trials = select_assignments(experiment, suggestion, existing, counts.total, add, lost)
    return Plan(
        status=status,
        create_suggestion=suggestion is None,
        requests=wanted if suggestion is None or wanted != current else None,
        new_trials=new_trials,
        events=events,
    )


def restart_wanted(experiment: Experiment, status: ExperimentStatus, counts: Counts) -> bool:
    """Succeeded by max trials, and maxTrialCount now above the trials there are (or unset)."""
    succeeded = conditions.find(status.conditions, ExperimentCondition.SUCCEEDED)
    if succeeded is None or succeeded.status != TRUE:
        return False
    if succeeded.reason != ExperimentReason.MAX_TRIALS_REACHED:
        return False
    maximum = experiment.spec.max_trial_count
    return maximum is None or maximum > counts.total


def _plan_completed(
    experiment: Experiment,
    status: ExperimentStatus,
    counts: Counts,
    events: list[Event],
    now: str,
) -> Plan:
    if not restart_wanted(experiment, status, counts):
        return Plan(status=status, events=events)
    policy = experiment.spec.resume_policy or ResumePolicy.NEVER
    if policy not in (ResumePolicy.LONG_RUNNING, ResumePolicy.FROM_VOLUME):
        events.append(
            Event(
                "Warning",
                "RestartRefused",
                f"maxTrialCount is {experiment.spec.max_trial_count} but the Experiment stays "
                f"completed: resumePolicy {policy.value or 'Never'} does not allow a restart",
            )
        )
        return Plan(status=status, events=events)
    status.conditions, _ = EXPERIMENT.set(
        status.conditions,
        ExperimentCondition.RESTARTING,
        TRUE,
        ExperimentReason.RESTARTING,
        MSG_RESTARTING,
        now=now,
    )
    status.conditions, _ = conditions.remove_condition(
        status.conditions, ExperimentCondition.SUCCEEDED
    )
    status.conditions, _ = conditions.remove_condition(
        status.conditions, ExperimentCondition.FAILED
    )
    status.completion_time = None
    # Written alone, so the suggestion-controller sees Restarting before new requests arrive.
    return Plan(status=status, events=events, requeue_after=0.2)
