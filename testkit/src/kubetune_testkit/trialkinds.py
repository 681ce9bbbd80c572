"""The end-to-end Experiments both e2e suites run: trials as TFJobs, PyTorchJobs and Argo
Workflows, a medianstop search and a quick score search.

The suites differ only in how a trial container runs Python: on the node agent's stand-in node
a container is a host process (this interpreter, the checkout's scripts); on the real node it
is a container of the example trainer image (its ``python3``). `PodPython` carries that
difference, so each Experiment is written once here.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from kubetune_testkit import builders
from kubetune_testkit.conditions import is_true, true_condition
from kubetune_testkit.kubectl import get_json

Obj = dict[str, Any]
SCORE_SCRIPT = "print('score=' + str(1 - abs(0.3 - ${trialParameters.x})))"
"""A trial's whole training: score = 1 - |0.3 - x|."""


@dataclass(frozen=True)
class PodPython:
    """The interpreter a trial container runs and the image it runs in."""

    interpreter: str
    image: str

    def code(self, code: str, *args: str) -> list[str]:
        """argv running ``code`` with ``args``, wrapped by the webhook or not: a wrapped
        container's command is one shell line (Katib joins command and args with spaces and
        runs them with ``sh -c``), so the program is given as ``sh -c <quoted line>``."""
        return ["sh", "-c", shlex.join([self.interpreter, "-c", code, *args])]

    def words(self, code: str, *args: str) -> list[str]:
        """argv running ``code`` as the wrapper's shell line only: each element one quoted
        shell word, for a command another program's command is put before (Argo's executor),
        where ``sh -c`` would no longer come first."""
        return [shlex.quote(a) for a in [self.interpreter, "-c", code, *args]]


def x_search(pods: PodPython, ns: str, name: str, code: str, objective: Obj, **spec: Any) -> Obj:
    """Random search over x in [0, 1] of batch Job trials that run ``code`` (which reads
    ``${trialParameters.x}``), two at a time; ``spec`` sets the rest (the seed is 3)."""
    seed = spec.pop("seed", "3")
    return builders.experiment(
        name,
        ns,
        objective_spec=objective,
        algorithm=builders.algorithm_spec("random", {"random_state": seed}),
        parameters=[
            {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}}
        ],
        trial_parameters=builders.references(x="x"),
        primary_container="training",
        trial_spec=builders.trial_job(
            pods.code(code), container="training", image=pods.image, backoff_limit=0
        ),
        collector=None,
        **{"parallelTrialCount": 2, **spec},
    )


def score_experiment(
    pods: PodPython, ns: str, name: str, policy: str, max_trials: int, seed: str = "3"
) -> Obj:
    """Trials that print their score and end at once."""
    objective = builders.objective("score", strategies=False)
    return x_search(
        pods, ns, name, SCORE_SCRIPT, objective,
        seed=seed, maxTrialCount=max_trials, resumePolicy=policy,
    )  # fmt: skip


# --- TFJob -------------------------------------------------------------------------------

RESOLVE_TF_CONFIG = """
import json, os, socket, subprocess, sys, time
cluster = json.loads(os.environ["TF_CONFIG"])["cluster"]
hosts = sorted({a.rsplit(":", 1)[0] for addrs in cluster.values() for a in addrs})
deadline = time.time() + 180
while True:
    try:
        print("resolved", {h: socket.gethostbyname(h) for h in hosts}, flush=True)
        break
    except OSError:
        if time.time() > deadline:
            raise
        time.sleep(1)
sys.exit(subprocess.call(sys.argv[1:]) if len(sys.argv) > 1 else 0)
"""
"""Resolves every host name of TF_CONFIG (retrying until all pods have addresses), then runs
the rest of argv: the real operator's service names must resolve in the pods."""
DIGITS_ARGS = (
    "--epochs=2",
    "--lr=${trialParameters.learningRate}",
    "--l2=${trialParameters.weightDecay}",
    "--metrics-file=/var/log/katib/metrics.log",
)
"""examples/training/digits.py's arguments in a TFJob trial (the File collector's file)."""


def tfjob_experiment(
    ns: str, name: str, *, chief: list[str], worker: list[str], image: str, max_trials: int = 4
) -> Obj:
    """TPE over a TFJob of a chief (primary: the operator labels it job-role=master; File
    collector) and a worker that stays up until the operator ends the job."""

    def replica(command: list[str]) -> Obj:
        container = {"name": "tensorflow", "image": image, "command": command}
        return {
            "replicas": 1,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "objective": {
                "type": "minimize",
                "objectiveMetricName": "loss",
                "additionalMetricNames": ["accuracy"],
            },
            "algorithm": {
                "algorithmName": "tpe",
                "algorithmSettings": [{"name": "random_state", "value": "5"}],
            },
            "parallelTrialCount": 2,
            "maxTrialCount": max_trials,
            "metricsCollectorSpec": {"collector": {"kind": "File"}},
            "parameters": [
                {
                    "name": "lr",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "0.01", "max": "1", "distribution": "logUniform"},
                },
                {
                    "name": "l2",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "0.00001", "max": "0.01"},
                },
            ],
            "trialTemplate": {
                "primaryContainerName": "tensorflow",
                "retain": True,
                "primaryPodLabels": {"training.kubeflow.org/job-role": "master"},
                "trialParameters": builders.references(learningRate="lr", weightDecay="l2"),
                "trialSpec": {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "TFJob",
                    "spec": {
                        # The sleeping worker is stopped when the chief is done.
                        "runPolicy": {"cleanPodPolicy": "Running"},
                        "tfReplicaSpecs": {"Chief": replica(chief), "Worker": replica(worker)},
                    },
                },
            },
        },
    }


# --- PyTorchJob --------------------------------------------------------------------------

PYTORCH_SCRIPT = """
import os, socket, time
deadline = time.time() + 180
while True:
    try:
        address = socket.gethostbyname(os.environ["MASTER_ADDR"])
        break
    except OSError:
        if time.time() > deadline:
            raise
        time.sleep(1)
print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], "master at", address, flush=True)
if os.environ["RANK"] == "0":
    print("score=" + str(1 - abs(0.3 - ${trialParameters.x})))
"""
"""Both replicas resolve MASTER_ADDR; the master (rank 0) prints the score."""


def pytorchjob_experiment(pods: PodPython, ns: str, name: str, max_trials: int = 2) -> Obj:
    """Random search over PyTorchJobs of a master (primary) and a worker."""
    exp = score_experiment(pods, ns, name, "Never", max_trials)

    def replica() -> Obj:
        container = {"name": "pytorch", "image": pods.image, "command": pods.code(PYTORCH_SCRIPT)}
        return {
            "replicas": 1,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container]}},
        }

    exp["spec"]["trialTemplate"].update(
        primaryContainerName="pytorch",
        retain=True,
        trialSpec={
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "spec": {"pytorchReplicaSpecs": {"Master": replica(), "Worker": replica()}},
        },
    )
    return exp


# --- Argo Workflows ----------------------------------------------------------------------

PRIMARY = {"katib.kubeflow.org/model-training": "true"}
"""The label of a Workflow's primary pod (the trial's primaryPodLabels)."""


def argo_experiment(pods: PodPython, ns: str, name: str, workflow: Obj, max_trials: int = 3) -> Obj:
    """Trials are Argo Workflows; the pod labelled model-training=true is the primary one."""
    exp = score_experiment(pods, ns, name, "Never", max_trials)
    exp["spec"]["trialTemplate"].update(
        primaryContainerName="main",
        primaryPodLabels=PRIMARY,
        retain=True,
        successCondition='status.[@this].#(phase=="Succeeded")#',
        failureCondition='status.[@this].#(phase=="Failed")#',
        trialSpec={"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "spec": workflow},
    )
    return exp


def argo_step(pods: PodPython, name: str, code: str, primary: bool = False, **extra: Any) -> Obj:
    """An Argo step; the primary one's command is written as shell words (`PodPython.words`)."""
    command = pods.words(code) if primary else pods.code(code)
    template: Obj = {"name": name, "container": {"image": pods.image, "command": command}, **extra}
    if primary:
        template["metadata"] = {"labels": dict(PRIMARY)}
    return template


def sidecar_workflow(pods: PodPython) -> Obj:
    """One primary step printing the score, beside a sidecar that never exits."""
    forever = {
        "name": "forever",
        "image": pods.image,
        "command": pods.code("import time; time.sleep(100000)"),
    }
    return {
        "entrypoint": "train",
        "templates": [argo_step(pods, "train", SCORE_SCRIPT, primary=True, sidecars=[forever])],
    }


# --- medianstop --------------------------------------------------------------------------

EPOCHS = 60
TRAIN_EPOCHS = (
    "import time\n"
    f"for epoch in range({EPOCHS}):\n"
    "    print(f'epoch {epoch}: accuracy={${trialParameters.x} + epoch / 1000:.4f}', flush=True)\n"
    "    time.sleep(0.1)\n"
)
"""Every trial would print 60 epochs in about 6 s (long enough for a collector started late
on a loaded machine to catch up); a stopped one prints a few."""


def medianstop_experiment(pods: PodPython, ns: str, name: str, max_trials: int = 8) -> Obj:
    """Random search with medianstop early stopping after two trials, from step 2."""
    exp = x_search(
        pods,
        ns,
        name,
        TRAIN_EPOCHS,
        builders.objective("accuracy", "maximize", strategies=False),
        seed="7",
        maxTrialCount=max_trials,
        earlyStopping=builders.algorithm_spec(
            "medianstop", {"min_trials_required": "2", "start_step": "2"}
        ),
    )
    exp["spec"]["trialTemplate"]["retain"] = True
    return exp


def check_medianstop(cluster: Any, ns: str, done: Obj, trials: list[Obj], max_trials: int) -> None:
    """What a finished medianstop Experiment ``done`` (with its ``trials``) must show: some
    trials stopped early, each by a rule on its worse-than-median metric after a few of its
    epochs; the first trials, with no rule yet, ran every epoch."""
    status = done["status"]
    succeeded = true_condition(done, "Succeeded")
    assert succeeded is not None and succeeded["reason"] == "ExperimentMaxTrialsReached"
    assert status.get("trialsEarlyStopped"), "no trial was early stopped: " + json.dumps(
        {
            "status": status,
            "trials": [{"spec": t["spec"], "status": t.get("status")} for t in trials],
        }
    )
    assert status["trials"] == max_trials
    assert status["trialsSucceeded"] + status["trialsEarlyStopped"] == max_trials, status
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
        (pod,) = get_json(cluster, "pods", "-n", ns, "-l", f"katib.kubeflow.org/trial={name}")[
            "items"
        ]
        log = cluster.kubectl("logs", "-n", ns, pod["metadata"]["name"], "-c", "training").stdout
        epochs = re.findall(r"^epoch (\d+):", log, flags=re.MULTILINE)
        assert 2 <= len(epochs) < EPOCHS, f"{name} ran {len(epochs)} epochs:\n{log}"
    free = [t for t in trials if not t["spec"].get("earlyStoppingRules")]
    assert len(free) >= 2
    assert all(is_true(t, "Succeeded") for t in free)
