"""Push collection with Katib's SDK on the real node: the trial pod calls `report_metrics` as
shipped (no credentials) at its default address, `katib-db-manager.kubeflow:6789`, through
cluster DNS and the Service; db-manager knows the pod by the connection's address (each pod
has its own here, unlike on the node agent, where e2e/tests/test_push.py sends the pod's
token), the Trial succeeds on the pushed metrics, and `KatibClient.get_trial_metrics` reads
the history back through the Service (a port-forward: the API server's proxy carries no gRPC).

The trial runs e2e/katib-sdk/push_and_read.py in the example trainer image (which has the
SDK); the readback runs it in the SDK's own venv on this host (kubetune_testkit.katibsdk).
"""

from __future__ import annotations

import pytest
import running
from conftest import TRAINER, TRAINER_IMAGE

from kubetune import metrichistory
from kubetune_testkit import builders, katibsdk, kubectl
from kubetune_testkit.conditions import is_true
from kubetune_testkit.katibsdk import PUSHER
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration


def test_the_sdk_pushes_from_its_pod_and_reads_back_through_the_service(
    kubetune: ClusterHandle, ns: str
) -> None:
    losses = list(katibsdk.PUSHED_LOSSES)
    code = TRAINER.code(
        PUSHER.read_text(), "report-as-pod", "default", "${trialParameters.x}", *losses
    )
    trial_spec = builders.trial_job(
        code, container="training", image=TRAINER_IMAGE, backoff_limit=0
    )
    # The pod stays, for its address and log.
    exp = katibsdk.one_trial_experiment("push", ns, trial_spec)
    running.run(kubetune, exp)

    (trial,) = running.trials_of(kubetune, ns, "push")
    assert is_true(trial, "Succeeded"), trial["status"]
    (pod,) = running.pods_of(kubetune, ns, "batch.kubernetes.io/job-name")
    # The address db-manager saw is the pod's own, not the node's.
    assert not pod["spec"].get("hostNetwork"), pod["spec"]
    assert pod["status"]["podIP"] != pod["status"]["hostIP"], pod["status"]
    log = kubetune.kubectl("logs", "-n", ns, pod["metadata"]["name"], "-c", "training").stdout
    assert [line for line in log.splitlines() if line.startswith("reported")] == [
        f"reported loss={loss}" for loss in losses
    ], log
    (loss,) = [m for m in trial["status"]["observation"]["metrics"] if m["name"] == "loss"]
    assert (loss["min"], loss["max"], loss["latest"]) == ("0.3", "0.9", "0.3")
    assert [v for _, v, _ in metrichistory.read(trial["status"])["loss"]] == losses

    # From the test, through the Service: the port-forward's connections come from inside
    # db-manager's pod, which proves no caller (katibsdk.trial_metrics sends a token).
    with kubectl.port_forward(kubetune, "kubeflow", "service/katib-db-manager", 6789) as where:
        rows = katibsdk.trial_metrics(kubetune, where, ns, trial["metadata"]["name"])
    assert [value for _, name, value in rows if name == "loss"] == losses
    assert [value for _, name, value in rows if name == "epoch"] == ["0", "1", "2", "3"]
