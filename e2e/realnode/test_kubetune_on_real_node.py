"""kubetune on a real node, from its own images: an Experiment of batch Job trials whose
metrics the StdOut collector reads, and the UI answering through its Service.

Every pod here is a container of kubetune's images (kustomize/overlays/real): the collector
sidecar from the pns-collector image, the algorithm from the suggestion-algorithm image, the
trials from the example trainer image; the API server calls the webhook through its Service
with the certificate the webhook made for itself.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import running
from conftest import ARCHIVES, LOADED, TRAINER, TRAINER_IMAGE

from kubetune_testkit import kubectl, trialkinds
from kubetune_testkit.conditions import is_true
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.uipaths import object_path
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

Obj = dict[str, Any]
SCORE = "print('score=' + str(1 - abs(0.3 - ${trialParameters.x})))"


def score_experiment(ns: str, name: str, trials: int) -> Obj:
    """Random search over x in [0, 1]; each trial prints score = 1 - |0.3 - x| (the StdOut
    collector reads it); the trials' Jobs are kept (their pods show the images, their logs
    stay readable)."""
    exp = trialkinds.score_experiment(TRAINER, ns, name, "Never", trials, seed="7")
    exp["spec"]["parallelTrialCount"] = min(2, trials)
    exp["spec"]["metricsCollectorSpec"] = {"collector": {"kind": "StdOut"}}
    exp["spec"]["trialTemplate"]["retain"] = True
    return exp


def test_every_image_is_loaded_under_its_name(cluster: ClusterHandle) -> None:
    """`localcluster load` names what it imported (the overlay's images, the trainer)."""
    assert {name: [f"docker.io/kubetune/{name}:dev"] for name in ARCHIVES} == LOADED


def test_random_search_with_job_trials_and_the_stdout_collector(
    kubetune: ClusterHandle, ns: str
) -> None:
    exp = running.run(kubetune, score_experiment(ns, "score", trials=3))
    trials = get_json(kubetune, "trials", "-n", ns)["items"]
    assert len(trials) == 3
    scores = {}
    for trial in trials:
        assert is_true(trial, "Succeeded"), trial["status"]
        (x,) = [float(a["value"]) for a in trial["spec"]["parameterAssignments"]]
        # The metric the trainer printed, read by the collector from the training's stdout.
        score = running.metric(trial["status"]["observation"], "score")
        assert score == pytest.approx(1 - abs(0.3 - x), abs=1e-9), trial["metadata"]["name"]
        scores[trial["metadata"]["name"]] = score
    best = exp["status"]["currentOptimalTrial"]
    assert best["bestTrialName"] == max(scores, key=scores.__getitem__)
    assert running.metric(best["observation"], "score") == max(scores.values())
    # The collector ran as a sidecar from its own image in each trial pod.
    pods = get_json(kubetune, "pods", "-n", ns, "-l", "katib.kubeflow.org/experiment=score")
    trial_pods = [
        {c["name"]: c["image"] for c in pod["spec"]["containers"]}
        for pod in pods["items"]
        if "katib.kubeflow.org/trial" in pod["metadata"]["labels"]
    ]
    assert len(trial_pods) == 3, [p["metadata"]["labels"] for p in pods["items"]]
    for images in trial_pods:
        assert images["training"] == TRAINER_IMAGE
        assert "docker.io/kubetune/pns-collector:dev" in images.values(), images


def test_the_ui_answers_through_its_service(kubetune: ClusterHandle, ns: str) -> None:
    """The API server's service proxy reaches the UI pod through the Service (the UI listens on
    the pod's own network, not the host's); the trial's log comes from the kubelet."""
    kubectl.apply(kubetune, score_experiment(ns, "shown", trials=1), check=True)
    proxy = "/api/v1/namespaces/kubeflow/services/kubetune-ui:http/proxy"

    def get(path: str) -> Any:
        out = kubetune.kubectl("get", "--raw", proxy + path, check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def shown() -> Obj | None:
        page: Obj | None = get(object_path("/api/experiments", ns, "shown"))
        done = page and page["experiment"]["state"] == "Succeeded" and page["trials"]
        return page if done else None

    try:
        page = wait_for("the UI to show Experiment shown Succeeded", shown, 600, interval=1.0)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{running.describe(kubetune, ns)}") from None
    (trial,) = page["trials"]
    assert page["best"]["trial"] == trial["name"], page["best"]

    def training_log() -> str | None:
        out = kubetune.kubectl(
            "get", "--raw", proxy + object_path("/api/trials", ns, trial["name"], "logs"),
            check=False,
        )  # fmt: skip
        return out.stdout if "score=" in out.stdout else None

    wait_for("the trial's training log through the UI", training_log, 60, interval=1.0)
