"""`deciding.decide` as tables: a Suggestion and what was seen -> objects, conditions, deletes.

The last tests play whole passes against a simulated world and compare the moves with the
seed's sequences (tests/seed.py); test_sequences.py does the same against the real controller.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kubetune import config
from kubetune.api.experiment import Experiment, ParameterSpec
from kubetune.api.suggestion import Suggestion
from kubetune.conditions import IllegalTransition
from kubetune_suggestion_controller import deciding
from kubetune_suggestion_controller.deciding import Decision, Seen

from . import seed

NOW = "2026-01-01T00:00:00Z"
EARLIER = "2025-12-31T00:00:00Z"
PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}}
]
READY = {"status": {"readyReplicas": 1, "conditions": [{"type": "Available", "status": "True"}]}}
NOT_READY: dict[str, Any] = {"status": {}}

C = ("Created", "True", "SuggestionCreated", "Suggestion is created")
DRF = ("DeploymentReady", "False", "DeploymentNotReady", "Deployment is not ready")
DRT = ("DeploymentReady", "True", "DeploymentReady", "Deployment is ready")
RT = ("Running", "True", "SuggestionRunning", "Suggestion is running")
RF_END = ("Running", "False", "Suggestion is succeeded", "Suggestion is succeeded")
DRF_END = ("DeploymentReady", "False", "Suggestion is succeeded", "Suggestion is succeeded")
ST = ("Succeeded", "True", "Experiment is succeeded", seed.FROM_VOLUME_END)
ST_NEVER = (
    "Succeeded",
    "True",
    "Experiment is succeeded",
    "Suggestion is succeeded, can't be restarted",
)
RF_RESTART = ("Running", "False", "Experiment is restarting", "Suggestion is not running")
FAILED = ("Failed", "True", "SuggestionFailed", "x")
RUNNING = [C, DRT, RT]
ENDED = [C, RF_END, DRF_END, ST]
EVERYTHING = dict(service=True, pvc=True, pv=True, service_account=True, role_binding=True)


def _config(pv: bool = True) -> config.KatibConfig:
    cfg = config.default()
    for entry in cfg.runtime.suggestions:
        entry.persistent_volume_claim_spec = {"storageClassName": "local"}
        if pv:
            entry.persistent_volume_spec = {"storageClassName": "local", "hostPath": {"path": "/p"}}
    return cfg


def _suggestion(
    conds: list[tuple[str, str, str, str]],
    policy: str = "FromVolume",
    *,
    finalizers: tuple[str, ...] = (deciding.FINALIZER,),
    settings: dict[str, str] | None = None,
    algorithm: str = "random",
) -> Suggestion:
    return Suggestion.model_validate(
        {
            "metadata": {
                "name": "exp",
                "namespace": "team",
                "uid": "u-1",
                "finalizers": list(finalizers),
            },
            "spec": {
                "algorithm": {
                    "algorithmName": algorithm,
                    "algorithmSettings": [
                        {"name": k, "value": v} for k, v in (settings or {}).items()
                    ],
                },
                "requests": 1,
                "resumePolicy": policy,
            },
            "status": {
                "startTime": EARLIER,
                "conditions": [
                    {
                        "type": t,
                        "status": s,
                        "reason": r,
                        "message": m,
                        "lastUpdateTime": EARLIER,
                        "lastTransitionTime": EARLIER,
                    }
                    for t, s, r, m in conds
                ],
            }
            if conds
            else None,
        }
    )


def _experiment(*conds: tuple[str, str]) -> Experiment:
    return Experiment.model_validate(
        {
            "metadata": {"name": "exp", "namespace": "team"},
            "spec": {"parameters": PARAMETERS},
            "status": {"conditions": [{"type": t, "status": s} for t, s in conds]},
        }
    )


RUNNING_EXP = _experiment(("Created", "True"), ("Running", "True"))
ENDED_EXP = _experiment(("Created", "True"), ("Running", "False"), ("Succeeded", "True"))
RESTARTED_EXP = _experiment(("Created", "True"), ("Restarting", "True"), ("Running", "True"))


def _conds(decision: Decision) -> list[tuple[str, str, str, str]]:
    assert decision.status is not None
    return [
        (c["type"], c["status"], c["reason"], c["message"]) for c in decision.status["conditions"]
    ]


def _kinds(decision: Decision) -> list[str]:
    return [body["kind"] for body in decision.create]


def _decide(suggestion: Suggestion, seen: Seen, pv: bool = True) -> Decision:
    return deciding.decide(suggestion, seen, _config(pv), now=NOW)


# -- tables ----------------------------------------------------------------------------------


def test_a_new_suggestion_is_created_alone() -> None:
    decision = _decide(
        Suggestion.model_validate(
            {
                "metadata": {"name": "exp", "namespace": "team"},
                "spec": {"algorithm": {"algorithmName": "random"}, "resumePolicy": "FromVolume"},
            }
        ),
        Seen(RUNNING_EXP),
    )
    assert _conds(decision) == [C]
    assert decision.status is not None and decision.status["startTime"] == NOW
    assert (decision.create, decision.delete, decision.add_finalizer) == ([], [], False)


def test_from_volume_with_a_pv_takes_the_finalizer_first_and_nothing_else() -> None:
    decision = _decide(_suggestion([C], finalizers=()), Seen(RUNNING_EXP))
    assert decision == Decision(add_finalizer=True)


def test_a_fallback_name_is_recorded_first_and_nothing_else() -> None:
    """Another owner holds Katib's name: the annotation is written before anything is made
    under the fallback, so a later pass (and the webhook) keep using it."""
    record = {"kubetune.kubeflow.org/deployment-name": "exp-random-bcdfghjk"}
    decision = _decide(_suggestion([C]), Seen(RUNNING_EXP, record=record))
    assert decision.annotate == record
    assert (decision.create, decision.status, decision.delete) == ([], None, [])


@pytest.mark.parametrize(
    ("policy", "pv", "seen", "kinds"),
    [
        (
            "FromVolume",
            True,
            Seen(RUNNING_EXP),
            [
                "PersistentVolume",
                "PersistentVolumeClaim",
                "ServiceAccount",
                "RoleBinding",
                "Service",
                "Deployment",
            ],
        ),
        (
            "FromVolume",
            False,
            Seen(RUNNING_EXP),
            ["PersistentVolumeClaim", "ServiceAccount", "RoleBinding", "Service", "Deployment"],
        ),
        (
            "Never",
            True,
            Seen(RUNNING_EXP),
            ["ServiceAccount", "RoleBinding", "Service", "Deployment"],
        ),
        (
            "LongRunning",
            True,
            Seen(RUNNING_EXP, pvc=True, service=True),
            ["ServiceAccount", "RoleBinding", "Deployment"],
        ),
        ("FromVolume", True, Seen(RUNNING_EXP, NOT_READY, **EVERYTHING), []),
    ],
    ids=[
        "from-volume-pv",
        "from-volume-claim-only",
        "never",
        "long-running-some-exist",
        "all-exist",
    ],
)
def test_what_is_missing_is_created_and_deployment_ready_is_false(
    policy: str, pv: bool, seen: Seen, kinds: list[str]
) -> None:
    decision = _decide(_suggestion([C], policy), seen, pv)
    assert _kinds(decision) == kinds
    assert _conds(decision) == [C, DRF]
    assert decision.requeue_after == deciding.NOT_READY_REQUEUE
    assert decision.delete == []
    deployments = [b for b in decision.create if b["kind"] == "Deployment"]
    for body in deployments:
        (volume,) = body["spec"]["template"]["spec"]["volumes"]
        assert ("persistentVolumeClaim" in volume) == (policy == "FromVolume")


def test_an_available_deployment_makes_it_ready_then_running() -> None:
    decision = _decide(_suggestion([C, DRF]), Seen(RUNNING_EXP, READY, **EVERYTHING))
    assert _conds(decision) == [C, DRT, RT]
    assert decision.create == [] and decision.requeue_after is None


@pytest.mark.parametrize(
    ("conds", "deployment"),
    [([C, DRF], NOT_READY), (RUNNING, READY)],
    ids=["still-not-ready", "running"],
)
def test_nothing_changed_writes_nothing(
    conds: list[tuple[str, str, str, str]], deployment: dict[str, Any]
) -> None:
    decision = _decide(_suggestion(conds), Seen(RUNNING_EXP, deployment, **EVERYTHING))
    assert decision.status is None
    assert decision.create == [] and decision.delete == []


def test_a_deployment_that_stops_being_available_is_not_ready_again() -> None:
    decision = _decide(_suggestion(RUNNING), Seen(RUNNING_EXP, NOT_READY, **EVERYTHING))
    assert _conds(decision) == [C, RT, DRF]


@pytest.mark.parametrize(
    ("policy", "before", "seen", "after", "deleted"),
    [
        (
            "FromVolume",
            RUNNING,
            Seen(ENDED_EXP, READY, **EVERYTHING),
            ENDED,
            ["Deployment", "Service"],
        ),
        (
            "Never",
            RUNNING,
            Seen(ENDED_EXP, READY, service=True),
            [C, RF_END, DRF_END, ST_NEVER],
            ["Deployment", "Service"],
        ),
        # the Experiment ended before the Deployment existed (Created is the last condition)
        ("FromVolume", [C], Seen(ENDED_EXP), ENDED, []),
        # ... or before the Suggestion was even Created: Created comes first
        ("FromVolume", [], Seen(ENDED_EXP), ENDED, []),
        (
            "FromVolume",
            [C, DRF],
            Seen(ENDED_EXP, NOT_READY, service=True),
            ENDED,
            ["Deployment", "Service"],
        ),
    ],
    ids=["from-volume", "never", "ended-after-created", "ended-before-created", "ended-not-ready"],
)
def test_an_ended_experiment_ends_the_suggestion(
    policy: str,
    before: list[tuple[str, str, str, str]],
    seen: Seen,
    after: list[tuple[str, str, str, str]],
    deleted: list[str],
) -> None:
    decision = _decide(_suggestion(before, policy), seen)
    assert _conds(decision) == after
    assert decision.status is not None and decision.status["completionTime"] == NOW
    assert decision.create == []
    assert [kind for kind, _ in decision.delete] == deleted
    assert all(name == "exp-random" for _, name in decision.delete)


def test_long_running_is_not_ended_by_its_experiment() -> None:
    decision = _decide(_suggestion(RUNNING, "LongRunning"), Seen(ENDED_EXP, READY, **EVERYTHING))
    assert decision == Decision()


def test_a_restarted_experiment_restarts_a_from_volume_suggestion() -> None:
    decision = _decide(_suggestion(ENDED), Seen(RESTARTED_EXP, pvc=True, pv=True))
    assert _conds(decision) == [C, DRF_END, RF_RESTART]
    assert decision.status is not None and set(decision.status) == {"conditions"}
    assert decision.create == [] and decision.delete == []


@pytest.mark.parametrize(
    ("conds", "policy", "experiment"),
    [
        ([C, RF_END, DRF_END, ST_NEVER], "Never", RESTARTED_EXP),
        (ENDED, "FromVolume", ENDED_EXP),
        ([C, FAILED], "FromVolume", RUNNING_EXP),
    ],
    ids=["never-is-not-restarted", "from-volume-still-ended", "failed"],
)
@pytest.mark.parametrize("present", [True, False], ids=["present", "gone"])
def test_a_finished_suggestion_only_loses_its_deployment_and_service(
    conds: list[tuple[str, str, str, str]], policy: str, experiment: Experiment, present: bool
) -> None:
    seen = Seen(experiment, READY if present else None, service=present, pvc=True, pv=True)
    decision = _decide(_suggestion(conds, policy), seen)
    assert decision.status is None and decision.create == []
    expected = [("Deployment", "exp-random"), ("Service", "exp-random")] if present else []
    assert decision.delete == expected


@pytest.mark.parametrize(
    ("settings", "algorithm", "message"),
    [
        (
            {"random_state": "-1"},
            "random",
            "Validation failed: algorithm setting random_state",
        ),
        ({}, "nonesuch", "Validation failed: "),
    ],
    ids=["bad-setting", "no-config-entry"],
)
def test_invalid_settings_or_algorithm_fail_the_suggestion_without_objects(
    settings: dict[str, str], algorithm: str, message: str
) -> None:
    decision = _decide(_suggestion([C], settings=settings, algorithm=algorithm), Seen(RUNNING_EXP))
    conds = _conds(decision)
    assert conds[:-1] == [C]
    assert conds[-1][:3] == ("Failed", "True", "SuggestionFailed")
    assert conds[-1][3].startswith(message), conds[-1][3]
    if algorithm == "nonesuch":
        assert "failed to find suggestion config for algorithm nonesuch" in conds[-1][3]
    assert decision.create == [] and decision.delete == []


def test_conditions_the_machine_cannot_follow_are_refused() -> None:
    foreign = ("Restarting", "True", "x", "someone else wrote this")
    with pytest.raises(IllegalTransition, match="Suggestion: cannot set DeploymentReady=False"):
        _decide(_suggestion([C, foreign]), Seen(RUNNING_EXP))


# -- whole sequences -------------------------------------------------------------------------


class World:
    """The objects a pass would have made, the Experiment, and every version of the conditions."""

    def __init__(self) -> None:
        self.suggestion: dict[str, Any] = {
            "metadata": {"name": "exp", "namespace": "team"},
            "spec": {"algorithm": {"algorithmName": "random"}, "resumePolicy": "FromVolume"},
        }
        self.seen = Seen(RUNNING_EXP)
        self.versions: list[list[dict[str, Any]]] = []
        self.tick = 0

    def run(self) -> Decision:
        self.tick += 1
        decision = deciding.decide(
            Suggestion.model_validate(self.suggestion),
            self.seen,
            _config(),
            now=f"2026-01-01T00:00:{self.tick:02d}Z",
        )
        if decision.add_finalizer:
            self.suggestion["metadata"]["finalizers"] = [deciding.FINALIZER]
        made = {body["kind"] for body in decision.create}
        self.seen = replace(
            self.seen,
            deployment=NOT_READY if "Deployment" in made else self.seen.deployment,
            service=self.seen.service or "Service" in made,
            pvc=self.seen.pvc or "PersistentVolumeClaim" in made,
            pv=self.seen.pv or "PersistentVolume" in made,
            service_account=self.seen.service_account or "ServiceAccount" in made,
            role_binding=self.seen.role_binding or "RoleBinding" in made,
        )
        if decision.status is not None:
            self.suggestion["status"] = {**self.suggestion.get("status", {}), **decision.status}
            self.versions.append(decision.status["conditions"])
        gone = {kind for kind, _ in decision.delete}
        if gone:
            self.seen = replace(
                self.seen,
                deployment=None if "Deployment" in gone else self.seen.deployment,
                service=self.seen.service and "Service" not in gone,
            )
        return decision

    def settle(self) -> None:
        """Passes until one changes nothing (as the events would bring them)."""
        for _ in range(10):
            decision = self.run()
            if decision.status is None and not decision.add_finalizer and not decision.create:
                return
        raise AssertionError("no steady state after 10 passes")

    def one_run(self) -> None:
        self.settle()  # Created, finalizer, objects, DeploymentReady=False
        self.seen = replace(self.seen, deployment=READY)
        self.settle()  # DeploymentReady, Running
        self.seen = replace(self.seen, experiment=ENDED_EXP)
        self.settle()  # Running=False, DeploymentReady=False, Succeeded; Deployment deleted
        assert self.seen.deployment is None and not self.seen.service
        assert self.seen.pvc and self.seen.pv


def test_first_run_follows_the_seed() -> None:
    world = World()
    world.one_run()
    assert seed.history(world.versions) == seed.FIRST_RUN


def test_restart_follows_the_seed_code() -> None:
    world = World()
    world.one_run()
    first = len(world.versions)
    world.seen = replace(world.seen, experiment=RESTARTED_EXP)
    world.run()
    assert world.seen.deployment is None  # the restart pass only marks the restart
    world.one_run()
    again = seed.history(world.versions)[len(seed.FIRST_RUN) :]
    assert again == seed.RESTART
    assert not any(c["type"] == "Restarting" for v in world.versions[first:] for c in v)


def test_a_grid_no_experiment_could_go_through_fails_the_suggestion_with_the_fix() -> None:
    """21 parameters of 1,001 values (~1e63 points): Failed at once with the count and the fix,
    where the algorithm used to retry an OverflowError every 30 s with the Experiment Created."""
    experiment = RUNNING_EXP.model_copy(deep=True)
    experiment.spec.parameters = [
        ParameterSpec.model_validate(
            {"name": f"p{i}", "parameterType": "int", "feasibleSpace": {"min": "0", "max": "1000"}}
        )
        for i in range(21)
    ]
    decision = _decide(_suggestion([C], algorithm="grid"), Seen(experiment))
    assert _conds(decision)[-1][:3] == ("Failed", "True", "SuggestionFailed")
    message = _conds(decision)[-1][3]
    assert message.startswith(
        "Validation failed: algorithm grid: all possible search combinations are about 1.0e63 "
        "(points per parameter: p0 1001,"
    ), message
    assert "more than the limit of 2147483647; set larger steps" in message
    assert decision.create == []


def test_hyperband_parallel_trial_count_fails_the_suggestion_with_the_fix() -> None:
    """Upstream's ValidateAlgorithmSettings rule, from the Experiment's parallelTrialCount."""
    experiment = RUNNING_EXP.model_copy(deep=True)
    experiment.spec.parallel_trial_count = 2
    name = PARAMETERS[0]["name"]
    settings = {"resource_name": name, "r_l": "9", "eta": "3"}
    decision = _decide(_suggestion([C], settings=settings, algorithm="hyperband"), Seen(experiment))
    message = _conds(decision)[-1][3]
    assert message.startswith("Validation failed: parallelTrialCount: 2 is less than 9"), message
    experiment.spec.parallel_trial_count = 9
    decision = _decide(_suggestion([C], settings=settings, algorithm="hyperband"), Seen(experiment))
    assert decision.create != []


def test_an_invalid_nas_config_fails_the_suggestion_with_upstreams_message() -> None:
    """What upstream's enas service answers ValidateAlgorithmSettings with, word for word (an
    Experiment admitted before the webhook knew NAS, or edited around it)."""
    from kubetune.api.experiment import NasConfig

    experiment = RUNNING_EXP.model_copy(deep=True)
    experiment.spec.parameters = None
    experiment.spec.nas_config = NasConfig.model_validate(
        {"graphConfig": {"numLayers": 2, "outputSizes": [10]}, "operations": []}
    )
    decision = _decide(_suggestion([C], algorithm="enas"), Seen(experiment))
    message = _conds(decision)[-1][3]
    assert message == (
        "Validation failed: Missing InputSizes in GraphConfig:\nnum_layers: 2\noutput_sizes: 10\n"
    )
    assert decision.create == []
