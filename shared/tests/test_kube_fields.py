"""`kube.unknown_fields`: misspelt fields of built-in kinds, found through the client's models."""

from __future__ import annotations

from kubetune import kube


def test_unknown_fields_are_named_with_their_path() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"labels": {"any": "thing"}},
        "spec": {
            "backofLimit": 1,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "comand": ["x"],
                            "resources": {"limits": {"cpu": "1"}},
                            "ports": [{"containerPort": 80, "nme": "http"}],
                        }
                    ]
                }
            },
        },
    }
    assert kube.unknown_fields("V1Job", job) == [
        "spec.backofLimit",
        "spec.template.spec.containers[0].comand",
        "spec.template.spec.containers[0].ports[0].nme",
    ]


def test_a_correct_job_and_unknown_models_have_none() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"backoffLimit": 0, "template": {}}}
    assert kube.unknown_fields("V1Job", job) == []
    assert kube.unknown_fields("NoSuchModel", {"x": 1}) == []
