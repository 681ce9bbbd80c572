"""The committed CRDs are what the models generate, and they are structural."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune.api import crds
from kubetune_testkit.paths import CRDS


def test_committed_crds_match_the_models() -> None:
    generated = crds.render_all()
    committed = {p.name: p.read_text() for p in CRDS.glob("*.yaml")}
    assert committed == generated, (
        "CRDs drifted from the models; run: python -m kubetune.api.crds --out kustomize/base/crds"
    )


def _walk(node: Any, path: str = "") -> list[str]:
    """Return structural-schema violations below `node`."""
    problems = []
    if not isinstance(node, dict):
        return problems
    for banned in ("$ref", "anyOf", "oneOf", "allOf", "const", "default", "$defs"):
        if banned in node:
            problems.append(f"{path}: has {banned}")
    if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        problems.append(f"{path}: no type")
    for name, child in (node.get("properties") or {}).items():
        problems += _walk(child, f"{path}.{name}")
    if "items" in node:
        problems += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        problems += _walk(node["additionalProperties"], f"{path}{{}}")
    return problems


@pytest.mark.parametrize("name", ["experiments", "suggestions", "trials"])
def test_schema_is_structural_with_status_and_columns(name: str) -> None:
    crd = yaml.safe_load(crds.render_all()[f"{name}.kubeflow.org.yaml"])
    version = crd["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    assert _walk(schema) == []
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns[:2] == ["Type", "Status"] and columns[-1] == "Age"
    assert version["additionalPrinterColumns"][0]["jsonPath"] == ".status.conditions[-1:].type"
    assert crd["spec"]["names"]["categories"] == ["all", "kubeflow", "katib"]
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}


def test_suggestion_shows_requested_and_assigned() -> None:
    crd = yaml.safe_load(crds.render_all()["suggestions.kubeflow.org.yaml"])
    columns = {
        c["name"]: c["jsonPath"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]
    }
    assert columns["Requested"] == ".spec.requests"
    assert columns["Assigned"] == ".status.suggestionCount"


def test_free_form_objects_keep_unknown_fields() -> None:
    crd = yaml.safe_load(crds.render_all()["experiments.kubeflow.org.yaml"])
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    trial_spec = spec["properties"]["trialTemplate"]["properties"]["trialSpec"]
    assert trial_spec["x-kubernetes-preserve-unknown-fields"] is True
    assert trial_spec["type"] == "object"


def test_main_writes_files(tmp_path: Path) -> None:
    assert crds.main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(crds.render_all())
