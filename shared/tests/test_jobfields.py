"""`jobfields`: misspelt fields of a batch/v1 Job, found through the shipped table of its fields."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kubetune import jobfields, jobfieldtable


def test_unknown_fields_are_named_with_their_path() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"labels": {"any": "thing"}, "annotations": {"a": "b"}},
        "spec": {
            "backofLimit": 1,
            "template": {
                "metadata": {"labels": {"x": "y"}, "nmae": "z"},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "comand": ["x"],
                            "resources": {"limits": {"cpu": "1"}},
                            "env": [{"name": "A", "valueFrom": {"fieldRef": {"feldPath": "x"}}}],
                            "ports": [{"containerPort": 80, "nme": "http"}],
                        }
                    ],
                    "nodeSelector": {"disk": "ssd"},
                },
            },
        },
    }
    assert jobfields.unknown_fields(job) == [
        "spec.backofLimit",
        "spec.template.metadata.nmae",
        "spec.template.spec.containers[0].comand",
        "spec.template.spec.containers[0].env[0].valueFrom.fieldRef.feldPath",
        "spec.template.spec.containers[0].ports[0].nme",
    ]


def test_a_correct_job_and_values_of_the_wrong_shape_have_none() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"backoffLimit": 0, "template": {}}}
    assert jobfields.unknown_fields(job) == []
    # A wrong type is the API server's to refuse, with its own message.
    assert jobfields.unknown_fields({"spec": {"template": "text", "completions": "x"}}) == []
    assert jobfields.unknown_fields(["not", "a", "mapping"]) == []


def test_the_shipped_table_is_the_installed_clients_models() -> None:
    """Regenerate with `python -m kubetune.jobfields > shared/src/kubetune/jobfieldtable.py`."""
    shipped = Path(jobfieldtable.__file__).read_text()
    assert shipped == jobfields.render(jobfields.generate())
    assert {"V1Job", "V1JobSpec", "V1PodSpec", "V1Container", "V1ObjectMeta"} <= set(
        jobfieldtable.MODELS
    )


def test_checking_a_job_does_not_import_the_kubernetes_client() -> None:
    """The reason for the table: the client's import cost the webhook 0.16 s of CPU."""
    code = (
        "import sys; from kubetune import jobfields; "
        "print(jobfields.unknown_fields({'spec': {'x': 1}}), 'kubernetes' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split("] ") == ["['spec.x'", "False\n"], done.stderr
