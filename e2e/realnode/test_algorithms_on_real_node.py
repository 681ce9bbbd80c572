"""The algorithm service on the real node: a FromVolume study that survives its pod's deletion,
whose hostPath directory is removed from the node when the Experiment goes, and medianstop
early stopping.

The FromVolume directory lives on the node's filesystem, which is this host's: the test looks
at it directly, as an admin of the node would. The suggestion-controller runs in a container
that never mounts it, so only the cleanup Pod it starts on the node can remove it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TRAINER
from running import describe, run, trials_of, wait_succeeded

from kubetune_testkit import kubectl, trialkinds
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

Obj = dict[str, Any]
HOST_PREFIX = "/tmp/katib/suggestions/"
"""Where FromVolume directories go on the node (katib-config's hostPath prefix)."""
HOSTPATH_VOLUME: Obj = {
    "accessModes": ["ReadWriteOnce"],
    "capacity": {"storage": "1Gi"},
    "hostPath": {"path": HOST_PREFIX, "type": "DirectoryOrCreate"},
}
"""A one-node cluster with no volume provisioner: the tpe algorithm's study on a hostPath PV
(katib-config's `persistentVolumeSpec`, its path a prefix kubetune adds the PV's name to).
TPE, because random keeps no study (each point comes from its index)."""


@pytest.fixture(scope="module")
def hostpath_volumes(kubetune: ClusterHandle) -> ClusterHandle:
    """katib-config gives the tpe algorithm a hostPath PV, as an admin of a cluster with no
    provisioner would, and the suggestion-controller restarts to read it (it only matters to
    FromVolume Experiments)."""
    cm = get_json(kubetune, "configmap", "katib-config", "-n", "kubeflow")
    config = yaml.safe_load(cm["data"]["katib-config.yaml"])
    (entry,) = [s for s in config["runtime"]["suggestions"] if s["algorithmName"] == "tpe"]
    entry["persistentVolumeSpec"] = HOSTPATH_VOLUME
    patch = {"data": {"katib-config.yaml": yaml.safe_dump(config, sort_keys=False)}}
    kubetune.kubectl(
        "patch", "configmap", "katib-config", "-n", "kubeflow", "--type=merge",
        "-p", json.dumps(patch),
    )  # fmt: skip
    deployment = "deployment/kubetune-suggestion-controller"
    kubetune.kubectl("rollout", "restart", "-n", "kubeflow", deployment)
    kubetune.kubectl("rollout", "status", "-n", "kubeflow", deployment, "--timeout=300s")
    return kubetune


def algorithm_pods(cluster: ClusterHandle, ns: str, deployment: str) -> list[str]:
    """The names of the algorithm Deployment's pods that are not being deleted."""
    pods = get_json(cluster, "pods", "-n", ns, "-l", "katib.kubeflow.org/suggestion")["items"]
    return [
        p["metadata"]["name"]
        for p in pods
        if p["metadata"]["name"].startswith(f"{deployment}-")
        and not p["metadata"].get("deletionTimestamp")
    ]


def test_from_volume_study_survives_its_pod_and_its_directory_leaves_the_node(
    hostpath_volumes: ClusterHandle, ns: str
) -> None:
    cluster = hostpath_volumes
    exp = trialkinds.score_experiment(TRAINER, ns, "fromvol", "FromVolume", max_trials=4)
    exp["spec"]["algorithm"]["algorithmName"] = "tpe"
    # One trial at a time, each a few seconds: the pod is deleted while trials remain.
    exp["spec"]["parallelTrialCount"] = 1
    slow = "import time; time.sleep(4)\n" + trialkinds.SCORE_SCRIPT
    pod = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    pod["containers"][0]["command"] = TRAINER.code(slow)
    exp["spec"]["trialTemplate"]["retain"] = True
    kubectl.apply(cluster, exp, check=True)
    deployment = "fromvol-tpe"

    def first_trial_and_pod() -> list[str] | None:
        status = get_json(cluster, "experiment", "fromvol", "-n", ns).get("status") or {}
        pods = algorithm_pods(cluster, ns, deployment)
        return pods if (status.get("trials") or 0) >= 1 and len(pods) == 1 else None

    try:
        (first,) = wait_for("the first trial", first_trial_and_pod, 300, interval=1.0)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{describe(cluster, ns)}") from None
    pvc = get_json(cluster, "pvc", deployment, "-n", ns)
    pv = get_json(cluster, "pv", pvc["spec"]["volumeName"])
    directory = Path(pv["spec"]["hostPath"]["path"])
    assert directory.parent == Path(HOST_PREFIX), directory
    cluster.kubectl("delete", "pod", "-n", ns, first, "--wait=false")
    replaced = wait_for(
        "the algorithm's new pod",
        lambda: [p for p in algorithm_pods(cluster, ns, deployment) if p != first],
        180,
        interval=1.0,
    )
    assert first not in replaced
    done = wait_succeeded(cluster, "fromvol", ns, timeout=420)
    assert (done["status"]["trials"], done["status"]["trialsSucceeded"]) == (4, 4)
    xs = [t["spec"]["parameterAssignments"][0]["value"] for t in trials_of(cluster, ns, "fromvol")]
    # Four distinct points, and the study the new pod continued is on the node's directory
    # (before the fix the directory stayed empty: the algorithm had fallen back to a temporary
    # one, and the points alone did not show it).
    assert len(set(xs)) == 4, xs
    assert directory.is_dir() and any(directory.iterdir()), f"no study in {directory}"

    cluster.kubectl("delete", "experiment", "fromvol", "-n", ns, "--wait=false")
    wait_for(
        "the PV to go",
        lambda: cluster.kubectl("get", "pv", pv["metadata"]["name"], check=False).returncode,
        180,
        interval=1.0,
    )
    assert not directory.exists(), f"{directory} is still on the node"


def test_medianstop_stops_the_bad_trials(kubetune: ClusterHandle, ns: str) -> None:
    done = run(kubetune, trialkinds.medianstop_experiment(TRAINER, ns, "medianstop"), 420)
    trials = trials_of(kubetune, ns, "medianstop")
    try:
        trialkinds.check_medianstop(kubetune, ns, done, trials, max_trials=8)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{describe(kubetune, ns)}") from None
