"""The pure decisions of one reconcile: requests, trials to create, conditions, restart."""

from __future__ import annotations

from kubetune import conditions, naming
from kubetune.api.experiment import ExperimentStatus
from kubetune_experiment_controller import planning
from kubetune_experiment_controller.planning import plan
from tests.helpers import experiment, suggestion, trial

NOW = "2026-01-01T01:00:00Z"


def _last(p: planning.Plan) -> tuple[str, str, str | None]:
    last = (p.status.conditions or [])[-1]
    return last.type, last.status, last.reason


def _status_after(p: planning.Plan) -> dict[str, object]:
    return {"status": p.status.model_dump(mode="json", by_alias=True, exclude_none=True)}


def test_new_experiment_is_created_and_asks_for_parallel_trials() -> None:
    p = plan(experiment(algorithm="tpe"), [], None, NOW)
    assert _last(p) == ("Created", "True", "ExperimentCreated")
    assert p.status.start_time == NOW
    assert p.create_suggestion and p.requests == 3
    assert p.new_trials == []
    assert p.status.trials == 0


def test_assignments_become_trials_within_parallelism() -> None:
    created = plan(experiment(algorithm="tpe"), [], None, NOW)
    exp = experiment(algorithm="tpe", status=_status_after(created)["status"])  # type: ignore[arg-type]
    p = plan(exp, [], suggestion(5, requests=3), NOW)
    # the algorithm handed out too many: only `parallel` become trials
    assert [t.name for t in p.new_trials] == [naming.trial_name("exp", str(i)) for i in range(3)]
    assert p.requests is None  # already 3


def test_requests_grow_as_trials_finish_and_never_pass_max() -> None:
    trials = [trial(i, "Succeeded") for i in range(10)] + [trial(10, "Running")]
    p = plan(experiment(max_trials=12), trials, suggestion(11, requests=11), NOW)
    assert p.requests == 12  # one more, not parallel (3) more
    assert [t.name for t in p.new_trials] == []  # the 12th assignment is not there yet
    p = plan(experiment(max_trials=12), trials, suggestion(14, requests=12), NOW)
    assert [t.name for t in p.new_trials] == [naming.trial_name("exp", "11")]


def test_never_more_than_max_even_when_the_algorithm_overshoots() -> None:
    trials = [trial(i, "Succeeded") for i in range(8)] + [
        trial(i, "MetricsUnavailable") for i in (8, 9)
    ]
    p = plan(experiment(max_trials=12, parallel=5), trials, suggestion(20, requests=12), NOW)
    assert len(trials) + len(p.new_trials) == 12
    assert p.requests is None


def test_requests_never_shrink() -> None:
    p = plan(experiment(), [trial(0, "Running")], suggestion(3, requests=6), NOW)
    assert p.requests is None


def test_parallelism_reduction_waits_instead_of_deleting() -> None:
    trials = [trial(i, "Running") for i in range(5)]
    p = plan(experiment(parallel=2), trials, suggestion(8, requests=5), NOW)
    assert p.new_trials == [] and p.requests is None


def test_counts_exact_and_lists_bounded() -> None:
    trials = [trial(i, "Succeeded") for i in range(30)] + [trial(30, "Running"), trial(31)]
    p = plan(experiment(max_trials=None), trials, suggestion(32, requests=32), NOW, max_listed=10)
    s = p.status
    assert (s.trials, s.trials_succeeded, s.trials_running, s.trials_pending) == (32, 30, 1, 1)
    assert s.succeeded_trial_list == [trials[i].name for i in range(20, 30)]
    assert s.running_trial_list == [trials[30].name]
    assert s.failed_trial_list is None
    assert _last(p) == ("Running", "True", "ExperimentRunning")


def test_max_trials_reached_succeeds_after_running_goes_false() -> None:
    running = plan(experiment(max_trials=2), [trial(0, "Running")], suggestion(2, requests=2), NOW)
    exp = experiment(max_trials=2, status=_status_after(running)["status"])  # type: ignore[arg-type]
    done = [
        trial(0, "Succeeded", accuracy={"min": "0.1", "max": "0.8", "latest": "0.8"}),
        trial(1, "Succeeded", accuracy={"min": "0.1", "max": "0.9", "latest": "0.9"}),
    ]
    p = plan(exp, done, suggestion(2, requests=2), NOW)
    assert _last(p) == ("Succeeded", "True", "ExperimentMaxTrialsReached")
    assert conditions.find(p.status.conditions, "Running").status == "False"  # type: ignore[union-attr]
    assert p.status.completion_time == NOW
    assert p.status.current_optimal_trial.best_trial_name == done[1].name  # type: ignore[union-attr]
    assert p.new_trials == [] and p.requests is None


def test_goal_reached() -> None:
    trials = [trial(0, "Succeeded", accuracy={"min": "0.5", "max": "0.99", "latest": "0.9"})]
    p = plan(experiment(goal=0.95), trials, suggestion(3, requests=3), NOW)
    assert _last(p) == ("Succeeded", "True", "ExperimentGoalReached")
    p = plan(
        experiment(goal=0.95, strategies=[{"name": "accuracy", "value": "latest"}]),
        trials,
        suggestion(3, requests=3),
        NOW,
    )
    assert _last(p)[0] == "Running"


def test_a_running_trials_intermediate_value_neither_reaches_the_goal_nor_is_optimal() -> None:
    """Upstream writes a Trial's observation only once its job succeeded (or it was early
    stopped), so the optimum and the goal come from finished trials; kubetune's collector also
    shows intermediate values on running Trials, which must not end the Experiment."""
    trials = [
        trial(0, "Succeeded", accuracy={"min": "0.5", "max": "0.7", "latest": "0.7"}),
        trial(1, "Running", accuracy={"min": "0.5", "max": "0.99", "latest": "0.99"}),
        trial(2, "Running", accuracy={"min": "0.96", "max": "0.96", "latest": "0.96"}),
        trial(3, "Failed", accuracy={"min": "0.98", "max": "0.98", "latest": "0.98"}),
    ]
    p = plan(experiment(goal=0.95), trials, suggestion(4, requests=4), NOW)
    assert _last(p)[0] == "Running"
    assert p.status.current_optimal_trial.best_trial_name == trials[0].name  # type: ignore[union-attr]
    # Once the running trial succeeds with that value, the goal is reached; the other running
    # trial is left to finish (as upstream: completion stops no trial).
    trials[1] = trial(1, "Succeeded", accuracy={"min": "0.5", "max": "0.99", "latest": "0.99"})
    p = plan(experiment(goal=0.95), trials, suggestion(4, requests=4), NOW)
    assert _last(p) == ("Succeeded", "True", "ExperimentGoalReached")
    assert p.status.current_optimal_trial.best_trial_name == trials[1].name  # type: ignore[union-attr]
    assert p.status.trials_running == 1 and p.new_trials == []


def test_an_early_stopped_trial_counts_for_the_goal() -> None:
    trials = [trial(0, "EarlyStopped", accuracy={"min": "0.5", "max": "0.97", "latest": "0.9"})]
    p = plan(experiment(goal=0.95), trials, suggestion(3, requests=3), NOW)
    assert _last(p) == ("Succeeded", "True", "ExperimentGoalReached")


def test_goal_reached_minimize() -> None:
    trials = [trial(0, "Succeeded", accuracy={"min": "0.04", "max": "0.3", "latest": "0.1"})]
    p = plan(
        experiment(objective_type="minimize", goal=0.05), trials, suggestion(3, requests=3), NOW
    )
    assert _last(p) == ("Succeeded", "True", "ExperimentGoalReached")


def test_max_failed_trials_fails_with_message() -> None:
    trials = [trial(0, "Failed"), trial(1, "MetricsUnavailable"), trial(2, "Running")]
    p = plan(experiment(max_failed=2), trials, suggestion(3, requests=3), NOW)
    assert _last(p) == ("Failed", "True", "ExperimentFailed")
    assert p.status.conditions[-1].message == planning.MSG_MAX_FAILED  # type: ignore[index]
    assert (
        plan(experiment(max_failed=3), trials, suggestion(3, requests=3), NOW)
        .status.conditions[-1]
        .type
        == "Running"
    )  # type: ignore[index]


def test_max_failed_zero_fails_on_first_failure_only() -> None:
    assert _last(plan(experiment(max_failed=0), [trial(0, "Running")], None, NOW))[0] == "Running"
    assert _last(plan(experiment(max_failed=0), [trial(0, "Failed")], None, NOW))[0] == "Failed"


def test_suggestion_failed_fails_the_experiment() -> None:
    p = plan(experiment(), [], suggestion(0, requests=3, failed=True), NOW)
    assert _last(p) == ("Failed", "True", "ExperimentFailed")
    assert p.status.conditions[-1].message == "Suggestion has failed"  # type: ignore[index]


def test_search_exhausted_succeeds_once_everything_finished() -> None:
    annotated = suggestion(2, requests=3, annotations={"kubetune.io/search-exhausted": "true"})
    p = plan(experiment(), [trial(0, "Succeeded"), trial(1, "Running")], annotated, NOW)
    assert _last(p)[0] == "Running"
    p = plan(experiment(), [trial(0, "Succeeded"), trial(1, "Succeeded")], annotated, NOW)
    assert _last(p) == ("Succeeded", "True", "ExperimentSuggestionEndReached")
    by_setting = suggestion(2, requests=3, settings=[{"name": "search_exhausted", "value": "true"}])
    p = plan(experiment(), [trial(0, "Succeeded"), trial(1, "Failed")], by_setting, NOW)
    assert _last(p)[1:] == ("True", "ExperimentSuggestionEndReached")


def _completed(max_trials: int, resume: str | None) -> planning.Plan:
    trials = [trial(i, "Succeeded") for i in range(max_trials)]
    first = plan(experiment(max_trials=max_trials, resume=resume), [trial(0, "Running")], None, NOW)
    exp = experiment(max_trials=max_trials, resume=resume, status=_status_after(first)["status"])  # type: ignore[arg-type]
    done = plan(exp, trials, suggestion(max_trials, requests=max_trials), NOW)
    assert _last(done)[2] == "ExperimentMaxTrialsReached"
    return done


def test_restart_long_running_then_running_with_more_requests() -> None:
    done = _completed(3, "LongRunning")
    trials = [trial(i, "Succeeded") for i in range(3)]
    raised = experiment(max_trials=5, resume="LongRunning", status=_status_after(done)["status"])  # type: ignore[arg-type]
    p = plan(raised, trials, suggestion(3, requests=3), NOW)
    assert _last(p) == ("Restarting", "True", "ExperimentRestarting")
    assert conditions.find(p.status.conditions, "Succeeded") is None
    assert p.status.completion_time is None and p.requests is None and p.requeue_after
    again = experiment(max_trials=5, resume="LongRunning", status=_status_after(p)["status"])  # type: ignore[arg-type]
    p = plan(again, trials, suggestion(3, requests=3), NOW)
    assert _last(p) == ("Running", "True", "ExperimentRunning")
    assert p.requests == 5


def test_no_restart_with_never_but_an_event() -> None:
    done = _completed(3, "Never")
    raised = experiment(max_trials=5, resume="Never", status=_status_after(done)["status"])  # type: ignore[arg-type]
    p = plan(raised, [trial(i, "Succeeded") for i in range(3)], suggestion(3, requests=3), NOW)
    assert _last(p)[2] == "ExperimentMaxTrialsReached"
    assert [e.reason for e in p.events] == ["RestartRefused"]
    assert p.requests is None and p.new_trials == []


def test_completed_experiment_keeps_counting_but_creates_nothing() -> None:
    done = _completed(3, "LongRunning")
    exp = experiment(max_trials=3, resume="LongRunning", status=_status_after(done)["status"])  # type: ignore[arg-type]
    p = plan(
        exp,
        [trial(i, "Succeeded") for i in range(3)] + [trial(3, "Running")],
        suggestion(5, requests=5),
        NOW,
    )
    assert p.status.trials == 4 and p.new_trials == [] and p.requests is None


def test_plan_is_stable_when_nothing_changes() -> None:
    first = plan(experiment(), [trial(0, "Running")], suggestion(3, requests=3), NOW)
    exp = experiment(status=_status_after(first)["status"])  # type: ignore[arg-type]
    second = plan(exp, [trial(0, "Running")], suggestion(3, requests=3), "2026-01-01T02:00:00Z")
    assert second.status == first.status
    assert isinstance(second.status, ExperimentStatus)


def test_current_optimal_trial_is_written_empty_until_a_trial_succeeds() -> None:
    """As upstream: `currentOptimalTrial` is always there (Katib's SDK and verify.py read
    `best_trial_name` from it after an Experiment whose trials all failed)."""
    p = plan(experiment(), [trial(0, "Failed"), trial(1, "Running")], suggestion(2), NOW)
    assert p.status.to_wire()["currentOptimalTrial"] == {"observation": {}}


def test_a_trimmed_suggestion_keeps_its_indexes() -> None:
    """At scale the algorithm drops the oldest name-only entries (suggestionCount still counts
    them): an entry's index is its position plus the dropped ones, so assignments past
    maxTrialCount stay unused however short the stored list is."""
    tail = [
        {
            "name": naming.trial_name("exp", str(i)),
            "parameterAssignments": [{"name": "lr", "value": "0.01"}],
        }
        for i in range(16, 20)
    ]
    view = planning.SuggestionView.of(
        {
            "spec": {"requests": 20},
            "status": {"suggestions": tail, "suggestionCount": 20},
        }
    )
    assert view.offset == 16
    trials = [trial(i, "Succeeded") for i in range(10)]
    p = plan(experiment(max_trials=12, parallel=5), trials, view, NOW)
    assert p.new_trials == []  # indexes 16..19, all at or past maxTrialCount
    within = planning.SuggestionView.of(
        {"spec": {"requests": 12}, "status": {"suggestions": tail[:1], "suggestionCount": 11}}
    )
    assert within.offset == 10
    p = plan(experiment(max_trials=12, parallel=5), trials, within, NOW)
    assert [t.name for t in p.new_trials] == [naming.trial_name("exp", "16")]


def _compacted(view: planning.SuggestionView, upto: int) -> planning.SuggestionView:
    """`view` with its first `upto` entries reduced to their names, as the algorithm does."""
    entries = [{"name": a["name"]} if i < upto else a for i, a in enumerate(view.assignments)]
    return planning.SuggestionView(requests=view.requests, assignments=entries)


def test_a_trial_deleted_after_its_assignment_was_compacted_is_replaced() -> None:
    """Its parameters are gone from the Suggestion: a new assignment takes its place, so the
    Experiment still reaches maxTrialCount (it used to stay Running forever)."""
    view = _compacted(suggestion(4, requests=4), 4)
    trials = [trial(0, "Succeeded"), trial(2, "Succeeded"), trial(3, "Running")]  # 1 deleted
    existing = {t.name for t in trials}
    assert planning.compacted_without_trial(view, existing) == [naming.trial_name("exp", "1")]
    stuck = plan(experiment(max_trials=4, algorithm="tpe"), trials, view, NOW)
    assert stuck.requests is None and stuck.new_trials == []  # without knowing it is lost
    p = plan(experiment(max_trials=4, algorithm="tpe"), trials, view, NOW, lost=1)
    assert p.requests == 5  # one index beyond maxTrialCount, for the lost one
    more = suggestion(5, requests=5)
    view = planning.SuggestionView(requests=5, assignments=[*view.assignments, more.assignments[4]])
    p = plan(experiment(max_trials=4, algorithm="tpe"), trials, view, NOW, lost=1)
    assert [t.name for t in p.new_trials] == [naming.trial_name("exp", "4")]
    # still never more Trials than maxTrialCount: with 4 there, nothing more starts
    four = [*trials, trial(4, "Running")]
    p = plan(experiment(max_trials=4, algorithm="tpe"), four, view, NOW, lost=1)
    assert p.new_trials == [] and p.requests is None


def test_a_lost_assignment_does_not_hold_a_finished_grid_open() -> None:
    """A grid's end: its last points are Trials, or lost ones that can never become Trials."""
    entries = _compacted(suggestion(3, requests=3), 3).assignments
    view = planning.SuggestionView(requests=3, exhausted=True, assignments=entries)
    trials = [trial(0, "Succeeded"), trial(2, "Succeeded")]  # 1 deleted
    p = plan(experiment(max_trials=10, algorithm="grid"), trials, view, NOW, lost=1)
    assert _last(p) == ("Succeeded", "True", conditions.ExperimentReason.SUGGESTION_END_REACHED)
    # Not confirmed lost (only missing from a lagging cache, about to run): it stays open.
    p = plan(experiment(max_trials=10, algorithm="grid"), trials, view, NOW)
    assert _last(p)[0] != "Succeeded", _last(p)


def test_random_and_grid_ask_a_wave_ahead_so_a_successor_needs_no_algorithm_pass() -> None:
    """Their points do not depend on results: `parallel` more are asked for than may start,
    so the pass that sees a Trial finish creates its successor from an assignment at hand."""
    for algorithm in ("random", "grid"):
        assert plan(experiment(algorithm=algorithm), [], None, NOW).requests == 6
    running = [trial(i, "Running") for i in range(3)]
    p = plan(experiment(), running, suggestion(6, requests=6), NOW)
    assert p.new_trials == [] and p.requests is None  # 3 running + 3 ahead
    finished = [trial(0, "Succeeded"), *running[1:]]
    p = plan(experiment(), finished, suggestion(6, requests=6), NOW)
    assert [t.name for t in p.new_trials] == [naming.trial_name("exp", "3")]
    assert p.requests == 7  # the 4th Trial starts now; 3 stay ahead


def test_assignments_ahead_never_pass_max_trial_count() -> None:
    assert plan(experiment(max_trials=4), [], None, NOW).requests == 4
    trials = [trial(i, "Succeeded") for i in range(2)] + [trial(2, "Running")]
    p = plan(experiment(max_trials=4), trials, suggestion(4, requests=4), NOW)
    assert [t.name for t in p.new_trials] == [naming.trial_name("exp", "3")]
    assert p.requests is None


def test_algorithms_learning_from_results_and_early_stopping_are_not_asked_ahead() -> None:
    """tpe (and sobol, whose first draws are random until a Trial completed) must see results
    first; with early stopping an assignment carries the rules of the moment it is made."""
    for algorithm in ("tpe", "sobol", "cmaes", "bayesianoptimization", "hyperband"):
        assert plan(experiment(algorithm=algorithm), [], None, NOW).requests == 3, algorithm
    medianstop = {"algorithmName": "medianstop"}
    assert plan(experiment(early_stopping=medianstop), [], None, NOW).requests == 3


def test_the_algorithms_warm_start_is_mirrored_and_counts_no_trial() -> None:
    warm = {
        "imported": 7,
        "skipped": 2,
        "sources": [{"kind": "Experiment", "name": "old", "imported": 7, "skipped": 2}],
    }
    view = suggestion(3, requests=3)
    view = planning.SuggestionView(
        requests=view.requests, assignments=view.assignments, warm_start=warm
    )
    p = plan(experiment(max_trials=12), [trial(0, "Succeeded")], view, NOW)
    assert _status_after(p)["status"]["warmStart"] == warm  # type: ignore[index]
    assert p.status.trials == 1
    assert p.status.trials_succeeded == 1
    assert plan(experiment(), [], suggestion(3, requests=3), NOW).status.warm_start is None
    assert planning.SuggestionView.of({"status": {"warmStart": warm}}).warm_start == warm
