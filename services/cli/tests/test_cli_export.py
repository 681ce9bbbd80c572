"""`kubetune export` and the warm-start line of `kubetune get`, against a real API server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubetune_cli import main

from kubetune import knownresults
from kubetune.kube import CONFIGMAPS, EXPERIMENTS, TRIALS, Kube
from kubetune_testkit import builders
from kubetune_testkit.standins.services import trial_status
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration


def _cli(cluster: ClusterHandle, namespace: str, *args: str) -> list[str]:
    return ["--kubeconfig", cluster.kubeconfig, "-n", namespace, *args]


def test_export_writes_the_succeeded_trials_to_a_config_map_and_a_file(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kube.create(EXPERIMENTS, builders.experiment("old", namespace), namespace)
    for name, lr, accuracy in [("old-a", "0.01", 0.5), ("old-b", "0.05", 0.9)]:
        kube.create(
            TRIALS, builders.trial(name, experiment="old", assignments={"lr": lr}), namespace
        )
        status = trial_status("Succeeded", accuracy)
        kube.patch(TRIALS, name, {"status": status}, namespace, subresource="status")
    kube.create(TRIALS, builders.trial("old-c", experiment="old"), namespace)  # still pending

    assert main.main(_cli(cluster, namespace, "export", "old", "--config-map", "old-known")) == 0
    assert "created: 2 known results" in capsys.readouterr().out
    stored = kube.get(CONFIGMAPS, "old-known", namespace)["data"][knownresults.KEY]
    results = knownresults.parse(stored, "old-known")
    assert sorted((r.assignments["lr"], r.metrics["accuracy"]) for r in results) == [
        ("0.01", 0.5),
        ("0.05", 0.9),
    ]
    # Again: the ConfigMap is updated, not refused.
    assert main.main(_cli(cluster, namespace, "export", "old", "--config-map", "old-known")) == 0
    assert "updated: 2 known results" in capsys.readouterr().out

    out = tmp_path / "results.json"
    assert main.main(_cli(cluster, namespace, "export", "old", "-o", str(out))) == 0
    capsys.readouterr()
    doc = json.loads(out.read_text())
    assert doc["version"] == knownresults.VERSION
    assert doc["parameters"][0]["name"] == "lr"

    assert main.main(_cli(cluster, namespace, "export", "nope")) == 1
    assert f"experiment {namespace}/nope not found" in capsys.readouterr().err


def test_get_says_what_warm_start_imported_apart_from_trials(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    warm = {
        "imported": 4,
        "skipped": 1,
        "sources": [{"kind": "ConfigMap", "name": "old-known", "imported": 4, "skipped": 1}],
    }
    kube.create(EXPERIMENTS, builders.experiment("exp", namespace), namespace)
    kube.patch(EXPERIMENTS, "exp", {"status": {"warmStart": warm}}, namespace, subresource="status")
    assert main.main(_cli(cluster, namespace, "get", "exp")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "trials: 0"
    assert lines[2] == (
        "warm start: 4 imported, 1 skipped (known results, not trials; from ConfigMap old-known)"
    )
    assert main.main(_cli(cluster, namespace, "get", "exp", "-o", "json")) == 0
    assert json.loads(capsys.readouterr().out)["warmStart"] == warm
