"""Generate the three CustomResourceDefinitions from the models.

`python -m kubetune.api.crds --out kustomize/base/crds` writes one YAML file per kind plus a
kustomization. Pydantic's JSON schema is turned into a structural OpenAPI v3 schema: references
inlined, `Optional` turned into `nullable`, `const` into a one-value `enum`, no defaults (the API
server would otherwise write them into stored objects), free-form objects kept whole.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from kubetune.api.base import GROUP, VERSION, WireModel
from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import Suggestion
from kubetune.api.trial import Trial

Schema = dict[str, Any]

_COMMON_COLUMNS = [
    {"name": "Type", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
    {"name": "Status", "type": "string", "jsonPath": ".status.conditions[-1:].status"},
]
_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_SUGGESTION_COLUMNS = [
    {"name": "Requested", "type": "string", "jsonPath": ".spec.requests"},
    {"name": "Assigned", "type": "string", "jsonPath": ".status.suggestionCount"},
]

_KINDS: list[tuple[type[WireModel], str, list[dict[str, str]]]] = [
    (Experiment, "experiments", [*_COMMON_COLUMNS, _AGE]),
    (Suggestion, "suggestions", [*_COMMON_COLUMNS, *_SUGGESTION_COLUMNS, _AGE]),
    (Trial, "trials", [*_COMMON_COLUMNS, _AGE]),
]

_DROPPED_KEYS = {"title", "default", "description", "examples"}


def _structural(node: Schema, defs: dict[str, Schema]) -> Schema:
    """Rewrite one pydantic schema node (recursively) into a structural one."""
    if "$ref" in node:
        return _structural(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in node:
        variants = [v for v in node["anyOf"] if v.get("type") != "null"]
        if len(variants) != 1:
            raise ValueError(f"cannot express a union of {variants} structurally")
        return {**_structural(variants[0], defs), "nullable": True}
    out: Schema = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "properties":
            out["properties"] = {k: _structural(v, defs) for k, v in value.items()}
        elif key == "items":
            out["items"] = _structural(value, defs)
        elif key == "additionalProperties":
            if value is False:
                continue
            if value is True or value == {}:
                out["x-kubernetes-preserve-unknown-fields"] = True
            else:
                out["additionalProperties"] = _structural(value, defs)
        else:
            out[key] = value
    if (
        out.get("type") == "object"
        and not out.get("properties")
        and "additionalProperties" not in out
    ):
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    return out


def openapi_schema(model: type[WireModel]) -> Schema:
    """The structural OpenAPI v3 schema of a kind; metadata is left to the API server."""
    raw = model.model_json_schema(by_alias=True, mode="serialization")
    defs = raw.pop("$defs", {})
    schema = _structural(raw, defs)
    schema["properties"]["metadata"] = {"type": "object"}
    schema.pop("required", None)
    return schema


def custom_resource_definition(
    model: type[WireModel], plural: str, columns: list[dict[str, str]]
) -> dict[str, Any]:
    kind = model.model_fields["kind"].default
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "singular": kind.lower(),
                "plural": plural,
                "categories": ["all", "kubeflow", "katib"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": columns,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": openapi_schema(model)},
                }
            ],
        },
    }


def render_all() -> dict[str, str]:
    """File name -> YAML text for every CRD and the kustomization that lists them."""
    files: dict[str, str] = {}
    for model, plural, columns in _KINDS:
        crd = custom_resource_definition(model, plural, columns)
        files[f"{plural}.{GROUP}.yaml"] = yaml.safe_dump(crd, sort_keys=True)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": sorted(files),
    }
    files["kustomization.yaml"] = yaml.safe_dump(kustomization, sort_keys=True)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kubetune.api.crds", description="Write kubetune's CRDs from the API models."
    )
    parser.add_argument("--out", required=True, type=Path, help="directory to write into")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for name, text in render_all().items():
        (out / name).write_text(text)
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
