"""Trials the real operators run on the real node: TFJobs and PyTorchJobs of the
training-operator, Argo Workflows whose pod has a sidecar that never exits.

The operators are the releases' own (`localcluster install-operators`: images made here from
the binaries `build-operators` makes, the releases' manifests); the trial containers run the
example trainer image, with kubetune's collector injected from its own image. The Experiments
are the node-agent suite's (testkit's trialkinds).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import TRAINER, TRAINER_IMAGE
from running import metric, pods_of, run, trials_of

from kubetune_testkit import trialkinds
from kubetune_testkit.conditions import true_condition
from kubetune_testkit.kubectl import get_json
from localcluster import nodeoperators
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

Obj = dict[str, Any]
DIGITS = "/opt/kubetune/examples/training/digits.py"
"""The example trainer's script, where the trainer image has it."""
COLLECTOR = "metrics-logger-and-collector"


def test_tfjob_trials_with_the_real_training_operator(
    real_operators: ClusterHandle, ns: str
) -> None:
    """The chief (labelled job-role=master by the operator) is the primary pod: the File
    collector reads the metrics file digits.py writes; the worker's name resolves in it."""
    exp = trialkinds.tfjob_experiment(
        ns,
        "tfjob",
        chief=TRAINER.code(
            trialkinds.RESOLVE_TF_CONFIG, "python3", DIGITS, *trialkinds.DIGITS_ARGS
        ),
        worker=TRAINER.code(trialkinds.RESOLVE_TF_CONFIG, "sleep", "600"),
        image=TRAINER_IMAGE,
        max_trials=2,
    )
    done = run(real_operators, exp)
    assert (done["status"]["trials"], done["status"]["trialsSucceeded"]) == (2, 2)
    trials = trials_of(real_operators, ns, "tfjob")
    best = min(trials, key=lambda t: metric(t["status"]["observation"], "loss", "min"))
    assert done["status"]["currentOptimalTrial"]["bestTrialName"] == best["metadata"]["name"]
    for trial in trials:
        assert 0.5 < metric(trial["status"]["observation"], "accuracy") <= 1.0
        job = get_json(real_operators, "tfjob", trial["metadata"]["name"], "-n", ns)
        assert true_condition(job, "Succeeded") is not None
    chiefs = pods_of(real_operators, ns, "training.kubeflow.org/replica-type=chief")
    assert len(chiefs) == 2, "the operator made no chief pods"
    for pod in chiefs:
        images = {c["name"]: c["image"] for c in pod["spec"]["containers"]}
        assert images["tensorflow"] == TRAINER_IMAGE
        assert images[COLLECTOR] == "docker.io/kubetune/pns-collector:dev", images


def test_pytorchjob_trials_with_the_real_training_operator(
    real_operators: ClusterHandle, ns: str
) -> None:
    """The operator gives the worker its init container (from the tools image; it waits for the
    master's name); the master resolves MASTER_ADDR, and its score is the metric (the job ends
    with the master: the worker may still be starting then)."""
    done = run(real_operators, trialkinds.pytorchjob_experiment(TRAINER, ns, "pytorch"))
    assert (done["status"]["trials"], done["status"]["trialsSucceeded"]) == (2, 2)
    for trial in trials_of(real_operators, ns, "pytorch"):
        x = float(trial["spec"]["parameterAssignments"][0]["value"])
        assert metric(trial["status"]["observation"], "score") == pytest.approx(1 - abs(0.3 - x))
    workers = pods_of(real_operators, ns, "training.kubeflow.org/replica-type=worker")
    assert len(workers) == 2, "the operator made no worker pods"
    for pod in workers:
        init = [c["name"] for c in pod["spec"].get("initContainers") or []]
        assert init == ["init-pytorch"], init


def test_argo_workflow_trials_with_a_sidecar_that_never_exits(
    real_operators: ClusterHandle, ns: str
) -> None:
    """Argo's emissary executor in the trainer image's containers, kubetune's collector beside
    them: the Workflow ends once main does (Argo stops the sidecar), the Trial succeeds with
    main's metric."""
    state = real_operators.state
    assert state is not None
    nodeoperators.grant_argo_executor(state.kubectl, state.kubeconfig, ns)
    workflow = trialkinds.sidecar_workflow(TRAINER)
    done = run(real_operators, trialkinds.argo_experiment(TRAINER, ns, "argo", workflow, 2))
    assert (done["status"]["trials"], done["status"]["trialsSucceeded"]) == (2, 2)
    for trial in trials_of(real_operators, ns, "argo"):
        x = float(trial["spec"]["parameterAssignments"][0]["value"])
        assert metric(trial["status"]["observation"], "score") == pytest.approx(1 - abs(0.3 - x))
        wf = get_json(real_operators, "workflow", trial["metadata"]["name"], "-n", ns)
        assert wf["status"]["phase"] == "Succeeded"
    pods = pods_of(real_operators, ns, "workflows.argoproj.io/workflow")
    assert len(pods) == 2
    for pod in pods:
        states = {c["name"]: c["state"] for c in pod["status"]["containerStatuses"]}
        assert {"wait", "main", "forever"} <= set(states), states
        assert "terminated" in states["forever"], "Argo did not stop the sidecar"
        assert states["main"]["terminated"]["exitCode"] == 0, states["main"]
