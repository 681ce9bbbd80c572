"""Trial template rendering: substitution, metadata references, errors, istio annotation."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import TrialAssignment
from kubetune_experiment_controller import rendering
from kubetune_experiment_controller.rendering import RenderError, annotate_pod_templates
from tests.helpers import JOB, experiment

ASSIGNMENT = TrialAssignment.model_validate(
    {"name": "exp-abc", "parameterAssignments": [{"name": "lr", "value": "0.03"}]}
)


def _with_parameters(params: list[dict[str, str]], spec: dict[str, Any]) -> Experiment:
    exp = experiment(trial_spec=spec)
    assert exp.spec.trial_template is not None
    exp.spec.trial_template.trial_parameters = [
        rendering.TrialTemplate.model_validate({"trialParameters": [p]}).trial_parameters[0]  # type: ignore[index]
        for p in params
    ]
    return exp


def test_substitutes_parameters_and_sets_name_namespace_and_istio() -> None:
    run = rendering.render_run_spec(experiment(), ASSIGNMENT, "ns", None)
    container = run["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["sh", "-c", "echo lr=0.03"]
    assert run["metadata"] == {"name": "exp-abc", "namespace": "ns"}
    assert run["spec"]["template"]["metadata"]["annotations"] == {
        "sidecar.istio.io/inject": "false"
    }


def test_metadata_references() -> None:
    spec = copy.deepcopy(JOB)
    spec["metadata"] = {"labels": {"team": "ml"}, "annotations": {"owner": "alice"}}
    spec["spec"]["template"]["spec"]["containers"][0]["command"] = [
        "run",
        "${trialParameters.learningRate}",
        "${trialParameters.trialName}",
        "${trialParameters.ns}",
        "${trialParameters.kind}/${trialParameters.apiVersion}",
        "${trialParameters.team}-${trialParameters.owner}",
    ]
    exp = _with_parameters(
        [
            {"name": "learningRate", "reference": "lr"},
            {"name": "trialName", "reference": "${trialSpec.Name}"},
            {"name": "ns", "reference": "${trialSpec.Namespace}"},
            {"name": "kind", "reference": "${trialSpec.Kind}"},
            {"name": "apiVersion", "reference": "${trialSpec.APIVersion}"},
            {"name": "team", "reference": "${trialSpec.Labels[team]}"},
            {"name": "owner", "reference": "${trialSpec.Annotations[owner]}"},
        ],
        spec,
    )
    run = rendering.render_run_spec(exp, ASSIGNMENT, "ns", None)
    assert run["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "run",
        "0.03",
        "exp-abc",
        "ns",
        "Job/batch/v1",
        "ml-alice",
    ]


@pytest.mark.parametrize(
    ("params", "command", "message"),
    [
        (
            [{"name": "learningRate", "reference": "momentum"}],
            "${trialParameters.learningRate}",
            "no assignment for its reference 'momentum'",
        ),
        (
            [{"name": "learningRate", "reference": "lr"}],
            "${trialParameters.batch}",
            "unresolved placeholder(s) ${trialParameters.batch}",
        ),
        (
            [
                {"name": "learningRate", "reference": "lr"},
                {"name": "x", "reference": "${trialSpec.Labels[nope]}"},
            ],
            "${trialParameters.x}",
            "the trial template has no label 'nope'",
        ),
        (
            [
                {"name": "learningRate", "reference": "lr"},
                {"name": "x", "reference": "${trialSpec.Uid}"},
            ],
            "${trialParameters.x}",
            "is not a trial metadata reference",
        ),
        ([], "plain", "the assignment has 1 parameters but the trial template references 0"),
    ],
    ids=[
        "missing-assignment",
        "undeclared-placeholder",
        "missing-label",
        "bad-metadata-ref",
        "count",
    ],
)
def test_render_errors_name_the_problem(
    params: list[dict[str, str]], command: str, message: str
) -> None:
    spec = copy.deepcopy(JOB)
    spec["spec"]["template"]["spec"]["containers"][0]["command"] = [command]
    with pytest.raises(RenderError, match=re.escape(message)):
        rendering.render_run_spec(_with_parameters(params, spec), ASSIGNMENT, "ns", None)


def test_value_that_breaks_the_json_is_an_error_not_a_crash() -> None:
    assignment = TrialAssignment.model_validate(
        {"name": "exp-abc", "parameterAssignments": [{"name": "lr", "value": 'a"b'}]}
    )
    with pytest.raises(RenderError, match="not valid after substitution"):
        rendering.render_run_spec(experiment(), assignment, "ns", None)


def test_config_map_template() -> None:
    text = yaml.safe_dump(JOB)
    exp = experiment()
    assert exp.spec.trial_template is not None
    exp.spec.trial_template.trial_spec = None
    exp.spec.trial_template.config_map = rendering.TrialTemplate.model_validate(
        {
            "configMap": {
                "configMapName": "tpl",
                "configMapNamespace": "kubeflow",
                "templatePath": "job.yaml",
            }
        }
    ).config_map
    run = rendering.render_run_spec(exp, ASSIGNMENT, "ns", {"data": {"job.yaml": text}})
    assert run["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "echo lr=0.03"
    with pytest.raises(RenderError, match=re.escape("has no key 'job.yaml'")):
        rendering.render_run_spec(exp, ASSIGNMENT, "ns", {"data": {}})
    with pytest.raises(RenderError, match="not found"):
        rendering.render_run_spec(exp, ASSIGNMENT, "ns", None)


def test_istio_annotation_at_any_depth_unless_set() -> None:
    tfjob: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "spec": {
            "tfReplicaSpecs": {
                "Chief": {
                    "template": {
                        "metadata": {"annotations": {"sidecar.istio.io/inject": "true"}},
                        "spec": {"containers": [{"name": "a"}]},
                    }
                },
                "Worker": {
                    "template": {
                        "metadata": {"labels": {"sidecar.istio.io/inject": "true"}},
                        "spec": {"containers": [{"name": "b"}]},
                    }
                },
                "PS": {"template": {"spec": {"containers": [{"name": "c"}]}}},
            }
        },
    }
    workflow: dict[str, Any] = {
        "spec": {
            "templates": [
                {"name": "x", "container": {}},
                {
                    "name": "y",
                    "podSpecPatch": "",
                    "nested": {"pod": {"metadata": {}, "spec": {"containers": []}}},
                },
            ]
        }
    }
    annotate_pod_templates(tfjob)
    annotate_pod_templates(workflow)
    specs = tfjob["spec"]["tfReplicaSpecs"]
    assert specs["Chief"]["template"]["metadata"]["annotations"] == {
        "sidecar.istio.io/inject": "true"
    }
    assert (
        "annotations" not in specs["Worker"]["template"]["metadata"]
        or "sidecar.istio.io/inject" not in specs["Worker"]["template"]["metadata"]["annotations"]
    )
    assert specs["PS"]["template"]["metadata"]["annotations"] == {
        "sidecar.istio.io/inject": "false"
    }
    assert workflow["spec"]["templates"][1]["nested"]["pod"]["metadata"]["annotations"] == {
        "sidecar.istio.io/inject": "false"
    }
    assert "metadata" not in workflow["spec"]["templates"][0]


def test_istio_annotation_can_be_turned_off() -> None:
    run = rendering.render_run_spec(experiment(), ASSIGNMENT, "ns", None, inject_istio=False)
    assert "metadata" not in run["spec"]["template"]


def test_build_trial_fills_spec_from_experiment() -> None:
    exp = experiment()
    obj = {"metadata": {"name": "exp", "namespace": "ns", "uid": "uid-1"}}
    run = rendering.render_run_spec(exp, ASSIGNMENT, "ns", None)
    assignment = ASSIGNMENT.model_copy(update={"labels": {"generation": "1"}})
    trial = rendering.build_trial(obj, exp, assignment, run)
    assert trial["metadata"]["labels"] == {
        "katib.kubeflow.org/experiment": "exp",
        "generation": "1",
    }
    assert trial["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert trial["metadata"]["ownerReferences"][0]["controller"] is True
    spec = trial["spec"]
    assert spec["objective"]["metricStrategies"] == [{"name": "accuracy", "value": "max"}]
    assert spec["successCondition"] == 'status.conditions.#(type=="Complete")#|#(status=="True")#'
    assert spec["metricsCollector"] == {"collector": {"kind": "StdOut"}}
    assert spec["primaryContainerName"] == "training-container"
    assert spec["runSpec"] is run
    failed = rendering.build_trial(obj, exp, ASSIGNMENT, None, "bad template")
    assert "runSpec" not in failed["spec"]
    assert failed["metadata"]["annotations"] == {"kubetune.io/render-error": "bad template"}
