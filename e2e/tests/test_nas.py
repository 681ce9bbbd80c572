"""Neural architecture search on the local overlay (issue 19): Katib's nas/darts-cpu.yaml and
nas/enas-cpu.yaml with their algorithm, nasConfig, trialParameters, collector and argument forms
unchanged; only the name, namespace, trial count (3) and the program run change (the small
NumPy scripts of examples/training instead of the CIFAR-10 images). The arguments keep the
examples' quotes (`--architecture="${...}"`): the command runs as one shell line, as Katib runs
it, and the scripts parse them as upstream's trial images do, with no unquoting of their own.

darts: every trial gets the same search space and settings and prints `Best-Genotype=...`, the
(non-numeric) objective the example's metrics filter reads. enas (FromVolume, 2 layers, so skip
bits exist): the algorithm pod is deleted once the first 2 architectures are out; its
replacement restores the controller from the suggestion's volume and proposes the third from the
first Trials' reward. Every architecture decodes to a valid network for the nasConfig.
"""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import pytest
import test_algorithms as algorithms
import test_local_overlay as overlay
from podcode import EXISTING, TRAINING_IMAGE

from kubetune import nas
from kubetune.api.experiment import NasConfig
from kubetune_testkit.deploying import ROOT
from kubetune_testkit.examples import examples
from kubetune_testkit.kubectl import get_json
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration
Obj = dict[str, Any]


def _katib(stem: str, name: str, namespace: str, script: str) -> Obj:
    """Katib's example with only name, namespace, trial counts and the program replaced."""
    doc = next(d for example, d in examples("Experiment") if example.split(":")[0] == stem)
    doc["metadata"] = {"name": name, "namespace": namespace}
    spec = doc["spec"]
    spec["maxTrialCount"] = 3
    spec["parallelTrialCount"] = 2
    spec["maxFailedTrialCount"] = 1
    container = spec["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"][0]
    path = ROOT / "examples" / "training" / script
    program = (
        ["sh", "-c", shlex.join(["python3", "-c", path.read_text()])]
        if EXISTING
        else [sys.executable, str(path)]
    )
    container["image"] = TRAINING_IMAGE
    # Katib's: [python3, (-u,) <script>, <the arguments>]: the arguments stay as written, and
    # the whole command is one shell line (after `sh -c`, the rest of it).
    arguments = [a for a in container["command"] if a.startswith("--")]
    container["command"] = program + arguments
    return doc


def _trials(cluster: ClusterHandle, namespace: str, name: str) -> list[Obj]:
    suggestion = get_json(cluster, "suggestion", "-n", namespace, name)
    order = [s["name"] for s in suggestion["status"]["suggestions"]]
    trials = {
        t["metadata"]["name"]: t
        for t in get_json(cluster, "trial", "-n", namespace)["items"]
        if t["metadata"]["name"].startswith(f"{name}-")
    }
    assert sorted(order) == sorted(trials) and len(order) == 3
    for trial in trials.values():
        assert algorithms._condition(trial, "Succeeded").get("status") == "True"
    return [trials[t] for t in order]


def _assigned(trial: Obj) -> dict[str, str]:
    return {p["name"]: p["value"] for p in trial["spec"]["parameterAssignments"]}


def _latest(trial: Obj, metric: str) -> str:
    metrics = trial["status"]["observation"]["metrics"]
    return str(next(m["latest"] for m in metrics if m["name"] == metric))


def test_darts_trials_search_and_report_their_genotype(kubetune: ClusterHandle, ns: str) -> None:
    cluster, namespace, name = kubetune, ns, "darts"
    experiment = _katib("katib-darts-cpu", name, namespace, "nas_darts.py")
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(experiment))
    overlay.wait_succeeded(cluster, namespace, name)
    trials = _trials(cluster, namespace, name)
    expected = nas.darts_assignments(
        NasConfig.model_validate(experiment["spec"]["nasConfig"]),
        nas.darts_settings(None)
        | {s["name"]: s["value"] for s in experiment["spec"]["algorithm"]["algorithmSettings"]},
    )
    for trial in trials:
        assert _assigned(trial) == expected
        genotype = _latest(trial, "Best-Genotype")
        assert genotype.startswith("Genotype(normal=[[('max_pooling_3x3',0)]]")


def test_enas_controller_survives_a_restart_and_proposes_valid_networks(
    kubetune: ClusterHandle, ns: str
) -> None:
    cluster, namespace, name = kubetune, ns, "enas"
    experiment = _katib("katib-enas-cpu", name, namespace, "nas_enas.py")
    experiment["spec"]["resumePolicy"] = "FromVolume"
    experiment["spec"]["nasConfig"]["graphConfig"]["numLayers"] = 2
    experiment["spec"]["algorithm"]["algorithmSettings"] = [
        {"name": "controller_train_steps", "value": "5"}
    ]
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(experiment))
    algorithms._kill_algorithm_pod_once_assigned(cluster, namespace, name, count=2)
    overlay.wait_succeeded(cluster, namespace, name)
    config = NasConfig.model_validate(experiment["spec"]["nasConfig"])
    operations = nas.enas_operations(config.operations or [])
    for trial in _trials(cluster, namespace, name):
        values = _assigned(trial)
        layers, nn_config = nas.decode_enas(values["architecture"], values["nn_config"])
        assert len(layers) == 2 and nn_config["input_sizes"] == [32, 32, 3]
        for layer in layers:
            assert nn_config["embedding"][str(layer[0])] == json.loads(
                json.dumps(operations[layer[0]])
            )
        assert 0 < float(_latest(trial, "Validation-Accuracy")) <= 1
