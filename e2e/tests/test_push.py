"""Push collection with Katib's SDK (kubeflow-katib from PyPI, in its own venv): a trial
reports with `report_metrics`, kubetune's db-manager writes the Trial, and
`KatibClient.get_trial_metrics` reads the history back, with no database anywhere."""

from __future__ import annotations

import json
import subprocess

import pytest
from katib_sdk import sdk_python
from podcode import EXISTING

from kubetune import metrichistory
from kubetune_testkit import builders, kubectl
from kubetune_testkit.conditions import is_true
from kubetune_testkit.deploying import ROOT
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

PUSHER = ROOT / "e2e" / "katib-sdk" / "push_and_read.py"
# The local overlay's db-manager port (kustomize/overlays/local/patches/db-manager.yaml): the
# trial pod dials it by the Service's name, the test from the host.
IN_CLUSTER = "katib-db-manager.kubeflow:26789"
FROM_HOST = "127.0.0.1:26789"


@pytest.mark.skipif(EXISTING, reason="the trial runs the SDK's venv of this host")
def test_sdk_pushes_metrics_and_reads_them_back(kubetune: ClusterHandle, ns: str) -> None:
    losses = ["0.9", "0.5", "0.7", "0.3"]
    exp = builders.experiment(
        "push",
        ns,
        objective_spec=builders.objective("loss", "minimize", strategies=False),
        parameters=[builders.categorical("x", ["a"])],
        trial_parameters=builders.references(x="x"),
        primary_container="training",
        trial_spec=builders.trial_job(
            [sdk_python(), str(PUSHER), "report", IN_CLUSTER, "${trialParameters.x}", *losses],
            container="training",
            backoff_limit=0,
        ),
        collector="Push",
        maxTrialCount=1,
        parallelTrialCount=1,
    )
    kubectl.apply(kubetune, exp, check=True)

    def done() -> dict[str, object] | None:
        got = get_json(kubetune, "experiment", "push", "-n", ns)
        if is_true(got, "Failed"):
            raise AssertionError(json.dumps(got.get("status")))
        return got if is_true(got, "Succeeded") else None

    wait_for("the push experiment to succeed", done, 300, interval=1.0)
    (trial,) = get_json(kubetune, "trials", "-n", ns)["items"]
    assert is_true(trial, "Succeeded"), trial["status"]
    (loss,) = [m for m in trial["status"]["observation"]["metrics"] if m["name"] == "loss"]
    assert (loss["min"], loss["max"], loss["latest"]) == ("0.3", "0.9", "0.3")
    stored = metrichistory.read(trial["status"])
    assert [v for _, v, _ in stored["loss"]] == losses

    out = subprocess.run(
        [sdk_python(), str(PUSHER), "read", FROM_HOST, ns, trial["metadata"]["name"]],
        capture_output=True,
        text=True,
        timeout=120,
        env={"KUBECONFIG": str(kubetune.kubeconfig), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-4000:]
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    assert [value for _, name, value in rows if name == "loss"] == losses
    assert [value for _, name, value in rows if name == "epoch"] == ["0", "1", "2", "3"]
