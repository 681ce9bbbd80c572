"""Upstream Katib v0.19.0 runs an Experiment halfway; kubetune takes the cluster over in place.

A local cluster of its own with real Katib (`localcluster.katibinstall`: its controller,
webhook, goptuna suggestion, db-manager and PostgreSQL from Debian), whose node agent also
runs kubetune's images. Katib runs a random search of 4 Trials, 2 at a time: the first two
Trials finish, the next two wait on a file the test holds back, so at the cut two are
Succeeded and two Running (with Katib's collector sidecar). Then the documented procedure:
Katib's controller, webhooks and db-manager are removed (its CRs and PostgreSQL stay),
kubetune's local overlay is applied, `kubetune katib-check` passes and releases Katib's
finalizers, the two Running Trials are reported and deleted (kubetune cannot collect Katib's
sidecar), `kubetune import-katib` copies Katib's metric logs, and the Experiment finishes
under kubetune.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubetune_cli.main import main as cli

from kubetune import metrichistory
from kubetune.kube import DEPLOYMENTS, EVENTS, EXPERIMENTS, JOBS, SECRETS, TRIALS, Kube, connect
from kubetune_testkit import deploying
from kubetune_testkit.waiting import wait_for
from localcluster import katibinstall
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration
NAMESPACE = "katib-takeover"
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def katib_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    """Katib installed on a cluster of its own; its node agent knows kubetune's images too."""
    kubetune_images = yaml.safe_load(deploying.render_image_map())["images"]
    state_dir = tmp_path_factory.mktemp("katib-takeover") / "cluster"
    with katibinstall.running(state_dir, extra_image_map=kubetune_images) as (state, _):
        yield ClusterHandle(state.kubeconfig, state.kubectl, state.server, state)


def _experiment(gate: Path) -> Obj:
    """Random search; the first two Trials to claim a ticket finish at once, the others wait
    for `gate/release`. Each prints `loss=<lr>` (Katib's StdOut collector joins the command
    into one `sh -c` line)."""
    line = (
        # Katib's sidecar must find the training process alive: never end at once.
        f"sleep 3; if mkdir {gate}/a 2>/dev/null || mkdir {gate}/b 2>/dev/null; then true; "
        f"else while [ ! -e {gate}/release ]; do sleep 1; done; fi; "
        "echo loss=${trialParameters.lr}"
    )
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": "mnist", "namespace": NAMESPACE},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random"},
            "parallelTrialCount": 2,
            "maxTrialCount": 4,
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
                "retain": True,
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
                                        "command": ["sh", "-c", line],
                                    }
                                ],
                            }
                        }
                    },
                },
            },
        },
    }


def _true(obj: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _trials(kube: Kube) -> dict[str, Obj]:
    return {t["metadata"]["name"]: t for t in kube.list_all(TRIALS, NAMESPACE)}


def _cli(cluster: ClusterHandle, *args: str) -> int:
    return cli(["--kubeconfig", cluster.kubeconfig, "-n", NAMESPACE, *args])


def _remove_katib(cluster: ClusterHandle) -> None:
    """Katib's controller, webhooks and db-manager; its CRs and PostgreSQL stay."""
    cluster.kubectl("delete", "mutatingwebhookconfiguration", "katib.kubeflow.org")
    cluster.kubectl("delete", "validatingwebhookconfiguration", "katib.kubeflow.org")
    cluster.kubectl(
        "-n", "kubeflow", "delete", "deployment", "katib-controller", "katib-db-manager"
    )
    cluster.kubectl("-n", "kubeflow", "delete", "service", "katib-controller", "katib-db-manager")
    for name in ("katib-controller", "katib-db-manager"):
        cluster.kubectl(
            "-n", "kubeflow", "wait", "--for=delete", "pod", "-l",
            f"katib.kubeflow.org/component={name.removeprefix('katib-')}", "--timeout=120s",
            check=False,
        )  # fmt: skip


def _postgres_url(kube: Kube) -> str:
    """Katib's PostgreSQL as its db-manager reaches it (pods share the host network)."""
    secret = kube.get(SECRETS, "katib-postgres-secrets", "kubeflow")
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    os.environ["KUBETUNE_KATIB_DB_PASSWORD"] = data["POSTGRES_PASSWORD"]
    deployment = kube.get(DEPLOYMENTS, "katib-postgres", "kubeflow")
    env = {
        e["name"]: e.get("value")
        for e in deployment["spec"]["template"]["spec"]["containers"][0].get("env") or []
    }
    port = env.get("PGPORT") or "5432"
    return f"postgres://{data['POSTGRES_USER']}@127.0.0.1:{port}/{data['POSTGRES_DB']}"


def test_katib_halfway_then_kubetune_finishes_it(
    katib_cluster: ClusterHandle, tmp_path: Path
) -> None:
    cluster = katib_cluster
    kube = Kube(connect(cluster.kubeconfig))
    gate = tmp_path / "gate"
    gate.mkdir()
    gate.chmod(0o777)
    cluster.kubectl("create", "namespace", NAMESPACE)
    deploying.enable_injection(cluster, NAMESPACE)
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(_experiment(gate)))

    # Katib, halfway: two Succeeded (their loss in PostgreSQL), two Running.
    def halfway() -> dict[str, Obj] | None:
        trials = _trials(kube)
        done = [t for t in trials.values() if _true(t, "Succeeded")]
        running = [t for t in trials.values() if _true(t, "Running")]
        return trials if len(done) == 2 and len(running) == 2 else None

    katib_trials = wait_for("Katib halfway: 2 Succeeded, 2 Running", halfway, 240)
    succeeded = sorted(n for n, t in katib_trials.items() if _true(t, "Succeeded"))
    running = sorted(n for n, t in katib_trials.items() if _true(t, "Running"))
    katib_observations = {n: katib_trials[n]["status"]["observation"] for n in succeeded}

    _remove_katib(cluster)
    deploying.apply_overlay(cluster)
    deploying.wait_available(cluster)

    assert _cli(cluster, "katib-check") == 0
    assert _cli(cluster, "katib-check", "--release-finalizers") == 0
    # Katib's Running Trials carry its sidecar: reported by name on the Experiment.
    wait_for(
        "both Katib-run Trials reported",
        lambda: (
            {
                e["message"].split()[1]
                for e in kube.list_all(EVENTS, NAMESPACE, field_selector="reason=KatibCollectorPod")
                if e["involvedObject"]["kind"] == "Experiment"
            }
            >= set(running)
        ),
        120,
    )
    assert _cli(cluster, "import-katib", "mnist", "--db-url", _postgres_url(kube)) == 0
    for name in running:  # what the Event says to do
        kube.delete(TRIALS, name, NAMESPACE)
    (gate / "release").touch()

    def finished() -> Obj | None:
        exp = kube.get(EXPERIMENTS, "mnist", NAMESPACE)
        return exp if _true(exp, "Succeeded") or _true(exp, "Failed") else None

    experiment = wait_for("the Experiment finished under kubetune", finished, 300)
    assert _true(experiment, "Succeeded"), experiment["status"]
    trials = _trials(kube)
    status = experiment["status"]
    assert (status["trials"], status["trialsSucceeded"]) == (4, 4), status
    assert set(succeeded) <= set(trials)  # Katib's names kept
    for name in succeeded:  # not run again: no new Job, the same result
        assert trials[name]["status"]["observation"] == katib_observations[name]
        job = kube.get(JOBS, name, NAMESPACE)
        assert job["metadata"]["ownerReferences"][0]["uid"] == trials[name]["metadata"]["uid"]
        history = metrichistory.read(trials[name]["status"])
        assert [v for _, v, _ in history["loss"]] == [
            katib_observations[name]["metrics"][0]["latest"]
        ]  # imported from Katib's PostgreSQL
    best = min(
        trials.values(),
        key=lambda t: float(t["status"]["observation"]["metrics"][0]["latest"]),
    )
    assert status["currentOptimalTrial"]["bestTrialName"] == best["metadata"]["name"]
