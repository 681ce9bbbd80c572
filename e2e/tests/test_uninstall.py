"""`kubetune uninstall` against the deployed local overlay: both modes leave nothing stuck.

Each test deploys the overlay again first (the previous test uninstalled it), runs a FromVolume
Experiment to the end (its Suggestion then holds kubetune's finalizer and a hostPath PV), and
runs the command as a user would, through the CLI's `main`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_local_overlay as overlay
from kubetune_cli.main import main

from kubetune_testkit import deploying
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

FINALIZER = "kubetune.kubeflow.org/suggestion-volume"
PART_OF = "app.kubernetes.io/part-of=kubetune"
KUBETUNE_KINDS = (
    "deployments,services,configmaps,secrets,serviceaccounts,roles,rolebindings,"
    "poddisruptionbudgets,networkpolicies"
)
CLUSTER_KINDS = (
    "clusterroles,clusterrolebindings,mutatingwebhookconfigurations,"
    "validatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings"
)


@pytest.fixture
def deployed(kubetune: ClusterHandle) -> Iterator[ClusterHandle]:
    """kubetune deployed and serving; deployed again afterwards for the modules after this."""
    overlay._skip_on_shared_cluster()
    deploying.apply_overlay(kubetune)
    deploying.wait_available(kubetune)
    yield kubetune
    deploying.apply_overlay(kubetune)
    deploying.wait_available(kubetune)


def _names(cluster: ClusterHandle, kinds: str, *args: str) -> list[str]:
    out = cluster.kubectl("get", kinds, *args, "-o", "name", "--ignore-not-found")
    return [line for line in out.stdout.split() if line]


def _finished_from_volume(cluster: ClusterHandle, namespace: str, name: str) -> str:
    """Run a FromVolume Experiment to the end; returns its PV's name (the finalizer is on)."""
    overlay._run_experiment(cluster, namespace, overlay._experiment(name, namespace, "FromVolume"))
    suggestion = get_json(cluster, "suggestion", "-n", namespace, name)
    assert FINALIZER in suggestion["metadata"]["finalizers"]
    pvcs = get_json(cluster, "pvc", "-n", namespace)["items"]
    assert len(pvcs) == 1
    return str(pvcs[0]["spec"]["volumeName"])


def _uninstall(cluster: ClusterHandle, *flags: str) -> int:
    return main(["--kubeconfig", cluster.kubeconfig, "uninstall", "--timeout", "180", *flags])


def _kubetune_left(cluster: ClusterHandle) -> list[str]:
    namespaced = _names(cluster, KUBETUNE_KINDS, "-A", "-l", PART_OF)
    leases = [n for n in _names(cluster, "leases", "-n", "kubeflow") if "kubetune-" in n]
    return namespaced + _names(cluster, CLUSTER_KINDS, "-l", PART_OF) + leases


def _no_finalizer_anywhere(cluster: ClusterHandle) -> list[str]:
    suggestions = get_json(cluster, "suggestions", "-A")["items"]
    return [
        f"{s['metadata']['namespace']}/{s['metadata']['name']}"
        for s in suggestions
        if FINALIZER in (s["metadata"].get("finalizers") or [])
    ]


def test_keep_experiments_leaves_them_free_of_kubetune(deployed: ClusterHandle, ns: str) -> None:
    """Experiments and Trials stay with their volume, no Suggestion keeps the finalizer,
    kubetune is gone, and deleting the Experiment afterwards (no controller runs) completes."""
    cluster = deployed
    pv = _finished_from_volume(cluster, ns, "kept")
    trials = _names(cluster, "trials", "-n", ns)
    assert _uninstall(cluster, "--dry-run") == 0
    assert _kubetune_left(cluster), "the dry run changed something"

    assert _uninstall(cluster, "--keep-experiments") == 0

    assert _no_finalizer_anywhere(cluster) == []
    assert _names(cluster, "experiments", "-n", ns) == ["experiment.kubeflow.org/kept"]
    assert _names(cluster, "trials", "-n", ns) == trials and trials
    assert _names(cluster, "crd", "-l", PART_OF)
    assert _kubetune_left(cluster) == []
    assert _uninstall(cluster) == 0, "a second run is not a no-op"
    kept = get_json(cluster, "pv", pv)
    assert kept["status"]["phase"] == "Bound", "the Experiment's volume did not stay"
    assert Path(kept["spec"]["hostPath"]["path"]).is_dir(), "the kept volume's data is gone"

    cluster.kubectl("delete", "experiment", "-n", ns, "kept", "--wait=false")
    wait_for(
        "the Experiment, its Suggestion and Trials to go",
        lambda: not _names(cluster, "experiments,suggestions,trials", "-n", ns),
        timeout=120,
        interval=1,
    )
    # Without kubetune the PV follows its reclaim policy (Delete) once its PVC went with the
    # Experiment: this cluster's controller-manager deletes hostPath volumes; elsewhere it is
    # left Released or Failed, for `kubectl delete pv`.
    cluster.kubectl("delete", "pv", pv, "--ignore-not-found", "--wait=false")


def test_delete_experiments_removes_them_with_their_volumes_then_kubetune(
    deployed: ClusterHandle, ns: str
) -> None:
    """Experiments go with their Suggestions, Trials, jobs, PVCs and PVs, then kubetune, then
    (asked for) the CRDs; nothing is left holding a finalizer."""
    cluster = deployed
    pv = _finished_from_volume(cluster, ns, "deleted")
    host_dir = Path(get_json(cluster, "pv", pv)["spec"]["hostPath"]["path"])

    assert _uninstall(cluster, "--delete-experiments", "--delete-crds") == 0

    assert _names(cluster, "pv", pv) == []
    assert not host_dir.exists(), "the hostPath data is left behind"
    assert _names(cluster, "jobs,pvc", "-n", ns) == []
    assert _kubetune_left(cluster) == []
    assert _names(cluster, "crd", "-l", PART_OF) == []


def test_delete_crds_is_refused_beside_katib_and_without_deleting_experiments(
    deployed: ClusterHandle, ns: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CRDs are Katib's too: refused while a katib-controller Deployment exists (a
    stand-in with no replicas), and refused alone (it would delete the kept Experiments)."""
    cluster = deployed
    katib = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "katib-controller", "namespace": ns},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "katib-controller"}},
            "template": {
                "metadata": {"labels": {"app": "katib-controller"}},
                "spec": {"containers": [{"name": "c", "image": "example.com/katib-controller"}]},
            },
        },
    }
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(katib))
    capsys.readouterr()
    assert _uninstall(cluster, "--delete-experiments", "--delete-crds") == 1
    assert f"Deployment {ns}/katib-controller" in capsys.readouterr().err
    assert _uninstall(cluster, "--delete-crds") == 1
    assert "pass --delete-experiments too" in capsys.readouterr().err
    assert _names(cluster, "deployments", "-n", "kubeflow", "-l", PART_OF), "it went ahead"
