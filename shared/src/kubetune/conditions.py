"""Condition types, reasons and the legal transitions of Experiments, Suggestions and Trials.

One generic state machine serves the three kinds; each kind is a transition table keyed by the
object's last condition, because the last condition is what users see (`kubectl get`) and what
every controller branches on. Setting a condition follows upstream: the same type with the same
status and reason changes nothing (not even the times); otherwise the old entry is removed and the
new one appended, keeping `lastTransitionTime` when only the reason or message changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from kubetune import clock
from kubetune.plain import Frozen
from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    # Imported where a Condition is made (`set_condition`): the names and `trial_state` of
    # raw dicts serve the trial pod's collector, which does not load pydantic.
    from kubetune.api.base import Condition

TRUE = "True"
FALSE = "False"


class ExperimentCondition(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class ExperimentReason(StrEnum):
    CREATED = "ExperimentCreated"
    RUNNING = "ExperimentRunning"
    RESTARTING = "ExperimentRestarting"
    GOAL_REACHED = "ExperimentGoalReached"
    MAX_TRIALS_REACHED = "ExperimentMaxTrialsReached"
    SUGGESTION_END_REACHED = "ExperimentSuggestionEndReached"
    FAILED = "ExperimentFailed"


class SuggestionCondition(StrEnum):
    CREATED = "Created"
    DEPLOYMENT_READY = "DeploymentReady"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class SuggestionReason(StrEnum):
    CREATED = "SuggestionCreated"
    DEPLOYMENT_READY = "DeploymentReady"
    DEPLOYMENT_NOT_READY = "DeploymentNotReady"
    RUNNING = "SuggestionRunning"
    FAILED = "SuggestionFailed"
    EXPERIMENT_SUCCEEDED = "Experiment is succeeded"
    SUGGESTION_SUCCEEDED = "Suggestion is succeeded"
    RESTARTING = "Experiment is restarting"


class TrialCondition(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    KILLED = "Killed"
    FAILED = "Failed"
    METRICS_UNAVAILABLE = "MetricsUnavailable"
    EARLY_STOPPED = "EarlyStopped"


class TrialReason(StrEnum):
    CREATED = "TrialCreated"
    RUNNING = "TrialRunning"
    SUCCEEDED = "TrialSucceeded"
    FAILED = "TrialFailed"
    KILLED = "TrialKilled"
    METRICS_UNAVAILABLE = "MetricsUnavailable"
    EARLY_STOPPED = "TrialEarlyStopped"


TRIAL_COMPLETED = frozenset(
    {
        TrialCondition.SUCCEEDED,
        TrialCondition.KILLED,
        TrialCondition.FAILED,
        TrialCondition.METRICS_UNAVAILABLE,
        TrialCondition.EARLY_STOPPED,
    }
)


class TrialState(StrEnum):
    """What a Trial is, as every reader says it: the experiment's counts, the CLI, the algorithm."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    KILLED = "Killed"
    EARLY_STOPPED = "EarlyStopped"
    METRICS_UNAVAILABLE = "MetricsUnavailable"


# Upstream's experiment summary: the first of these that is true, else Pending.
_TRIAL_STATE_ORDER = (
    TrialCondition.KILLED,
    TrialCondition.FAILED,
    TrialCondition.SUCCEEDED,
    TrialCondition.EARLY_STOPPED,
    TrialCondition.RUNNING,
    TrialCondition.METRICS_UNAVAILABLE,
)


def trial_state(conds: Iterable[Condition | Mapping[str, Any]] | None) -> TrialState:
    """A Trial's state from its conditions (typed, or the raw dicts of a cached object).

    The one rule, upstream's: the first true of Killed, Failed, Succeeded, EarlyStopped, Running,
    MetricsUnavailable, else Pending. Not the last condition: an EarlyStopped Trial that later
    became MetricsUnavailable is EarlyStopped, and a Trial only Created is Pending.
    """
    true_types: set[object] = set()
    for condition in conds or ():
        if isinstance(condition, Mapping):
            if condition.get("status") == TRUE:
                true_types.add(condition.get("type"))
        elif condition.status == TRUE:
            true_types.add(condition.type)
    for type_ in _TRIAL_STATE_ORDER:
        if type_ in true_types:
            return TrialState(type_.value)
    return TrialState.PENDING


State = tuple[str, str]
"""(condition type, status) of an object's last condition; None before the first one."""


class IllegalTransition(ValueError):
    """A controller tried to move an object along an edge its kind's table does not have."""


def rfc3339_now() -> str:
    """The system clock's time as a condition timestamp."""
    return clock.rfc3339(clock.SYSTEM.now())


def find(conditions: Sequence[Condition] | None, type_: str) -> Condition | None:
    for condition in conditions or ():
        if condition.type == type_:
            return condition
    return None


def is_true(conditions: Sequence[Condition] | None, type_: str) -> bool:
    condition = find(conditions, type_)
    return condition is not None and condition.status == TRUE


def last_state(conditions: Sequence[Condition] | None) -> State | None:
    if not conditions:
        return None
    last = conditions[-1]
    return (last.type, last.status)


def set_condition(
    conditions: Sequence[Condition] | None,
    type_: str,
    status: str,
    reason: str,
    message: str,
    *,
    now: str | None = None,
) -> tuple[list[Condition], bool]:
    """Return the new list and whether anything changed (a same status+reason set is a no-op)."""
    from kubetune.api.base import Condition

    current = list(conditions or ())
    existing = find(current, type_)
    if existing is not None and existing.status == status and existing.reason == reason:
        return current, False
    stamp = now or rfc3339_now()
    transition = stamp
    if existing is not None and existing.status == status and existing.last_transition_time:
        transition = existing.last_transition_time
    updated = [c for c in current if c.type != type_]
    updated.append(
        Condition(
            type=type_,
            status=status,
            reason=reason,
            message=message,
            last_update_time=stamp,
            last_transition_time=transition,
        )
    )
    return updated, True


def remove_condition(
    conditions: Sequence[Condition] | None, type_: str
) -> tuple[list[Condition], bool]:
    current = list(conditions or ())
    kept = [c for c in current if c.type != type_]
    return kept, len(kept) != len(current)


class Machine(Frozen):
    """The legal moves of one kind: from the last condition's state to the next condition set."""

    __slots__ = ("kind", "transitions")

    def __init__(self, kind: str, transitions: Mapping[State | None, frozenset[State]]) -> None:
        self.kind = kind
        self.transitions = transitions

    def allows(self, conditions: Sequence[Condition] | None, type_: str, status: str) -> bool:
        existing = find(conditions, type_)
        if (
            existing is not None
            and existing.status == status
            and existing is (conditions or [])[-1]
        ):
            return True  # re-setting the current state with another reason is not a move
        return (type_, status) in self.transitions.get(last_state(conditions), frozenset())

    def set(
        self,
        conditions: Sequence[Condition] | None,
        type_: str,
        status: str,
        reason: str,
        message: str,
        *,
        now: str | None = None,
    ) -> tuple[list[Condition], bool]:
        """`set_condition`, refusing moves the table does not list.

        Raises:
            IllegalTransition: the move is not in this kind's table.
        """
        existing = find(conditions, type_)
        if existing is not None and existing.status == status and existing.reason == reason:
            return list(conditions or ()), False
        if not self.allows(conditions, type_, status):
            raise IllegalTransition(
                f"{self.kind}: cannot set {type_}={status} after {last_state(conditions)}"
            )
        return set_condition(conditions, type_, status, reason, message, now=now)


def _t(type_: str) -> State:
    return (str(type_), TRUE)


def _f(type_: str) -> State:
    return (str(type_), FALSE)


_E = ExperimentCondition
EXPERIMENT = Machine(
    "Experiment",
    {
        None: frozenset({_t(_E.CREATED)}),
        _t(_E.CREATED): frozenset({_t(_E.RUNNING), _t(_E.SUCCEEDED), _t(_E.FAILED)}),
        _t(_E.RUNNING): frozenset({_f(_E.RUNNING), _t(_E.SUCCEEDED), _t(_E.FAILED)}),
        _f(_E.RUNNING): frozenset({_t(_E.SUCCEEDED), _t(_E.FAILED), _t(_E.RUNNING)}),
        _t(_E.SUCCEEDED): frozenset({_t(_E.RESTARTING)}),
        _t(_E.RESTARTING): frozenset(
            {_t(_E.RUNNING), _f(_E.RUNNING), _t(_E.SUCCEEDED), _t(_E.FAILED)}
        ),
        _t(_E.FAILED): frozenset(),
    },
)

_S = SuggestionCondition
SUGGESTION = Machine(
    "Suggestion",
    {
        None: frozenset({_t(_S.CREATED)}),
        # Running=False: the Experiment ended before the Deployment was made (completion).
        _t(_S.CREATED): frozenset(
            {_f(_S.DEPLOYMENT_READY), _t(_S.DEPLOYMENT_READY), _f(_S.RUNNING), _t(_S.FAILED)}
        ),
        _f(_S.DEPLOYMENT_READY): frozenset(
            {_t(_S.DEPLOYMENT_READY), _t(_S.SUCCEEDED), _f(_S.RUNNING), _t(_S.FAILED)}
        ),
        _t(_S.DEPLOYMENT_READY): frozenset(
            {_t(_S.RUNNING), _f(_S.DEPLOYMENT_READY), _f(_S.RUNNING), _t(_S.FAILED)}
        ),
        _t(_S.RUNNING): frozenset(
            {_f(_S.RUNNING), _f(_S.DEPLOYMENT_READY), _t(_S.DEPLOYMENT_READY), _t(_S.FAILED)}
        ),
        _f(_S.RUNNING): frozenset(
            {
                _f(_S.DEPLOYMENT_READY),
                _t(_S.DEPLOYMENT_READY),
                _t(_S.RUNNING),
                _t(_S.SUCCEEDED),
                _t(_S.FAILED),
            }
        ),
        _t(_S.SUCCEEDED): frozenset({_f(_S.RUNNING)}),
        _t(_S.FAILED): frozenset(),
    },
)

_T = TrialCondition
_TRIAL_ENDINGS = frozenset(
    {
        _t(_T.SUCCEEDED),
        _t(_T.FAILED),
        _t(_T.KILLED),
        _t(_T.METRICS_UNAVAILABLE),
        _t(_T.EARLY_STOPPED),
    }
)
TRIAL = Machine(
    "Trial",
    {
        None: frozenset({_t(_T.CREATED)}),
        _t(_T.CREATED): _TRIAL_ENDINGS | {_t(_T.RUNNING)},
        _t(_T.RUNNING): _TRIAL_ENDINGS | {_f(_T.RUNNING)},
        _f(_T.RUNNING): _TRIAL_ENDINGS | {_t(_T.RUNNING)},
        _t(_T.EARLY_STOPPED): frozenset({_t(_T.METRICS_UNAVAILABLE)}),
        _t(_T.SUCCEEDED): frozenset(),
        _t(_T.FAILED): frozenset(),
        _t(_T.KILLED): frozenset(),
        _t(_T.METRICS_UNAVAILABLE): frozenset(),
    },
)
