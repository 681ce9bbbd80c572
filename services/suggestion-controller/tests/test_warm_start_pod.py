"""Warm start in a real algorithm pod: the suggestion-controller mounts the ConfigMap of known
results (the kubelet reads it; the algorithm's ServiceAccount has no right on ConfigMaps), the
algorithm imports what fits before its first assignment, and its next pod on the same volume
(FromVolume) does not import them again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from kubetune import knownresults, naming
from kubetune.kube import CONFIGMAPS, PODS, SUGGESTIONS, Kube
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.standins.services import StandInExperimentController
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}},
    {
        "name": "optimizer",
        "parameterType": "categorical",
        "feasibleSpace": {"list": ["sgd", "adam"]},
    },
]
KNOWN = [("0.02", "sgd", 0.3), ("0.05", "adam", 0.1), ("0.08", "adam", 0.2), ("0.5", "sgd", 0.0)]


def _document() -> str:
    return json.dumps(
        {
            "version": knownresults.VERSION,
            "results": [
                {
                    "parameterAssignments": [
                        {"name": "lr", "value": lr},
                        {"name": "optimizer", "value": optimizer},
                    ],
                    "metrics": [{"name": "loss", "value": loss}],
                }
                for lr, optimizer, loss in KNOWN
            ],
        }
    )


def _known_in_study(host_prefix: Path, namespace: str) -> int:
    pv = naming.suggestion_pv_name("exp", "tpe", namespace)
    storage = JournalStorage(JournalFileBackend(str(host_prefix / pv / "study.journal")))
    (summary,) = optuna.get_all_study_summaries(storage)
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    return sum("kubetune_known" in t.user_attrs for t in study.get_trials(deepcopy=False))


def _warm_start(standin: StandInExperimentController) -> dict[str, Any]:
    return dict((standin.suggestion().get("status") or {}).get("warmStart") or {})


def test_known_results_of_a_mounted_config_map_are_imported_once(
    kube: Kube,
    namespace: str,
    controller: ServiceProcess,
    standin: StandInExperimentController,
    host_prefix: Path,
) -> None:
    kube.create(
        CONFIGMAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "known"},
            "data": {knownresults.KEY: _document()},
        },
        namespace,
    )
    standin.create(
        "tpe",
        "FromVolume",
        PARAMETERS,
        {"random_state": "5"},
        requests=2,
        warmStart={"configMaps": ["known"]},
    )
    standin.wait_assignments(2, 180)
    warm = _warm_start(standin)
    assert (warm["imported"], warm["skipped"]) == (3, 1), warm
    assert _known_in_study(host_prefix, namespace) == 3

    (pod,) = standin.algorithm_pods()
    kube.delete(PODS, pod["metadata"]["name"], namespace, grace_seconds=0)
    wait_for(
        "a new algorithm pod",
        lambda: [
            p for p in standin.algorithm_pods() if p["metadata"]["uid"] != pod["metadata"]["uid"]
        ],
    )
    standin.request(4)
    standin.wait_assignments(4, 180)
    assert _known_in_study(host_prefix, namespace) == 3
    assert _warm_start(standin)["imported"] == 3
    status = kube.get(SUGGESTIONS, "exp", namespace)["status"]
    assert status["suggestionCount"] == 4  # known results take no assignment
