"""The controller against a real API server; the test plays algorithm and trial-controller."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetune import naming
from kubetune.kube import EVENTS, EXPERIMENTS, SUGGESTIONS, TRIALS, Kube
from kubetune_testkit.builders import trial_job
from kubetune_testkit.standins.services import StandInAlgorithm, set_trial, trial_status
from kubetune_testkit.waiting import wait_for
from tests.standins import (
    RunningController,
    experiment_manifest,
    experiment_status,
    last_condition,
    trials_of,
)

pytestmark = pytest.mark.integration


def _state(trial: dict[str, Any]) -> str:
    true = {
        c["type"]
        for c in (trial.get("status") or {}).get("conditions") or []
        if c["status"] == "True"
    }
    for state in ("Killed", "Failed", "Succeeded", "EarlyStopped", "Running", "MetricsUnavailable"):
        if state in true:
            return state
    return "Pending"


def _finished(status: dict[str, Any]) -> int:
    return int(status.get("trialsSucceeded") or 0) + int(status.get("trialsFailed") or 0)


def _drive(
    kube: Kube,
    namespace: str,
    name: str,
    accuracies: dict[int, float],
    *,
    parallel: int,
    stop: tuple[str, str, str],
    extra: int = 0,
    failing: frozenset[int] = frozenset(),
) -> int:
    """Play algorithm and trial-controller until the Experiment's last condition is `stop`.

    Each round: hand out what is requested (plus `extra` unrequested assignments), wait for the
    Trials, check parallelism, finish every open trial (Failed if its index is in `failing`).
    Returns the most trials seen active at once.
    """
    algorithm = StandInAlgorithm(kube, namespace, name)
    names = {naming.trial_name(name, str(i)): i for i in range(200)}
    finished: set[str] = set()
    peak = 0
    for _ in range(60):
        if last_condition(kube, namespace, name) == stop:
            return peak
        wait_for(
            "open trials or completion",
            lambda: (
                last_condition(kube, namespace, name) == stop
                or algorithm.fulfil(extra) < 0  # hands out what is requested by now; never true
                or any(
                    t["metadata"]["name"] not in finished for t in trials_of(kube, namespace, name)
                )
            ),
        )
        trials = trials_of(kube, namespace, name)
        active = [t for t in trials if _state(t) in ("Pending", "Running")]
        peak = max(peak, len(active))
        assert len(active) <= parallel, f"{len(active)} active trials > parallel {parallel}"
        for trial in active:
            trial_name = trial["metadata"]["name"]
            index = names[trial_name]
            if index in failing:
                set_trial(kube, namespace, trial_name, "Failed")
            else:
                set_trial(kube, namespace, trial_name, "Succeeded", accuracies.get(index, 0.1))
            finished.add(trial_name)
        wait_for(
            "the controller to count the finished trials",
            lambda: (
                last_condition(kube, namespace, name) == stop
                or _finished(experiment_status(kube, namespace, name)) >= len(finished)
            ),
        )
    raise AssertionError(
        f"experiment never reached {stop}: {last_condition(kube, namespace, name)}"
    )


class RecordingKube(Kube):
    """Records the order of this test's Trial creates and Suggestion patches."""

    writes: list[str]

    def create(self, res: Any, body: Any, namespace: str | None = None, **kw: Any) -> Any:
        if res.plural == "trials":
            self.writes.append("create trial")
        return super().create(res, body, namespace, **kw)

    def patch(self, res: Any, name: str, body: Any, namespace: str | None = None, **kw: Any) -> Any:
        if res.plural == "suggestions" and "spec" in body:
            self.writes.append(f"requests {body['spec']['requests']}")
        return super().patch(res, name, body, namespace, **kw)


def test_a_finished_trials_successor_is_created_from_an_assignment_at_hand(
    kube: Kube, namespace: str, crds: None
) -> None:
    """Random search asks a wave ahead: the algorithm answers once, then every finished Trial
    is followed by a new one with no further algorithm pass (no round trip per Trial), created
    before the request for a later one is written."""
    recording = RecordingKube(kube.api)
    recording.writes = []
    controller = RunningController(recording, namespace).start()
    try:
        kube.create(
            EXPERIMENTS,
            experiment_manifest("ahead", namespace, max_trials=12, parallel=3),
            namespace,
        )
        algorithm = StandInAlgorithm(kube, namespace, "ahead")
        wait_for("the Suggestion", algorithm.suggestion)
        assert algorithm.fulfil() == 6  # handed out once; never called again below
        wait_for("3 trials", lambda: len(trials_of(kube, namespace, "ahead")) == 3 or None)
        for index in range(3):
            set_trial(kube, namespace, naming.trial_name("ahead", str(index)), "Succeeded", 0.5)
            wait_for(
                f"the successor of trial {index}",
                lambda index=index: len(trials_of(kube, namespace, "ahead")) == 4 + index or None,
            )
    finally:
        controller.stop()
    assert len(kube.get(SUGGESTIONS, "ahead", namespace)["status"]["suggestions"]) == 6
    # The pass that saw the first Trial finish created its successor, then asked for one more.
    # (A request write refused by a conflict is retried after the next Trial event under load,
    # so only the order is asserted: the successor first, then the request for a later one.)
    after = recording.writes[recording.writes.index("create trial") + 3 :]
    assert after[0] == "create trial" and "requests 7" in after, recording.writes
    assert after.index("create trial") < after.index("requests 7"), recording.writes


def test_a_running_trial_deleted_after_its_assignment_was_compacted_is_replaced(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    """The algorithm keeps only the name of an assignment whose Trial exists; deleting that
    Trial (as the Katib take-over asks for a Trial running Katib's collector) leaves nothing to
    recreate it from: a new assignment takes its index, and maxTrialCount is still reached."""
    name = "lost"
    kube.create(
        EXPERIMENTS, experiment_manifest(name, namespace, max_trials=3, parallel=2), namespace
    )
    algorithm = StandInAlgorithm(kube, namespace, name)
    wait_for("the Suggestion", algorithm.suggestion)
    assert algorithm.fulfil() == 3  # random: 2 to start, 1 ahead (capped by maxTrialCount)
    first = {naming.trial_name(name, str(i)) for i in range(2)}
    wait_for(
        "2 trials",
        lambda: {t["metadata"]["name"] for t in trials_of(kube, namespace, name)} == first,
    )
    for trial_name in first:
        set_trial(kube, namespace, trial_name, "Running")
    algorithm.compact(first)
    kube.delete(TRIALS, naming.trial_name(name, "0"), namespace)
    wait_for(
        "a request beyond maxTrialCount for the lost assignment",
        lambda: algorithm.suggestion()["spec"]["requests"] >= 4,  # type: ignore[index]
    )
    done = ("Succeeded", "True", "ExperimentMaxTrialsReached")
    finished: set[str] = set()
    for _ in range(10):  # each round finishes every open Trial
        if last_condition(kube, namespace, name) == done:
            break
        algorithm.fulfil()

        def open_trials() -> tuple[list[str]] | None:
            """(the Trials not finished yet,), or ([],) once the Experiment is done."""
            if last_condition(kube, namespace, name) == done:
                return ([],)
            names = [t["metadata"]["name"] for t in trials_of(kube, namespace, name)]
            waiting = [n for n in names if n not in finished]
            return (waiting,) if waiting else None

        (waiting,) = wait_for("an open trial or completion", open_trials, 60)
        for trial_name in waiting:
            set_trial(kube, namespace, trial_name, "Succeeded", 0.5)
            finished.add(trial_name)
    assert last_condition(kube, namespace, name) == done
    status = experiment_status(kube, namespace, name)
    assert (status["trials"], status["trialsSucceeded"]) == (3, 3)
    assert set(status["succeededTrialList"]) == {naming.trial_name(name, str(i)) for i in (1, 2, 3)}


def test_runs_to_max_trials_with_counts_optimum_and_parallelism(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    kube.create(
        EXPERIMENTS, experiment_manifest("exp", namespace, max_trials=12, parallel=3), namespace
    )
    wait_for("Created", lambda: last_condition(kube, namespace, "exp"))
    suggestion = wait_for("the Suggestion", lambda: kube.get_or_none(SUGGESTIONS, "exp", namespace))
    assert suggestion["spec"]["requests"] == 6  # random: the 3 to start and 3 ahead
    assert suggestion["spec"]["algorithm"] == {"algorithmName": "random"}
    assert suggestion["metadata"]["ownerReferences"][0]["kind"] == "Experiment"
    assert suggestion["metadata"]["labels"] == {"team": "ml", naming.LABEL_EXPERIMENT: "exp"}

    accuracies = {i: 0.5 + i / 100 for i in range(12)}
    accuracies[7] = 0.99
    peak = _drive(
        kube,
        namespace,
        "exp",
        accuracies,
        parallel=3,
        extra=2,  # the algorithm over-delivers: the controller must not over-create
        stop=("Succeeded", "True", "ExperimentMaxTrialsReached"),
    )
    assert peak == 3
    status = experiment_status(kube, namespace, "exp")
    assert status["trials"] == 12 and status["trialsSucceeded"] == 12
    assert len(status["succeededTrialList"]) == 12
    assert status["currentOptimalTrial"]["bestTrialName"] == naming.trial_name("exp", "7")
    assert status["currentOptimalTrial"]["observation"]["metrics"][0]["max"] == "0.99"
    assert status["startTime"] and status["completionTime"]
    types = [c["type"] for c in status["conditions"]]
    assert types == ["Created", "Running", "Succeeded"]
    assert status["conditions"][1]["status"] == "False"
    trials = trials_of(kube, namespace, "exp")
    assert len(trials) == 12
    assert kube.get(SUGGESTIONS, "exp", namespace)["spec"]["requests"] == 12

    trial = next(t for t in trials if t["metadata"]["name"] == naming.trial_name("exp", "7"))
    run = trial["spec"]["runSpec"]
    assert run["metadata"] == {"name": trial["metadata"]["name"], "namespace": namespace}
    assert run["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "echo lr=0.08"
    assert run["spec"]["template"]["metadata"]["annotations"] == {
        "sidecar.istio.io/inject": "false"
    }
    assert trial["spec"]["successCondition"].startswith("status.conditions.#(type==")
    assert trial["metadata"]["ownerReferences"][0]["controller"] is True


def test_goal_reached_stops_early(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    kube.create(
        EXPERIMENTS,
        experiment_manifest("goal", namespace, max_trials=12, parallel=2, goal=0.9),
        namespace,
    )
    _drive(
        kube,
        namespace,
        "goal",
        {0: 0.5, 1: 0.6, 2: 0.95},
        parallel=2,
        stop=("Succeeded", "True", "ExperimentGoalReached"),
    )
    status = experiment_status(kube, namespace, "goal")
    # 2 at the start, and each of the (at most) 3 Trials finished before the goal one may have
    # had its successor at once (random search keeps assignments at hand): never the 12.
    assert status["trials"] <= 5
    assert status["currentOptimalTrial"]["bestTrialName"] == naming.trial_name("goal", "2")


def test_a_running_trials_intermediate_value_does_not_end_the_experiment(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    """The optimum and the goal come from finished trials only; running trials are left to
    finish when the goal ends the Experiment (as upstream: completion stops no trial)."""
    kube.create(
        EXPERIMENTS,
        experiment_manifest("interim", namespace, max_trials=6, parallel=2, goal=0.9),
        namespace,
    )
    algorithm = StandInAlgorithm(kube, namespace, "interim")
    first, second = (naming.trial_name("interim", str(i)) for i in range(2))
    wait_for(
        "two trials",
        lambda: algorithm.fulfil() < 0 or len(trials_of(kube, namespace, "interim")) == 2,
    )
    set_trial(kube, namespace, first, "Running", 0.95)
    set_trial(kube, namespace, second, "Running", 0.97)
    wait_for(
        "the controller to count both running trials",
        lambda: experiment_status(kube, namespace, "interim").get("trialsRunning") == 2,
    )
    status = experiment_status(kube, namespace, "interim")
    assert last_condition(kube, namespace, "interim") == ("Running", "True", "ExperimentRunning")
    # Written empty, as upstream does, while no trial has succeeded.
    assert status["currentOptimalTrial"] == {"observation": {}}

    set_trial(kube, namespace, first, "Succeeded", 0.95)
    wait_for(
        "the goal",
        lambda: (
            last_condition(kube, namespace, "interim")
            == ("Succeeded", "True", "ExperimentGoalReached")
        ),
    )
    status = experiment_status(kube, namespace, "interim")
    assert status["currentOptimalTrial"]["bestTrialName"] == first
    assert status["trialsRunning"] == 1 and status["runningTrialList"] == [second]
    assert _state(kube.get(TRIALS, second, namespace)) == "Running", "left to finish"


def test_max_failed_trials_fails_the_experiment(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    kube.create(
        EXPERIMENTS,
        experiment_manifest("fails", namespace, max_trials=10, parallel=2, max_failed=2),
        namespace,
    )
    _drive(
        kube,
        namespace,
        "fails",
        {},
        parallel=2,
        failing=frozenset({1, 2, 3}),
        stop=("Failed", "True", "ExperimentFailed"),
    )
    status = experiment_status(kube, namespace, "fails")
    assert status["conditions"][-1]["message"] == (
        "Experiment has failed because max failed count has reached"
    )
    assert status["trialsFailed"] >= 2


def test_suggestion_failed_fails_the_experiment(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    kube.create(EXPERIMENTS, experiment_manifest("sugfail", namespace), namespace)
    wait_for("the Suggestion", lambda: kube.get_or_none(SUGGESTIONS, "sugfail", namespace))
    StandInAlgorithm(kube, namespace, "sugfail").set_conditions(
        [
            {"type": "Created", "status": "True", "reason": "SuggestionCreated"},
            {
                "type": "Failed",
                "status": "True",
                "reason": "SuggestionFailed",
                "message": "Validation failed: random_state must be >= 0",
            },
        ]
    )
    wait_for(
        "Failed",
        lambda: (
            last_condition(kube, namespace, "sugfail") == ("Failed", "True", "ExperimentFailed")
        ),
    )
    status = experiment_status(kube, namespace, "sugfail")
    assert status["conditions"][-1]["message"] == "Suggestion has failed"


def test_restart_long_running_continues_to_the_new_max(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    kube.create(
        EXPERIMENTS,
        experiment_manifest("again", namespace, max_trials=3, parallel=2, resume="LongRunning"),
        namespace,
    )
    done = ("Succeeded", "True", "ExperimentMaxTrialsReached")
    _drive(kube, namespace, "again", {}, parallel=2, stop=done)
    assert len(trials_of(kube, namespace, "again")) == 3

    kube.patch(EXPERIMENTS, "again", {"spec": {"maxTrialCount": 5}}, namespace)
    wait_for(
        "Restarting",
        lambda: any(
            c["type"] == "Restarting" and c["status"] == "True"
            for c in experiment_status(kube, namespace, "again").get("conditions") or []
        ),
    )
    wait_for(
        "requests raised to 5",
        lambda: kube.get(SUGGESTIONS, "again", namespace)["spec"]["requests"] == 5,
    )
    _drive(kube, namespace, "again", {4: 0.9}, parallel=2, stop=done)
    status = experiment_status(kube, namespace, "again")
    assert status["trials"] == 5 and status["trialsSucceeded"] == 5
    assert status["currentOptimalTrial"]["bestTrialName"] == naming.trial_name("again", "4")
    assert len(trials_of(kube, namespace, "again")) == 5


def test_restart_refused_with_never(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    kube.create(
        EXPERIMENTS, experiment_manifest("never", namespace, max_trials=2, parallel=2), namespace
    )
    done = ("Succeeded", "True", "ExperimentMaxTrialsReached")
    _drive(kube, namespace, "never", {}, parallel=2, stop=done)
    kube.patch(EXPERIMENTS, "never", {"spec": {"maxTrialCount": 4}}, namespace)
    wait_for(
        "a RestartRefused event",
        lambda: [
            e for e in kube.list_all(EVENTS, namespace) if e.get("reason") == "RestartRefused"
        ],
    )
    assert last_condition(kube, namespace, "never") == done
    assert len(trials_of(kube, namespace, "never")) == 2


def test_template_error_creates_that_trial_without_run_spec_and_with_the_fix(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    """The Trial carries the reason for the trial-controller, which alone writes Trial
    conditions (it fails the Trial with that message; e2e `test_unrenderable_trial.py`)."""
    command = ["echo", "${trialParameters.learningRate}", "${trialParameters.typo}"]
    manifest = experiment_manifest(
        "broken", namespace, max_trials=2, parallel=1, max_failed=1, trial_spec=trial_job(command)
    )
    kube.create(EXPERIMENTS, manifest, namespace)
    wait_for("the Suggestion", lambda: kube.get_or_none(SUGGESTIONS, "broken", namespace))
    StandInAlgorithm(kube, namespace, "broken").fulfil()
    trial = wait_for("the trial", lambda: trials_of(kube, namespace, "broken"))[0]
    assert "runSpec" not in trial["spec"]
    reason = trial["metadata"]["annotations"][naming.ANNOTATION_RENDER_ERROR]
    assert "unresolved placeholder(s) ${trialParameters.typo}" in reason
    assert "declare each in spec.trialTemplate.trialParameters" in reason
    assert f"Experiment {namespace}/broken" in reason
    events = wait_for(
        "the TrialTemplateError event",
        lambda: [
            e for e in kube.list_all(EVENTS, namespace) if e.get("reason") == "TrialTemplateError"
        ],
    )
    assert "typo" in events[0]["message"]
    # Its conditions are the trial-controller's: none here, where it does not run. The Failed
    # condition a trial-controller writes then fails the Experiment (max_failed=1).
    assert not (kube.get(TRIALS, trial["metadata"]["name"], namespace).get("status") or {})
    set_trial(kube, namespace, trial["metadata"]["name"], "Failed")
    wait_for(
        "the experiment to fail",
        lambda: last_condition(kube, namespace, "broken") == ("Failed", "True", "ExperimentFailed"),
    )


def test_deleting_the_experiment_takes_suggestion_and_trials(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    kube.create(
        EXPERIMENTS, experiment_manifest("gone", namespace, max_trials=2, parallel=2), namespace
    )
    wait_for("the Suggestion", lambda: kube.get_or_none(SUGGESTIONS, "gone", namespace))
    StandInAlgorithm(kube, namespace, "gone").fulfil()
    wait_for("2 trials", lambda: len(trials_of(kube, namespace, "gone")) == 2)
    kube.delete(EXPERIMENTS, "gone", namespace, propagation="Foreground")
    wait_for(
        "everything gone",
        lambda: (
            kube.get_or_none(EXPERIMENTS, "gone", namespace) is None
            and kube.get_or_none(SUGGESTIONS, "gone", namespace) is None
            and not trials_of(kube, namespace, "gone")
        ),
        timeout=60,
    )


def test_a_trial_with_an_oversized_value_is_not_the_optimum(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    """A 400 KB number in a Trial's observation (written around the collector's bounds) is no
    value: that Trial is not the optimum, and the Experiment status stays small (issue 16)."""
    kube.create(
        EXPERIMENTS, experiment_manifest("big", namespace, max_trials=2, parallel=2), namespace
    )
    algorithm = StandInAlgorithm(kube, namespace, "big")
    first, second = (naming.trial_name("big", str(i)) for i in range(2))
    wait_for(
        "two trials",
        lambda: algorithm.fulfil() < 0 or len(trials_of(kube, namespace, "big")) == 2,
    )
    huge = "0." + "9" * 400_000  # 1.0 to Python's float(); maximize: the best on main
    status = trial_status("Succeeded")
    status["observation"] = {
        "metrics": [{"name": "accuracy", "min": huge, "max": huge, "latest": huge}]
    }
    kube.patch(TRIALS, second, {"status": status}, namespace, subresource="status")
    set_trial(kube, namespace, first, "Succeeded", 0.5)
    done = ("Succeeded", "True", "ExperimentMaxTrialsReached")
    wait_for("max trials", lambda: last_condition(kube, namespace, "big") == done)
    experiment = kube.get(EXPERIMENTS, "big", namespace)
    optimum = experiment["status"]["currentOptimalTrial"]
    assert optimum["bestTrialName"] == first
    assert optimum["observation"]["metrics"][0]["max"] == "0.5"
    assert len(json.dumps(experiment)) < 20_000
