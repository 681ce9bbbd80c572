"""The Pareto front of a multi-objective Experiment from the trial summaries: which trials,
in which order, how bounded, and that a single-objective Experiment's status is unchanged."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubetune import multiobjective, naming
from kubetune.api.common import ObjectiveSpec
from kubetune_experiment_controller import planning
from kubetune_experiment_controller.fronts import front_members, pareto_front
from kubetune_experiment_controller.summaries import TrialSummary, summarise
from tests.helpers import experiment

OBJECTIVE = ObjectiveSpec.model_validate(
    {
        "type": "maximize",
        "objectiveMetricName": "accuracy",
        "objectives": [
            {"metricName": "accuracy", "type": "maximize"},
            {"metricName": "seconds", "type": "minimize"},
        ],
    }
)


def summary(index: int, state: str, **metrics: str) -> TrialSummary:
    obj: dict[str, Any] = {
        "metadata": {
            "name": naming.trial_name("exp", str(index)),
            "creationTimestamp": f"2026-01-01T{index // 3600:02d}:"
            f"{index // 60 % 60:02d}:{index % 60:02d}Z",
        },
        "spec": {"parameterAssignments": [{"name": "lr", "value": str(index)}]},
        "status": {
            "conditions": [{"type": state, "status": "True"}],
            "observation": {
                "metrics": [
                    {"name": k, "min": v, "max": v, "latest": v} for k, v in metrics.items()
                ]
            },
        },
    }
    return summarise(obj)


def brute(trials: list[TrialSummary]) -> set[str]:
    """Succeeded trials with both values that no other such trial beats (maximise accuracy,
    minimise seconds): the definition, pair by pair."""
    scored = {}
    for t in trials:
        values = dict((m[0], m[3]) for m in t.metrics or ())
        if t.state.value == "Succeeded" and "accuracy" in values and "seconds" in values:
            scored[t.name] = (float(values["accuracy"] or 0), float(values["seconds"] or 0))
    return {
        name
        for name, (a, s) in scored.items()
        if not any(
            a2 >= a and s2 <= s and (a2, s2) != (a, s)
            for other, (a2, s2) in scored.items()
            if other != name
        )
    }


STATES = st.sampled_from(["Succeeded", "Succeeded", "Succeeded", "Failed", "EarlyStopped"])
LEVELS = st.sampled_from(["0.1", "0.5", "0.9", "1"])


@settings(max_examples=150)
@given(st.lists(st.tuples(STATES, LEVELS, LEVELS, st.booleans()), max_size=40))
def test_the_front_is_the_brute_force_front(rows: list[tuple[str, str, str, bool]]) -> None:
    trials = []
    for index, (state, accuracy, seconds, both) in enumerate(rows):
        metrics = {"accuracy": accuracy, "seconds": seconds} if both else {"accuracy": accuracy}
        trials.append(summary(index, state, **metrics))
    members = front_members(OBJECTIVE, trials)
    assert {t.name for t in members} == brute(trials)
    values = [float(dict((m[0], m[3]) for m in t.metrics or ())["accuracy"] or 0) for t in members]
    assert values == sorted(values, reverse=True)  # best first by the first objective


def test_listed_at_most_max_front_and_counted_in_full() -> None:
    # 150 trials on a line of trade-offs: every one is on the front.
    trials = [summary(i, "Succeeded", accuracy=str(i / 1000), seconds=str(i)) for i in range(150)]
    front = pareto_front(OBJECTIVE, trials)
    assert front.size == 150
    assert len(front.trials) == multiobjective.MAX_FRONT
    assert front.trials[0].trial_name == naming.trial_name("exp", "149")


def test_long_assignments_stop_the_list_at_the_byte_bound() -> None:
    long = "x" * 4000
    trials = []
    for i in range(100):
        t = summary(i, "Succeeded", accuracy=str(i / 1000), seconds=str(i))
        trials.append(TrialSummary(t.name, t.state, t.created, (("lr", long + str(i)),), t.metrics))
    front = pareto_front(OBJECTIVE, trials)
    assert front.size == 100
    assert 0 < len(front.trials) < 100
    listed = sum(len(str(e.to_wire())) for e in front.trials)
    assert listed <= multiobjective.MAX_FRONT_BYTES * 1.1


def _multi_experiment() -> Any:
    exp = experiment()
    exp.spec.objective = OBJECTIVE
    return exp


def test_plan_writes_the_front_and_keeps_the_first_objective_optimum() -> None:
    trials = [
        summary(0, "Succeeded", accuracy="0.9", seconds="30"),
        summary(1, "Succeeded", accuracy="0.8", seconds="10"),
        summary(2, "Succeeded", accuracy="0.7", seconds="20"),  # dominated by 1
        summary(3, "Failed", accuracy="0.99", seconds="1"),
    ]
    status = planning.plan(_multi_experiment(), trials, None, "2026-01-01T00:00:00Z").status
    assert status.pareto_front_size == 2
    assert [e.trial_name for e in status.pareto_front or []] == [
        naming.trial_name("exp", "0"),
        naming.trial_name("exp", "1"),
    ]
    first = (status.pareto_front or [])[0]
    assert first.parameter_assignments and first.parameter_assignments[0].value == "0"
    assert first.observation and {m.name for m in first.observation.metrics or []} == {
        "accuracy",
        "seconds",
    }
    assert status.current_optimal_trial is not None
    assert status.current_optimal_trial.best_trial_name == naming.trial_name("exp", "0")


def test_a_single_objective_status_has_no_front() -> None:
    trials = [summary(i, "Succeeded", accuracy=f"0.{i + 1}") for i in range(3)]
    status = planning.plan(experiment(), trials, None, "2026-01-01T00:00:00Z").status
    wire = status.to_wire()
    assert "paretoFront" not in wire and "paretoFrontSize" not in wire


def test_ties_keep_creation_order() -> None:
    trials = [summary(i, "Succeeded", accuracy="0.5", seconds="5") for i in range(3)]
    names = [t.name for t in front_members(OBJECTIVE, trials)]
    assert names == [t.name for t in trials]  # equal points all stay on the front
