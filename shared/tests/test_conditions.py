"""Condition helpers are idempotent, and each kind moves only along its table."""

from __future__ import annotations

import pytest

from kubetune import conditions as c
from kubetune.api.base import Condition

T, F = c.TRUE, c.FALSE
S = c.SuggestionCondition
R = c.SuggestionReason


def test_same_status_and_reason_changes_nothing_not_even_times() -> None:
    first, changed = c.set_condition(None, "Created", T, "R", "m", now="2026-01-01T00:00:00Z")
    assert changed
    again, changed = c.set_condition(
        first, "Created", T, "R", "other message", now="2026-02-02T00:00:00Z"
    )
    assert not changed
    assert again == first
    assert again[0].last_update_time == "2026-01-01T00:00:00Z"


def test_new_reason_keeps_transition_time_and_moves_to_the_end() -> None:
    conds, _ = c.set_condition(None, "A", T, "r1", "m", now="t1")
    conds, _ = c.set_condition(conds, "B", T, "r", "m", now="t2")
    conds, changed = c.set_condition(conds, "A", T, "r2", "m2", now="t3")
    assert changed
    assert [x.type for x in conds] == ["B", "A"]
    assert (conds[-1].last_transition_time, conds[-1].last_update_time) == ("t1", "t3")


def test_new_status_resets_transition_time() -> None:
    conds, _ = c.set_condition(None, "A", T, "r", "m", now="t1")
    conds, _ = c.set_condition(conds, "A", F, "r", "m", now="t2")
    assert conds[-1].last_transition_time == "t2"


def test_remove_reports_change() -> None:
    conds, _ = c.set_condition(None, "A", T, "r", "m", now="t1")
    assert c.remove_condition(conds, "B") == (conds, False)
    assert c.remove_condition(conds, "A") == ([], True)


Step = tuple[str, str, str]

SUGGESTION_FIRST_RUN: list[Step] = [
    (S.CREATED, T, R.CREATED),
    (S.DEPLOYMENT_READY, F, R.DEPLOYMENT_NOT_READY),
    (S.DEPLOYMENT_READY, T, R.DEPLOYMENT_READY),
    (S.RUNNING, T, R.RUNNING),
    (S.RUNNING, F, R.SUGGESTION_SUCCEEDED),
    (S.DEPLOYMENT_READY, F, R.SUGGESTION_SUCCEEDED),
    (S.SUCCEEDED, T, R.EXPERIMENT_SUCCEEDED),
]
SUGGESTION_RESTART: list[Step] = [
    (S.RUNNING, F, R.RESTARTING),
    (S.DEPLOYMENT_READY, F, R.DEPLOYMENT_NOT_READY),
    (S.DEPLOYMENT_READY, T, R.DEPLOYMENT_READY),
    (S.RUNNING, T, R.RUNNING),
    (S.RUNNING, F, R.SUGGESTION_SUCCEEDED),
    (S.DEPLOYMENT_READY, F, R.SUGGESTION_SUCCEEDED),
    (S.SUCCEEDED, T, R.EXPERIMENT_SUCCEEDED),
]


def _play(
    machine: c.Machine, steps: list[Step], start: list[Condition] | None = None
) -> list[Condition]:
    conds = list(start or [])
    for type_, status, reason in steps:
        conds, changed = machine.set(conds, type_, status, reason, "m")
        assert changed, (type_, status, reason)
        assert c.last_state(conds) == (type_, status)
        if type_ == S.RUNNING and status == F and reason == R.RESTARTING:
            conds, removed = c.remove_condition(conds, S.SUCCEEDED)
            assert removed
    return conds


def test_suggestion_first_run_sequence_of_the_seed() -> None:
    conds = _play(c.SUGGESTION, SUGGESTION_FIRST_RUN)
    assert [(x.type, x.status) for x in conds] == [
        ("Created", T),
        ("Running", F),
        ("DeploymentReady", F),
        ("Succeeded", T),
    ]


def test_suggestion_restart_sequence_of_the_seed() -> None:
    first = _play(c.SUGGESTION, SUGGESTION_FIRST_RUN)
    again = _play(c.SUGGESTION, SUGGESTION_RESTART, first)
    assert c.last_state(again) == ("Succeeded", T)
    # After the restart marker, Succeeded is gone until the run ends again.
    mid = _play(c.SUGGESTION, SUGGESTION_RESTART[:1], first)
    assert c.find(mid, S.SUCCEEDED) is None
    assert c.last_state(mid) == ("Running", F)
    assert mid[-1].reason == "Experiment is restarting"


def test_suggestion_may_end_before_its_deployment_exists() -> None:
    """An Experiment can end between the Suggestion's Created pass and its Deployment."""
    conds = _play(c.SUGGESTION, SUGGESTION_FIRST_RUN[:1] + SUGGESTION_FIRST_RUN[-3:])
    assert c.last_state(conds) == ("Succeeded", T)


@pytest.mark.parametrize(
    ("machine", "steps", "bad"),
    [
        (c.SUGGESTION, [], (S.RUNNING, T)),
        (c.SUGGESTION, SUGGESTION_FIRST_RUN[:1], (S.SUCCEEDED, T)),
        (c.SUGGESTION, [(S.CREATED, T, "x"), (S.FAILED, T, "x")], (S.RUNNING, T)),
        # the seed restarts a Suggestion without a Restarting condition (Running=False instead)
        (c.SUGGESTION, SUGGESTION_FIRST_RUN, ("Restarting", T)),
        (
            c.TRIAL,
            [(c.TrialCondition.CREATED, T, "x"), (c.TrialCondition.SUCCEEDED, T, "x")],
            (c.TrialCondition.FAILED, T),
        ),
        (
            c.TRIAL,
            [(c.TrialCondition.CREATED, T, "x"), (c.TrialCondition.FAILED, T, "x")],
            (c.TrialCondition.RUNNING, T),
        ),
        (
            c.EXPERIMENT,
            [(c.ExperimentCondition.CREATED, T, "x")],
            (c.ExperimentCondition.RESTARTING, T),
        ),
        (
            c.EXPERIMENT,
            [(c.ExperimentCondition.CREATED, T, "x"), (c.ExperimentCondition.FAILED, T, "x")],
            (c.ExperimentCondition.RESTARTING, T),
        ),
    ],
    ids=[
        "suggestion-running-first",
        "suggestion-succeeded-early",
        "suggestion-failed-final",
        "suggestion-has-no-restarting",
        "trial-succeeded-final",
        "trial-failed-final",
        "experiment-restart-unfinished",
        "experiment-failed-final",
    ],
)
def test_illegal_moves_are_refused(
    machine: c.Machine, steps: list[Step], bad: tuple[str, str]
) -> None:
    conds = _play(machine, steps) if machine is c.SUGGESTION else _replay(machine, steps)
    with pytest.raises(c.IllegalTransition):
        machine.set(conds, bad[0], bad[1], "r", "m")


def _replay(machine: c.Machine, steps: list[Step]) -> list[Condition]:
    conds: list[Condition] = []
    for type_, status, reason in steps:
        conds, _ = machine.set(conds, type_, status, reason, "m")
    return conds


def test_experiment_restart_cycle() -> None:
    E = c.ExperimentCondition
    conds = _replay(
        c.EXPERIMENT,
        [
            (E.CREATED, T, c.ExperimentReason.CREATED),
            (E.RUNNING, T, c.ExperimentReason.RUNNING),
            (E.RUNNING, F, c.ExperimentReason.RUNNING),
            (E.SUCCEEDED, T, c.ExperimentReason.MAX_TRIALS_REACHED),
            (E.RESTARTING, T, c.ExperimentReason.RESTARTING),
            (E.RUNNING, T, c.ExperimentReason.RUNNING),
        ],
    )
    assert c.last_state(conds) == ("Running", T)
    assert c.is_true(conds, E.RESTARTING)


def test_trial_metrics_unavailable_after_early_stop_is_legal() -> None:
    Tc = c.TrialCondition
    conds = _replay(
        c.TRIAL, [(Tc.CREATED, T, "x"), (Tc.RUNNING, T, "x"), (Tc.EARLY_STOPPED, T, "x")]
    )
    conds, changed = c.TRIAL.set(conds, Tc.METRICS_UNAVAILABLE, T, "MetricsUnavailable", "m")
    assert changed


def test_setting_the_current_state_again_is_never_illegal() -> None:
    conds = _replay(
        c.TRIAL, [(c.TrialCondition.CREATED, T, "x"), (c.TrialCondition.FAILED, T, "a")]
    )
    conds, changed = c.TRIAL.set(conds, c.TrialCondition.FAILED, T, "b", "other reason")
    assert changed and conds[-1].reason == "b"


TS = c.TrialState
TRIAL_STATES = [
    ([], TS.PENDING),
    ([("Created", T)], TS.PENDING),
    ([("Created", T), ("Running", T)], TS.RUNNING),
    ([("Created", T), ("Running", T), ("Succeeded", F)], TS.RUNNING),
    ([("Succeeded", F)], TS.PENDING),
    ([("Created", T), ("Running", F), ("Succeeded", T)], TS.SUCCEEDED),
    ([("Created", T), ("Running", F), ("Failed", T)], TS.FAILED),
    ([("Succeeded", T), ("Failed", T)], TS.FAILED),
    ([("Killed", T), ("Failed", T)], TS.KILLED),
    ([("Failed", T), ("Killed", T)], TS.KILLED),
    ([("Running", T), ("EarlyStopped", T)], TS.EARLY_STOPPED),
    ([("Running", T), ("EarlyStopped", T), ("MetricsUnavailable", T)], TS.EARLY_STOPPED),
    ([("Running", F), ("MetricsUnavailable", T)], TS.METRICS_UNAVAILABLE),
    ([("Running", T), ("MetricsUnavailable", T)], TS.RUNNING),
    ([("Running", F), ("MetricsUnavailable", F)], TS.PENDING),
]


@pytest.mark.parametrize(("pairs", "state"), TRIAL_STATES)
def test_trial_state_is_the_first_true_condition_in_upstream_order(
    pairs: list[tuple[str, str]], state: c.TrialState
) -> None:
    typed = [Condition(type=t, status=s, reason="r") for t, s in pairs]
    raw = [{"type": t, "status": s, "reason": "r"} for t, s in pairs]
    assert c.trial_state(typed) is state
    assert c.trial_state(raw) is state
    assert c.trial_state(reversed(typed)) is state, "the order of the list does not matter"


def test_trial_state_of_no_conditions_is_pending() -> None:
    assert c.trial_state(None) is TS.PENDING
