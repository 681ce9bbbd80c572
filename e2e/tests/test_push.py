"""Push collection with Katib's SDK (kubeflow-katib from PyPI, in its own venv): a trial
reports with `report_metrics` at the SDK's default address (`katib-db-manager.kubeflow:6789`,
which the node agent forwards to db-manager's port of this cluster), kubetune's db-manager
writes the Trial, and
`KatibClient.get_trial_metrics` reads the history back, with no database anywhere.

db-manager accepts a report only from the trial's own pod. On this cluster every pod shares
the node's address, so `report_metrics` as shipped (no credentials) is refused with a message
naming the fix, and the trial reports with the pod's token sent as metadata (the SDK's own
requests); the readback sends a token of an account that may get the Trial."""

from __future__ import annotations

import pytest
import test_local_overlay as overlay
from podcode import EXISTING

from kubetune import metrichistory
from kubetune_testkit import builders, deploying, katibsdk, kubectl
from kubetune_testkit.conditions import is_true
from kubetune_testkit.deploying import ROOT
from kubetune_testkit.katibsdk import PUSHER, sdk_python
from kubetune_testkit.kubectl import get_json
from localcluster.pytest_plugin import ClusterHandle


def db_manager(cluster: ClusterHandle) -> tuple[str, str]:
    """db-manager's address for a trial pod (Katib's: the Service's name and port, which the
    node agent forwards) and for the test (the host, at the local overlay's port chosen for this
    cluster, overlays/local/patches/db-manager.yaml)."""
    port = deploying.local_port(cluster, "db-manager")
    return "katib-db-manager.kubeflow:6789", f"127.0.0.1:{port}"


@pytest.mark.skipif(
    EXISTING,
    reason="existing cluster: on kind a trial pod cannot run this host's SDK venv; "
    "the local overlay, which CI runs, does",
)
def test_sdk_pushes_metrics_and_reads_them_back(kubetune: ClusterHandle, ns: str) -> None:
    _, from_host = db_manager(kubetune)
    losses = list(katibsdk.PUSHED_LOSSES)
    trial_spec = builders.trial_job(
        [sdk_python(), str(PUSHER), "report", "default", "${trialParameters.x}", *losses],
        container="training",
        backoff_limit=0,
    )
    exp = katibsdk.one_trial_experiment("push", ns, trial_spec)  # the pod stays, for its log
    kubectl.apply(kubetune, exp, check=True)

    overlay.wait_succeeded(kubetune, ns, "push")
    (trial,) = get_json(kubetune, "trials", "-n", ns)["items"]
    assert is_true(trial, "Succeeded"), trial["status"]
    log = kubetune.kubectl(
        "logs", "-n", ns, "-l", "batch.kubernetes.io/job-name", "-c", "training", "--tail=-1"
    ).stdout
    # `report_metrics` unchanged, from an address every pod of this node shares: refused,
    # saying how to send the token; nothing of it was stored (the history holds `losses` only).
    assert "is shared by" in log and "pods (host network?)" in log, log
    assert "$KUBETUNE_DB_MANAGER_TOKEN_FILE as metadata `authorization: Bearer <token>`" in log
    (loss,) = [m for m in trial["status"]["observation"]["metrics"] if m["name"] == "loss"]
    assert (loss["min"], loss["max"], loss["latest"]) == ("0.3", "0.9", "0.3")
    stored = metrichistory.read(trial["status"])
    assert [v for _, v, _ in stored["loss"]] == losses

    rows = katibsdk.trial_metrics(kubetune, from_host, ns, trial["metadata"]["name"])
    assert [value for _, name, value in rows if name == "loss"] == losses
    assert [value for _, name, value in rows if name == "epoch"] == ["0", "1", "2", "3"]


CUSTOM = ROOT / "e2e" / "katib-sdk" / "custom_collector.py"


@pytest.mark.skipif(
    EXISTING,
    reason="existing cluster: on kind the collector pod cannot run this host's SDK venv; "
    "the local overlay, which CI runs, does",
)
def test_a_custom_collector_reports_through_db_manager(kubetune: ClusterHandle, ns: str) -> None:
    """Collector kind Custom (Katib's custom-metrics-collector example's shape): the user's
    container is injected beside the training with the metrics file's volume, reads the file
    and reports through db-manager; the Trial succeeds on that observation."""
    in_cluster, _ = db_manager(kubetune)
    script = (
        "import pathlib; print('x=${trialParameters.x}'); p = pathlib.Path('/katib/out.log'); "
        "p.write_text('loss=0.8\\nacc=0.1\\nloss=0.25\\ndone\\n')"
    )
    trial_spec = builders.trial_job(
        [sdk_python(), "-c", script], container="training", backoff_limit=0
    )
    # The pod stays, to show what was injected.
    exp = katibsdk.one_trial_experiment("custom", ns, trial_spec, collector=None)
    exp["spec"]["metricsCollectorSpec"] = {
        "source": {"fileSystemPath": {"path": "/katib/out.log", "kind": "File"}},
        "collector": {
            "kind": "Custom",
            "customCollector": {
                "name": "my-collector",
                "image": "python:3.11",
                "command": [sdk_python(), str(CUSTOM), in_cluster, "/katib/out.log", "loss"],
                "env": [
                    {
                        "name": "TrialName",
                        "valueFrom": {
                            "fieldRef": {"fieldPath": "metadata.labels['katib.kubeflow.org/trial']"}
                        },
                    }
                ],
            },
        },
    }
    kubectl.apply(kubetune, exp, check=True)

    overlay.wait_succeeded(kubetune, ns, "custom")
    (trial,) = get_json(kubetune, "trials", "-n", ns)["items"]
    (loss,) = [m for m in trial["status"]["observation"]["metrics"] if m["name"] == "loss"]
    assert (loss["min"], loss["max"], loss["latest"]) == ("0.25", "0.8", "0.25")
    assert [v for _, v, _ in metrichistory.read(trial["status"])["loss"]] == ["0.8", "0.25"]
    (pod,) = get_json(kubetune, "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name")["items"]
    assert "my-collector" in [c["name"] for c in pod["spec"]["containers"]]
