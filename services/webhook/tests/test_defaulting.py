"""Every default of Katib's webhook, as a table: the input spec and the fields it must end with."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_cases import experiment

from kubetune.api.experiment import Experiment
from kubetune_webhook import defaulting, patching


def _bare(**spec: Any) -> dict[str, Any]:
    exp = experiment()
    for key in ("parallelTrialCount", "resumePolicy", "metricsCollectorSpec"):
        exp["spec"].pop(key)
    tt = exp["spec"]["trialTemplate"]
    tt.pop("successCondition")
    tt.pop("failureCondition")
    exp["spec"].update(spec)
    return exp


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc.get(part)
        if doc is None:
            return None
    return doc


def _job(kind: str, api_version: str) -> dict[str, Any]:
    return {
        "primaryContainerName": "c",
        "trialParameters": [],
        "trialSpec": {"apiVersion": api_version, "kind": kind, "spec": {}},
    }


KF_SUCCESS = 'status.conditions.#(type=="Succeeded")#|#(status=="True")#'
FAILED = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
COMPLETE = 'status.conditions.#(type=="Complete")#|#(status=="True")#'

CASES = [
    # (id, input spec overrides, path, expected value)
    ("parallel-trial-count", {}, "parallelTrialCount", 3),
    ("parallel-trial-count-capped-by-max", {"maxTrialCount": 2}, "parallelTrialCount", 2),
    ("parallel-trial-count-kept", {"parallelTrialCount": 5}, "parallelTrialCount", 5),
    ("resume-policy", {}, "resumePolicy", "Never"),
    ("resume-policy-empty", {"resumePolicy": ""}, "resumePolicy", "Never"),
    ("resume-policy-kept", {"resumePolicy": "LongRunning"}, "resumePolicy", "LongRunning"),
    (
        "strategy-maximize",
        {},
        "objective.metricStrategies",
        [{"name": "accuracy", "value": "max"}, {"name": "loss", "value": "max"}],
    ),
    (
        "strategy-minimize-additional-same-type",
        {
            "objective": {
                "type": "minimize",
                "objectiveMetricName": "loss",
                "additionalMetricNames": ["acc"],
            }
        },
        "objective.metricStrategies",
        [{"name": "loss", "value": "min"}, {"name": "acc", "value": "min"}],
    ),
    (
        "strategy-unknown-type-latest",
        {"objective": {"objectiveMetricName": "loss"}},
        "objective.metricStrategies",
        [{"name": "loss", "value": "latest"}],
    ),
    (
        "strategy-kept",
        {
            "objective": {
                "type": "maximize",
                "objectiveMetricName": "acc",
                "additionalMetricNames": ["loss"],
                "metricStrategies": [{"name": "loss", "value": "min"}],
            }
        },
        "objective.metricStrategies",
        [{"name": "loss", "value": "min"}, {"name": "acc", "value": "max"}],
    ),
    ("job-success", {}, "trialTemplate.successCondition", COMPLETE),
    ("job-failure", {}, "trialTemplate.failureCondition", FAILED),
    ("job-no-primary-labels", {}, "trialTemplate.primaryPodLabels", None),
    (
        "tfjob-success",
        {"trialTemplate": _job("TFJob", "kubeflow.org/v1")},
        "trialTemplate.successCondition",
        KF_SUCCESS,
    ),
    (
        "pytorchjob-failure",
        {"trialTemplate": _job("PyTorchJob", "kubeflow.org/v1")},
        "trialTemplate.failureCondition",
        FAILED,
    ),
    (
        "xgboostjob-labels",
        {"trialTemplate": _job("XGBoostJob", "kubeflow.org/v1")},
        "trialTemplate.primaryPodLabels",
        {"training.kubeflow.org/job-role": "master"},
    ),
    (
        "mpijob-labels-kept",
        {
            "trialTemplate": {
                **_job("MPIJob", "kubeflow.org/v2beta1"),
                "primaryPodLabels": {"mpi-job-role": "launcher"},
            }
        },
        "trialTemplate.primaryPodLabels",
        {"mpi-job-role": "launcher"},
    ),
    (
        "trainjob-labels",
        {"trialTemplate": _job("TrainJob", "trainer.kubeflow.org/v1alpha1")},
        "trialTemplate.primaryPodLabels",
        {
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "batch.kubernetes.io/job-completion-index": "0",
        },
    ),
    (
        "trainjob-success",
        {"trialTemplate": _job("TrainJob", "trainer.kubeflow.org/v1alpha1")},
        "trialTemplate.successCondition",
        COMPLETE,
    ),
    (
        "argo-nothing",
        {"trialTemplate": _job("Workflow", "argoproj.io/v1alpha1")},
        "trialTemplate.successCondition",
        None,
    ),
    (
        "condition-kept",
        {
            "trialTemplate": {
                **_job("Job", "batch/v1"),
                "successCondition": "status.[@this].#(succeeded==1)",
            }
        },
        "trialTemplate.successCondition",
        "status.[@this].#(succeeded==1)",
    ),
    (
        "configmap-nothing",
        {"trialTemplate": {"primaryContainerName": "c", "configMap": {"configMapName": "t"}}},
        "trialTemplate.successCondition",
        None,
    ),
    (
        "no-primary-container-default",
        {"trialTemplate": _job("Job", "batch/v1") | {"primaryContainerName": None}},
        "trialTemplate.primaryContainerName",
        None,
    ),
    ("collector-stdout", {}, "metricsCollectorSpec.collector.kind", "StdOut"),
    (
        "collector-file",
        {"metricsCollectorSpec": {"collector": {"kind": "File"}}},
        "metricsCollectorSpec.source.fileSystemPath",
        {"kind": "File", "path": "/var/log/katib/metrics.log", "format": "TEXT"},
    ),
    (
        "collector-file-kept",
        {
            "metricsCollectorSpec": {
                "collector": {"kind": "File"},
                "source": {"fileSystemPath": {"path": "/katib/m.log", "format": "JSON"}},
            }
        },
        "metricsCollectorSpec.source.fileSystemPath",
        {"kind": "File", "path": "/katib/m.log", "format": "JSON"},
    ),
    (
        "collector-tfevent",
        {"metricsCollectorSpec": {"collector": {"kind": "TensorFlowEvent"}}},
        "metricsCollectorSpec.source.fileSystemPath",
        {"kind": "Directory", "path": "/var/log/katib/tfevent/"},
    ),
    (
        "collector-prometheus",
        {"metricsCollectorSpec": {"collector": {"kind": "PrometheusMetric"}}},
        "metricsCollectorSpec.source.httpGet",
        {"path": "/metrics", "port": 8080},
    ),
    (
        "collector-prometheus-port-kept",
        {
            "metricsCollectorSpec": {
                "collector": {"kind": "PrometheusMetric"},
                "source": {"httpGet": {"port": 9090}},
            }
        },
        "metricsCollectorSpec.source.httpGet",
        {"path": "/metrics", "port": 9090},
    ),
    ("distribution", {}, "parameters.0.feasibleSpace.distribution", "uniform"),
    (
        "distribution-empty",
        {
            "parameters": [
                {
                    "name": "lr",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "1", "max": "2", "distribution": ""},
                }
            ]
        },
        "parameters.0.feasibleSpace.distribution",
        "uniform",
    ),
    (
        "distribution-kept",
        {
            "parameters": [
                {
                    "name": "lr",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "1", "max": "2", "distribution": "logUniform"},
                }
            ]
        },
        "parameters.0.feasibleSpace.distribution",
        "logUniform",
    ),
]


@pytest.mark.parametrize(
    ("spec", "path", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_default(spec: dict[str, Any], path: str, expected: Any) -> None:
    manifest = _bare(**spec)
    patched = patching.apply(manifest, defaulting.patch(manifest))
    assert _get(patched["spec"], path) == expected
    # The pure function over the model agrees with the patch.
    model = defaulting.default(Experiment.model_validate(patched))
    assert _get(model.to_wire()["spec"], path) == expected


@pytest.mark.parametrize("spec", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_defaulting_twice_changes_nothing(spec: dict[str, Any]) -> None:
    manifest = _bare(**spec)
    once = patching.apply(manifest, defaulting.patch(manifest))
    assert defaulting.patch(once) == []


def test_a_complete_experiment_gets_no_patch() -> None:
    exp = experiment()
    once = patching.apply(exp, defaulting.patch(exp))
    assert defaulting.patch(once) == []


def test_numbers_the_user_wrote_stay_numbers() -> None:
    exp = _bare(
        parameters=[
            {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": 0.1, "max": 1}}
        ]
    )
    patched = patching.apply(exp, defaulting.patch(exp))
    assert patched["spec"]["parameters"][0]["feasibleSpace"] == {
        "min": 0.1,
        "max": 1,
        "distribution": "uniform",
    }


@pytest.mark.parametrize(
    "manifest", [None, [], "x", {"spec": "nope"}, {"spec": {"parallelTrialCount": "many"}}]
)
def test_what_does_not_load_gets_no_patch(manifest: Any) -> None:
    assert defaulting.patch(manifest) == []
