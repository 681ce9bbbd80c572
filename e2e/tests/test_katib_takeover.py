"""kubetune's controllers continue an Experiment Katib ran halfway, on the deployed local overlay.

Katib's objects are written as Katib v0.19.0's controller writes them (its experiment
controller's `getTrialInstance` and Suggestion, its trial controller's conditions, its
finalizers), while kubetune's three controllers are scaled to zero: the cluster as it is after
Katib's controller, webhook and db-manager were removed and kubetune was installed, the moment
before kubetune's controllers start. Katib's Suggestion service named the Trials at random.

Halfway: two Trials Succeeded (their Jobs gone, as Katib deletes them), one Running. The
Running Trial's pod is a stand-in for one kubetune can collect: its Job's pod template carries
the trial label, so kubetune's webhook injects its collector (a pod Katib's webhook injected is
the trial-controller's `test_katib_pods.py`: reported by name). Then the controllers start, and
the Experiment must finish with Katib's names kept, no Trial run twice, the counts and the
optimum right.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
from kubetune_cli.main import main as cli
from test_local_overlay import wait_succeeded

from kubetune.kube import EVENTS, EXPERIMENTS, JOBS, PODS, SUGGESTIONS, TRIALS, Kube
from kubetune_testkit import builders, deploying
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

CONTROLLERS = (
    "kubetune-experiment-controller",
    "kubetune-suggestion-controller",
    "kubetune-trial-controller",
)
STAMP = "2026-05-20T10:00:00Z"
# Katib's random Trial names (its suggestion services name them `<experiment>-<8 random>`).
SUCCEEDED = {"mnist-k8sx2q4w": ("0.021", "0.9"), "mnist-p9vd3mzn": ("0.015", "0.015")}
RUNNING = ("mnist-r7tb6cya", "0.025")


@pytest.fixture
def controllers_stopped(kubetune: ClusterHandle) -> Iterator[None]:
    """kubetune's controllers at zero replicas (the webhook serves); started again after."""

    def scale(replicas: int) -> None:
        for name in CONTROLLERS:
            kubetune.kubectl(
                "-n", "kubeflow", "scale", "deployment", name, f"--replicas={replicas}"
            )

    scale(0)
    try:
        for name in CONTROLLERS:
            kubetune.kubectl(
                "-n", "kubeflow", "wait", "--for=delete", "pod", "-l",
                f"app.kubernetes.io/name={name}", "--timeout=120s",
            )  # fmt: skip
        yield
    finally:
        scale(1)
        deploying.wait_available(kubetune)


def _experiment(namespace: str) -> dict[str, Any]:
    script = "import sys, time; time.sleep(float(sys.argv[2])); print('accuracy=' + sys.argv[1])"
    command = ["python3", "-c", shlex.quote(script), "${trialParameters.learningRate}", "1"]
    body = builders.experiment(
        "mnist",
        namespace,
        objective_spec=builders.objective(strategies=False),
        parameters=[{**builders.LR, "feasibleSpace": {"min": "0.01", "max": "0.03"}}],
        trial_spec=builders.trial_job(command, image="python:3.11"),
        collector=None,
        parallelTrialCount=2,
        maxTrialCount=5,
        maxFailedTrialCount=1,
    )
    body["spec"]["trialTemplate"]["retain"] = True  # every Job stays: a re-run would show
    body["metadata"]["finalizers"] = ["update-prometheus-metrics"]  # Katib's controller's
    return body


def _controller_ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _katib_trial(experiment: dict[str, Any], name: str, lr: str) -> dict[str, Any]:
    """Katib's getTrialInstance: the Experiment's labels and the experiment label, its
    controller reference, the template rendered with the assignment, its finalizer."""
    spec = experiment["spec"]
    template = spec["trialTemplate"]
    run_spec = json.loads(
        json.dumps(template["trialSpec"]).replace("${trialParameters.learningRate}", lr)
    )
    run_spec.setdefault("metadata", {}).update(
        {"name": name, "namespace": experiment["metadata"]["namespace"]}
    )
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {
            "name": name,
            "labels": {"katib.kubeflow.org/experiment": "mnist"},
            "ownerReferences": [_controller_ref(experiment)],
            "finalizers": ["clean-metrics-in-db"],
        },
        "spec": {
            "objective": spec["objective"],
            "parameterAssignments": [{"name": "lr", "value": lr}],
            "runSpec": run_spec,
            "retainRun": True,
            "metricsCollector": spec["metricsCollectorSpec"],
            "primaryContainerName": template["primaryContainerName"],
            **{k: template[k] for k in ("successCondition", "failureCondition") if k in template},
        },
    }


def _condition(
    type_: str, reason: str, status: str = "True", kind: str = "Trial"
) -> dict[str, str]:
    """A condition as Katib writes it (its message: "<Kind> is <state>")."""
    state = "ready" if type_ == "DeploymentReady" else type_.lower()
    return {
        "type": type_, "status": status, "reason": reason, "message": f"{kind} is {state}",
        "lastUpdateTime": STAMP, "lastTransitionTime": STAMP,
    }  # fmt: skip


def _observation(value: str) -> dict[str, Any]:
    return {"metrics": [{"name": "accuracy", "min": value, "max": value, "latest": value}]}


KATIB_SIDECAR = {
    "name": "metrics-logger-and-collector",
    "image": "ghcr.io/kubeflow/katib/file-metrics-collector:v0.19.0",
    "command": ["sh", "-c", "sleep 600"],  # on the node agent: ignores the collector's flags
    "args": ["-t", RUNNING[0], "-m", "accuracy", "-o-type", "maximize",
             "-s-db", "katib-db-manager.kubeflow:6789", "-path", "/var/log/katib/metrics.log"],
}  # fmt: skip
"""Katib v0.19.0's webhook's sidecar (its collector's Go flags)."""


def _write_katib_state(kube: Kube, namespace: str, katib_injected: bool = False) -> dict[str, Any]:
    """Katib's objects halfway; with `katib_injected` the Running Trial's pod carries Katib's
    collector as Katib's webhook leaves it (its trial label, its sidecar, a command that does
    not end), so kubetune's webhook admits it unchanged."""
    kube.create(EXPERIMENTS, _experiment(namespace), namespace)
    experiment = kube.get(EXPERIMENTS, "mnist", namespace)  # as kubetune's webhook defaulted it
    names = [*SUCCEEDED, RUNNING[0]]
    assignments = {**{n: lr for n, (lr, _) in SUCCEEDED.items()}, RUNNING[0]: RUNNING[1]}
    suggestion = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Suggestion",
        "metadata": {"name": "mnist", "ownerReferences": [_controller_ref(experiment)]},
        "spec": {
            "algorithm": experiment["spec"]["algorithm"],
            "requests": 3,
            "resumePolicy": experiment["spec"].get("resumePolicy", "Never"),
        },
    }
    kube.create(SUGGESTIONS, suggestion, namespace)
    kube.patch(
        SUGGESTIONS, "mnist",
        {"status": {
            "suggestionCount": 3,
            "suggestions": [
                {"name": n, "parameterAssignments": [{"name": "lr", "value": assignments[n]}]}
                for n in names
            ],
            "conditions": [
                _condition("Created", "SuggestionCreated", kind="Suggestion"),
                _condition("DeploymentReady", "DeploymentReady", kind="Deployment"),
                _condition("Running", "SuggestionRunning", kind="Suggestion"),
            ],
            "startTime": STAMP,
        }},
        namespace, subresource="status",
    )  # fmt: skip
    for name, (lr, accuracy) in SUCCEEDED.items():
        kube.create(TRIALS, _katib_trial(experiment, name, lr), namespace)
        status = {
            "startTime": STAMP,
            "completionTime": STAMP,
            "conditions": [
                _condition("Created", "TrialCreated"),
                _condition("Running", "TrialRunning", "False"),
                _condition("Succeeded", "TrialSucceeded"),
            ],
            "observation": _observation(accuracy),
        }
        kube.patch(TRIALS, name, {"status": status}, namespace, subresource="status")
    running = kube.create(TRIALS, _katib_trial(experiment, *RUNNING), namespace)
    kube.patch(
        TRIALS, RUNNING[0],
        {"status": {"startTime": STAMP, "conditions": [
            _condition("Created", "TrialCreated"), _condition("Running", "TrialRunning")
        ]}},
        namespace, subresource="status",
    )  # fmt: skip
    job = json.loads(json.dumps(running["spec"]["runSpec"]))
    job["metadata"]["ownerReferences"] = [_controller_ref(running)]
    pod_meta = job["spec"]["template"].setdefault("metadata", {})
    pod_meta.setdefault("labels", {})["katib.kubeflow.org/trial"] = RUNNING[0]
    if katib_injected:
        pod_spec = job["spec"]["template"]["spec"]
        pod_spec["containers"][0]["command"] = ["sh", "-c", "sleep 600"]
        pod_spec["containers"].append(KATIB_SIDECAR)
    job = kube.create(JOBS, job, namespace)
    best = next(iter(SUCCEEDED))
    kube.patch(
        EXPERIMENTS, "mnist",
        {"status": {
            "startTime": STAMP,
            "conditions": [
                _condition("Created", "ExperimentCreated", kind="Experiment"),
                _condition("Running", "ExperimentRunning", kind="Experiment"),
            ],
            "trials": 3, "trialsSucceeded": 2, "trialsRunning": 1,
            "succeededTrialList": list(SUCCEEDED), "runningTrialList": [RUNNING[0]],
            "currentOptimalTrial": {
                "bestTrialName": best,
                "parameterAssignments": [{"name": "lr", "value": SUCCEEDED[best][0]}],
                "observation": _observation(SUCCEEDED[best][1]),
            },
        }},
        namespace, subresource="status",
    )  # fmt: skip
    return job


def test_an_experiment_katib_ran_halfway_finishes_under_kubetune(
    kubetune: ClusterHandle, ns: str, kube: Kube, controllers_stopped: None
) -> None:
    katib_job = _write_katib_state(kube, ns)
    before = {n: kube.get(TRIALS, n, ns)["status"] for n in SUCCEEDED}

    kubetune.kubectl("-n", "kubeflow", "scale", "deployment", *CONTROLLERS, "--replicas=1")
    experiment = wait_succeeded(kubetune, ns, "mnist")

    trials = {t["metadata"]["name"]: t for t in kube.list_all(TRIALS, ns)}
    assert len(trials) == 5 and set(SUCCEEDED) | {RUNNING[0]} <= set(trials)
    status = experiment["status"]
    assert (status["trials"], status["trialsSucceeded"]) == (5, 5)
    assert not status.get("trialsRunning") and not status.get("runningTrialList")
    assert sorted(status["succeededTrialList"]) == sorted(trials)
    # The optimum: Katib's first Trial (0.9) beats every new one (accuracy = lr <= 0.03).
    optimal = status["currentOptimalTrial"]
    assert optimal["bestTrialName"] == "mnist-k8sx2q4w"
    assert optimal["observation"]["metrics"][0]["latest"] == "0.9"
    # Never run twice: Katib's finished Trials got no Job and kept their status; the running
    # one finished on Katib's Job (same uid), with its own result.
    jobs = {j["metadata"]["name"]: j for j in kube.list_all(JOBS, ns)}
    assert not set(SUCCEEDED) & set(jobs), sorted(jobs)
    assert jobs[RUNNING[0]]["metadata"]["uid"] == katib_job["metadata"]["uid"]
    for name, status_before in before.items():
        after = trials[name]["status"]
        assert after["conditions"] == status_before["conditions"]
        assert after["observation"] == status_before["observation"]
    assert trials[RUNNING[0]]["status"]["observation"]["metrics"][0]["latest"] == RUNNING[1]
    # The Suggestion kept Katib's names first; kubetune's algorithm appended its own.
    suggestion = kube.get(SUGGESTIONS, "mnist", ns)
    names = [s["name"] for s in suggestion["status"]["suggestions"]]
    assert names[:3] == [*SUCCEEDED, RUNNING[0]] and len(names) == 5
    assert suggestion["spec"]["requests"] == 5
    wait_for(
        "no Trial left Running",
        lambda: all(
            not any(
                c["type"] == "Running" and c["status"] == "True" for c in t["status"]["conditions"]
            )
            for t in kube.list_all(TRIALS, ns)
        ),
        30,
    )
    # Katib's finalizers stay on its objects until released (Katib is gone): as the docs say.
    assert (
        cli(["--kubeconfig", kubetune.kubeconfig, "-n", ns, "katib-check", "--release-finalizers"])
        == 0
    )


def test_a_trial_running_katibs_collector_is_reported_and_replaced_once_deleted(
    kubetune: ClusterHandle, ns: str, kube: Kube, controllers_stopped: None
) -> None:
    _write_katib_state(kube, ns, katib_injected=True)
    kubetune.kubectl("-n", "kubeflow", "scale", "deployment", *CONTROLLERS, "--replicas=1")

    def reported() -> list[dict[str, Any]]:
        events = kube.list_all(EVENTS, ns, field_selector="reason=KatibCollectorPod")
        return [e for e in events if e["involvedObject"]["kind"] == "Experiment"]

    (event,) = wait_for("the KatibCollectorPod event on the Experiment", reported, 180)
    assert event["message"].startswith(f"Trial {RUNNING[0]} cannot be taken over: its pod(s) ")
    assert "delete the Trial" in event["message"]
    pods = kube.list_all(PODS, ns, label_selector=f"katib.kubeflow.org/trial={RUNNING[0]}")
    assert [c["name"] for c in pods[0]["spec"]["containers"]] == [
        "training-container",
        "metrics-logger-and-collector",
    ]  # fmt: skip  (admitted unchanged: no second sidecar)

    # What the Event says to do: release Katib's finalizers, delete it; kubetune runs a Trial
    # in its place.
    assert cli(["--kubeconfig", kubetune.kubeconfig, "-n", ns, "katib-check"]) == 0
    assert (
        cli(["--kubeconfig", kubetune.kubeconfig, "-n", ns, "katib-check", "--release-finalizers"])
        == 0
    )
    kube.delete(TRIALS, RUNNING[0], ns)
    experiment = wait_succeeded(kubetune, ns, "mnist")
    status = experiment["status"]
    assert (status["trials"], status["trialsSucceeded"]) == (5, 5)
    assert set(SUCCEEDED) <= set(status["succeededTrialList"])
    assert status["currentOptimalTrial"]["bestTrialName"] == "mnist-k8sx2q4w"
