"""Upstream Katib v0.19.0 on the local control plane: its binaries, manifests and PostgreSQL.

`localcluster build-katib` builds the binaries (cached); `katibinstall.running` starts a
cluster of its own whose node agent maps Katib's images to them, installs Katib from its
`katib-standalone-postgres` manifests and waits for the cert-generator's caBundle. One random
search with a batch Job trial and the StdOut collector then runs to Succeeded under real Katib:
its controller, webhook (the injected collector), goptuna suggestion, db-manager and PostgreSQL.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster import build, gotool, katib, katibinstall
from localcluster import cluster as lc

pytestmark = pytest.mark.integration
Obj = dict[str, Any]
NAMESPACE = "katib-e2e"


@pytest.fixture(scope="module")
def katib_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lc.State]:
    if not build.have_binaries():
        pytest.fail("control-plane binaries are not built: run `localcluster build`")
    with katibinstall.running(tmp_path_factory.mktemp("katib") / "cluster") as (state, _):
        yield state


def _kubectl(state: lc.State, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        [state.kubectl, "--kubeconfig", state.kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def experiment(name: str, trials: int) -> Obj:
    """Random search over one double; each trial a Job printing `loss=<lr>` on stdout."""
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random"},
            "parallelTrialCount": 2,
            "maxTrialCount": trials,
            "maxFailedTrialCount": 1,
            "metricsCollectorSpec": {"collector": {"kind": "StdOut"}},
            "parameters": [
                {
                    "name": "lr",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "0.01", "max": "0.1"},
                }
            ],
            "trialTemplate": {
                "primaryContainerName": "training",
                "trialParameters": [{"name": "lr", "reference": "lr"}],
                "trialSpec": {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {
                                        "name": "training",
                                        "image": "busybox",
                                        # Katib's StdOut collector joins the command with
                                        # spaces into `sh -c`; the sidecar must find it alive.
                                        "command": [
                                            "sleep",
                                            "2",
                                            "&&",
                                            "echo",
                                            "loss=${trialParameters.lr}",
                                        ],
                                    }
                                ],
                            }
                        }
                    },
                },
            },
        },
    }


def _condition(obj: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def test_katib_runs_a_random_experiment_to_succeeded(katib_cluster: lc.State) -> None:
    state = katib_cluster
    config = yaml.safe_load(
        _kubectl(state, "get", "configmap", "-n", "kubeflow", "katib-config", "-o", "json")
    )
    assert katibinstall.GOPTUNA_IMAGE in config["data"]["katib-config.yaml"]
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": NAMESPACE,
            "labels": {"katib.kubeflow.org/metrics-collector-injection": "enabled"},
        },
    }
    _kubectl(state, "apply", "-f", "-", stdin=json.dumps(namespace))
    _kubectl(state, "create", "-f", "-", stdin=json.dumps(experiment("random", 3)))
    deadline = time.monotonic() + 240
    exp: Obj = {}
    while time.monotonic() < deadline:
        exp = json.loads(
            _kubectl(state, "get", "experiment", "-n", NAMESPACE, "random", "-o", "json")
        )
        if _condition(exp, "Succeeded") or _condition(exp, "Failed"):
            break
        time.sleep(1)
    pods = _kubectl(state, "get", "pods", "-A", "-o", "wide")
    assert _condition(exp, "Succeeded"), f"{json.dumps(exp.get('status'), indent=1)}\n{pods}"
    status = exp["status"]
    assert status["trialsSucceeded"] == 3
    optimal = status["currentOptimalTrial"]["observation"]["metrics"]
    assert [m["name"] for m in optimal] == ["loss"]
    assert 0.01 <= float(optimal[0]["min"]) <= 0.1
    trials = json.loads(_kubectl(state, "get", "trials", "-n", NAMESPACE, "-o", "json"))["items"]
    assert len(trials) == 3
    for trial in trials:
        # Katib's own collector sidecar (injected by its webhook) sent the log to db-manager,
        # which stored it in PostgreSQL; the trial controller read it back from there.
        metrics = trial["status"]["observation"]["metrics"]
        assert [m["name"] for m in metrics] == ["loss"], trial["status"]


def test_build_is_stamped_and_pinned() -> None:
    go = gotool.go_version(gotool.find_go())
    assert katib.is_built(go)
    assert all(katib.binary(n).exists() for n in katib.BINARIES)
    assert (katib.install_dir() / "kustomization.yaml").exists()
    assert Path(katib.work_dir() / katib.STAMP).exists()
