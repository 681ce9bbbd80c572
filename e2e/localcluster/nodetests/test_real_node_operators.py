"""The real training-operator and Argo Workflows on the real node (``localcluster
install-operators``): their pods, from images made here of the binaries ``build-operators``
makes, run through the kubelet and containerd; a TFJob's and a PyTorchJob's replicas see the
environment the operator sets and succeed; an Argo Workflow whose sidecar never exits
succeeds once Argo stops the sidecar. Needs root, ``build-node`` and ``build-operators``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nodehelpers import NEEDS_ROOT, apply, kubectl, up_when_free, wait_for

from localcluster import cluster, node, nodebuild, nodeoperators, operators

pytestmark = NEEDS_ROOT

IMAGE = nodeoperators.POD_TOOLS_IMAGE
NS = "default"
# Jobs start pods, pods start in about a second; the slack is for a loaded machine.
JOB_WAIT = 240.0


@pytest.fixture(scope="module")
def operator_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.State]:
    missing = nodebuild.binaries().missing()
    if missing:
        pytest.fail(f"node binaries missing ({missing}): run `localcluster build-node`")
    unbuilt = [op.name for op in operators.OPERATORS.values() if not operators.is_built(op)]
    if unbuilt:
        pytest.fail(f"operators not built ({unbuilt}): run `localcluster build-operators`")
    state_dir = tmp_path_factory.mktemp("operator-node")
    state = up_when_free(state_dir)
    try:
        # Through the command users run.
        installed = subprocess.run(
            [sys.executable, "-m", "localcluster", "--state-dir", str(state_dir),
             "install-operators"],
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
        )  # fmt: skip
        assert installed.returncode == 0, installed.stderr
        print(installed.stdout)
        yield state
    finally:
        cluster.down(state_dir, quiet=True)


def job_condition(state: cluster.State, kind: str, name: str) -> str:
    """The type of the job's last True condition ("" before it has one)."""
    out = kubectl(state, "-n", NS, "get", kind, name, "-o", "json", check=False)
    conds = json.loads(out).get("status", {}).get("conditions") or [] if out else []
    true = [c["type"] for c in conds if c["status"] == "True"]
    return true[-1] if true else ""


def logs(state: cluster.State, pod: str, container: str) -> str:
    return kubectl(state, "-n", NS, "logs", pod, "-c", container)


def replica(container: str, script: str) -> dict[str, Any]:
    return {
        "replicas": 1,
        "restartPolicy": "Never",
        "template": {
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": container,
                        "image": IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", script],
                    }
                ],
            }
        },
    }


def training_job(kind: str, name: str, replicas: dict[str, Any]) -> dict[str, Any]:
    """A TFJob or PyTorchJob whose pods stay after it ends, for their logs."""
    specs = "tfReplicaSpecs" if kind == "TFJob" else "pytorchReplicaSpecs"
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": {"runPolicy": {"cleanPodPolicy": "None"}, specs: replicas},
    }


def wait_finished(state: cluster.State, kind: str, name: str) -> str:
    """The job's final condition, once it has one."""
    wait_for(
        f"the {kind} {name} finished",
        lambda: job_condition(state, kind, name) in ("Succeeded", "Failed"),
        JOB_WAIT,
    )
    return job_condition(state, kind, name)


def test_a_tfjob_s_workers_see_tf_config_and_succeed(operator_node: cluster.State) -> None:
    worker = replica("tensorflow", 'echo "TF_CONFIG=$TF_CONFIG"')
    worker["replicas"] = 2
    apply(operator_node, training_job("TFJob", "tf", {"Worker": worker}))
    assert wait_finished(operator_node, "tfjob", "tf") == "Succeeded"
    hosts = [f"tf-worker-{i}.{NS}.svc:2222" for i in range(2)]
    for index in range(2):
        line = logs(operator_node, f"tf-worker-{index}", "tensorflow").strip()
        config = json.loads(line.removeprefix("TF_CONFIG="))
        assert config["cluster"] == {"worker": hosts}
        assert config["task"] == {"type": "worker", "index": index}


def test_a_pytorchjob_s_worker_reaches_its_master_and_both_succeed(
    operator_node: cluster.State,
) -> None:
    show = (
        'echo "MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT WORLD_SIZE=$WORLD_SIZE RANK=$RANK"'
    )
    # The worker greets the master at MASTER_ADDR:MASTER_PORT (the operator's Service for
    # the master, resolved by cluster DNS): the rendezvous a real job does first.
    master = replica("pytorch", f"{show}; nc -l -p $MASTER_PORT")
    worker = replica(
        "pytorch",
        f"{show}; until echo greeting-from-rank-$RANK | nc $MASTER_ADDR $MASTER_PORT; "
        "do sleep 1; done",
    )
    job = training_job("PyTorchJob", "pt", {"Master": master, "Worker": worker})
    apply(operator_node, job)
    assert wait_finished(operator_node, "pytorchjob", "pt") == "Succeeded"
    master_log = logs(operator_node, "pt-master-0", "pytorch")
    assert "MASTER_ADDR=pt-master-0 MASTER_PORT=23456 WORLD_SIZE=2 RANK=0" in master_log
    assert "greeting-from-rank-1" in master_log
    worker_log = logs(operator_node, "pt-worker-0", "pytorch")
    assert "MASTER_ADDR=pt-master-0 MASTER_PORT=23456 WORLD_SIZE=2 RANK=1" in worker_log


def test_an_argo_workflow_with_a_sidecar_that_never_exits_succeeds(
    operator_node: cluster.State,
) -> None:
    nodeoperators.grant_argo_executor(operator_node.kubectl, operator_node.kubeconfig, NS)
    workflow = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "with-sidecar", "namespace": NS},
        "spec": {
            "entrypoint": "main",
            "templates": [
                {
                    "name": "main",
                    "container": {
                        "image": IMAGE,
                        "command": ["sh", "-c", "echo main-done"],
                    },
                    "sidecars": [
                        {
                            "name": "forever",
                            "image": IMAGE,
                            "command": ["sh", "-c", "while true; do sleep 1; done"],
                        }
                    ],
                }
            ],
        },
    }
    apply(operator_node, workflow)

    def phase() -> str:
        out = kubectl(operator_node, "-n", NS, "get", "workflow", "with-sidecar", "-o", "json")
        return str(json.loads(out).get("status", {}).get("phase", ""))

    wait_for("the Workflow finished", lambda: phase() in ("Succeeded", "Failed", "Error"), JOB_WAIT)
    assert phase() == "Succeeded"
    selector = "workflows.argoproj.io/workflow=with-sidecar"
    pods = kubectl(operator_node, "-n", NS, "get", "pod", "-l", selector, "-o", "json")
    pod = json.loads(pods)["items"][0]
    assert "main-done" in logs(operator_node, pod["metadata"]["name"], "main")
    states = {c["name"]: c["state"] for c in pod["status"]["containerStatuses"]}
    assert "terminated" in states["forever"], "Argo did not stop the sidecar"


def test_down_after_the_operators_leaves_nothing_behind(operator_node: cluster.State) -> None:
    """Argo's killed sidecar, the operators' Services and their pods' volumes go too."""
    assert cluster.down(Path(operator_node.state_dir), quiet=True)
    assert node.leftovers(operator_node.node_dir / "containerd-root", operator_node.sysctls) == []
