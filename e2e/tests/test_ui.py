"""The web UI as the local overlay deploys it: its own ServiceAccount's rights are enough to
show a finished Experiment, its Trials and a trial's training log (a real pod's).

The browser tests are in services/ui (tox -e ui); this one checks the deployed pieces: the
Deployment, its read-only RBAC, the host port of the local overlay, and the log through the API
server's pods/log.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from podcode import PYTHON_IMAGE, python_code

from kubetune_testkit import builders, deploying, kubectl
from kubetune_testkit.conditions import is_true
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.uipaths import object_path
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

SCRIPT = "print('training with x=${trialParameters.x}'); print('score=0.75')"


def ui_url(cluster: ClusterHandle) -> str:
    """The UI on the host network, at the local overlay's port for this cluster
    (kustomize/overlays/local/patches/ui.yaml)."""
    return f"http://127.0.0.1:{deploying.local_port(cluster, 'ui')}"


def get(ui: str, path: str) -> Any:
    with urllib.request.urlopen(ui + path, timeout=30) as answer:
        body = answer.read().decode()
        return json.loads(body) if "json" in answer.headers.get("Content-Type", "") else body


def test_deployed_ui_shows_the_experiment_its_trial_and_the_training_log(
    kubetune: ClusterHandle, ns: str
) -> None:
    ui = ui_url(kubetune)
    experiment = builders.experiment(
        "shown",
        ns,
        objective_spec=builders.objective("score", strategies=False),
        parameters=[
            {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}}
        ],
        trial_parameters=builders.references(x="x"),
        primary_container="training",
        trial_spec=builders.trial_job(
            python_code(SCRIPT), container="training", image=PYTHON_IMAGE, backoff_limit=0
        ),
        collector=None,
        maxTrialCount=1,
        parallelTrialCount=1,
    )
    experiment["spec"]["trialTemplate"]["retain"] = True
    kubectl.apply(kubetune, experiment, check=True)
    wait_for(
        "experiment shown to succeed",
        lambda: is_true(get_json(kubetune, "experiment", "shown", "-n", ns), "Succeeded"),
        300,
        interval=1.0,
    )

    def shown() -> dict[str, Any] | None:
        page: dict[str, Any] = get(ui, object_path("/api/experiments", ns, "shown"))
        done = page["experiment"]["state"] == "Succeeded" and page["trials"]
        return page if done else None

    page = wait_for("the UI to show it", shown, 60, interval=0.5)
    (trial,) = page["trials"]
    assert trial["state"] == "Succeeded" and trial["objective"] == 0.75, trial
    assert page["best"]["trial"] == trial["name"], page["best"]

    def training_log() -> str | None:
        text = str(get(ui, object_path("/api/trials", ns, trial["name"], "logs")))
        return text if "score=0.75" in text else None

    log = wait_for("the training log", training_log, 60, interval=1.0)
    assert "training with x=" in log, log

    # The deployed UI is read-only (no proxy names a user here): a write is refused.
    request = urllib.request.Request(
        ui + "/api/experiments",
        data=json.dumps({"yaml": "kind: Experiment"}).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "X-Kubetune-UI": "1"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    refused.value.close()
    assert refused.value.code == 403
