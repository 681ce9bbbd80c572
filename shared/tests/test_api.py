"""The v1beta1 models load every example shape, dump it back unchanged, and name bad fields."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetune import api
from kubetune.api.experiment import Experiment, ParameterType, ResumePolicy
from kubetune_testkit.examples import examples

DOCUMENTS = examples()


@pytest.mark.parametrize("manifest", [d for _, d in DOCUMENTS], ids=[i for i, _ in DOCUMENTS])
def test_manifest_round_trips_to_the_same_json(manifest: dict[str, Any]) -> None:
    loaded = api.load(copy.deepcopy(manifest))
    assert loaded.to_wire() == manifest


def test_every_kind_and_shape_is_covered() -> None:
    kinds = {doc["kind"] for _, doc in DOCUMENTS}
    job_kinds = {
        (doc["spec"].get("trialTemplate") or {}).get("trialSpec", {}).get("kind")
        for _, doc in DOCUMENTS
        if doc["kind"] == "Experiment"
    }
    assert kinds == {"Experiment", "Suggestion", "Trial"}
    assert {"Job", "TFJob", "MPIJob", "Workflow", "PipelineRun", "TrainJob"} <= job_kinds


def test_snake_case_in_python_camel_case_on_the_wire() -> None:
    exp = Experiment.model_validate(_by_name("random"))
    assert exp.spec.parallel_trial_count == 3
    assert exp.spec.parameters is not None
    assert exp.spec.parameters[2].parameter_type is ParameterType.CATEGORICAL
    assert exp.spec.parameters[2].feasible_space.values == ["sgd", "adam", "ftrl"]
    exp.spec.resume_policy = ResumePolicy.FROM_VOLUME
    wire = exp.to_wire()
    assert wire["spec"]["resumePolicy"] == "FromVolume"
    assert wire["spec"]["trialTemplate"]["primaryContainerName"] == "training-container"


def test_numbers_written_without_quotes_become_katib_strings() -> None:
    doc = _by_name("random")
    doc["spec"]["parameters"][0]["feasibleSpace"] = {"min": 0.01, "max": 3}
    loaded = api.load(doc)
    assert isinstance(loaded, Experiment)
    assert loaded.spec.parameters is not None
    space = loaded.spec.parameters[0].feasible_space
    assert (space.min, space.max) == ("0.01", "3")


def _by_name(name: str) -> dict[str, Any]:
    for _, doc in DOCUMENTS:
        if doc["metadata"]["name"] == name:
            return copy.deepcopy(doc)
    raise KeyError(name)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["spec"]["parameters"][2]["feasibleSpace"].update(min=[1]),
            "spec.parameters[2].feasibleSpace.min: ",
        ),
        (
            lambda d: d["spec"]["parameters"][1].update(parameterType="float"),
            "spec.parameters[1].parameterType: Input should be 'double', 'int'",
        ),
        (
            lambda d: d["spec"].update(maxTrailCount=3),
            "spec.maxTrailCount: unknown field",
        ),
        (
            lambda d: d["spec"]["objective"].update(type="maximise"),
            "spec.objective.type: Input should be 'minimize', 'maximize'",
        ),
        (
            lambda d: d["spec"].update(parallelTrialCount="three"),
            "spec.parallelTrialCount: Input should be a valid integer",
        ),
        (
            lambda d: d["spec"]["trialTemplate"].update(trialSpec=["not", "an", "object"]),
            "spec.trialTemplate.trialSpec: Input should be a valid dictionary",
        ),
        (lambda d: d.update(apiVersion="kubeflow.org/v1alpha3"), "apiVersion: Input should be"),
    ],
    ids=[
        "min-not-text",
        "bad-type",
        "misspelt-field",
        "bad-objective",
        "count-text",
        "trialspec-list",
        "old-version",
    ],
)
def test_bad_manifest_names_the_field(mutate: Any, expected: str) -> None:
    doc = _by_name("random")
    mutate(doc)
    with pytest.raises(api.ManifestError) as caught:
        api.load(doc)
    assert any(line.startswith(expected) for line in caught.value.problems), caught.value.problems
    assert "Traceback" not in str(caught.value)


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ([1, 2], "(root): expected an object, got list"),
        ({"kind": "Job"}, "kind: 'Job' is not one of Experiment, Suggestion, Trial"),
        ({}, "kind: None is not one of"),
    ],
)
def test_not_a_katib_manifest(manifest: Any, expected: str) -> None:
    with pytest.raises(api.ManifestError) as caught:
        api.load(manifest)
    assert caught.value.problems[0].startswith(expected)


def test_defaults_are_not_invented_on_dump() -> None:
    minimal = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "metadata": {"name": "t"}}
    assert api.load(minimal).to_wire() == minimal
