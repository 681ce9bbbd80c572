"""Early stopping end to end on the local overlay (issue 15 item 4): a medianstop Experiment
whose bad trials really stop early. Small and fast: every trial would print 60 epochs in
about 6 s (long enough for a collector started late on a loaded machine to catch up); a
stopped one prints a few."""

from __future__ import annotations

import json
import re

import pytest
from podcode import PYTHON_IMAGE, python_code
from test_experiments import POLL, apply, experiment_done, trials_of

from kubetune_testkit import builders
from kubetune_testkit.conditions import is_true, true_condition
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

EPOCHS = 60
TRAIN = (
    "import time\n"
    f"for epoch in range({EPOCHS}):\n"
    "    print(f'epoch {epoch}: accuracy={${trialParameters.x} + epoch / 1000:.4f}', flush=True)\n"
    "    time.sleep(0.1)\n"
)


def _pod_logs(cluster: ClusterHandle, ns: str) -> str:
    """Every container's log of the first trial pods: what a failed run needs to be read."""
    out = []
    for pod in get_json(cluster, "pods", "-n", ns)["items"][:3]:
        for container in pod["spec"]["containers"]:
            log = cluster.kubectl(
                "logs", "-n", ns, pod["metadata"]["name"], "-c", container["name"], check=False
            )
            out.append(f"--- {pod['metadata']['name']}/{container['name']}:\n{log.stdout[-2000:]}")
    return "\n".join(out)


def test_medianstop_stops_the_bad_trials_and_the_experiment_succeeds(
    kubetune: ClusterHandle, ns: str
) -> None:
    exp = builders.experiment(
        "medianstop",
        ns,
        objective_spec=builders.objective("accuracy", "maximize", strategies=False),
        algorithm=builders.algorithm_spec("random", {"random_state": "7"}),
        parameters=[
            {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}}
        ],
        trial_parameters=builders.references(x="x"),
        primary_container="training",
        trial_spec=builders.trial_job(
            python_code(TRAIN), container="training", image=PYTHON_IMAGE, backoff_limit=0
        ),
        collector=None,
        parallelTrialCount=2,
        maxTrialCount=8,
        earlyStopping={
            "algorithmName": "medianstop",
            "algorithmSettings": [
                {"name": "min_trials_required", "value": "2"},
                {"name": "start_step", "value": "2"},
            ],
        },
    )
    exp["spec"]["trialTemplate"]["retain"] = True
    out = apply(kubetune, exp, check=False)
    assert out.returncode == 0, out.stderr
    try:
        done = wait_for("the experiment", experiment_done(kubetune, "medianstop", ns), 420, POLL)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_pod_logs(kubetune, ns)}") from None
    status = done["status"]
    succeeded = true_condition(done, "Succeeded")
    assert succeeded is not None and succeeded["reason"] == "ExperimentMaxTrialsReached"
    if not status.get("trialsEarlyStopped"):
        trials = trials_of(kubetune, "medianstop", ns)
        raise AssertionError(
            "no trial was early stopped: "
            + json.dumps(status)
            + "\n"
            + json.dumps([{"spec": t["spec"], "status": t.get("status")} for t in trials[:3]])
            + "\n"
            + _pod_logs(kubetune, ns)
        )
    assert status["trials"] == 8
    assert status["trialsSucceeded"] + status["trialsEarlyStopped"] == 8, status

    trials = trials_of(kubetune, "medianstop", ns)
    stopped = [t for t in trials if is_true(t, "EarlyStopped")]
    assert len(stopped) == status["trialsEarlyStopped"]
    assert sorted(t["metadata"]["name"] for t in stopped) == sorted(status["earlyStoppedTrialList"])
    for trial in stopped:
        name = trial["metadata"]["name"]
        assert not is_true(trial, "Failed")
        (rule,) = trial["spec"]["earlyStoppingRules"]
        assert (rule["name"], rule["comparison"], rule["startStep"]) == ("accuracy", "less", 2)
        x = float(trial["spec"]["parameterAssignments"][0]["value"])
        assert x + 0.001 < float(rule["value"]), "only a trial worse than the median stops"
        (pod,) = get_json(kubetune, "pods", "-n", ns, "-l", f"katib.kubeflow.org/trial={name}")[
            "items"
        ]
        log = kubetune.kubectl("logs", "-n", ns, pod["metadata"]["name"], "-c", "training").stdout
        epochs = re.findall(r"^epoch (\d+):", log, flags=re.MULTILINE)
        assert 2 <= len(epochs) < EPOCHS, f"{name} ran {len(epochs)} epochs:\n{log}"
    # The first trials had no rule yet: they ran every epoch.
    free = [t for t in trials if not t["spec"].get("earlyStoppingRules")]
    assert len(free) >= 2
    assert all(is_true(t, "Succeeded") for t in free)
