"""`kubetune export EXPERIMENT`: an Experiment's Succeeded Trials as known results (the
`results.json` document of `kubetune.knownresults`), to a file, stdout or a ConfigMap that a
later Experiment's `spec.warmStart.configMaps` names. Export before deleting an Experiment:
its Trials go with it.
"""

from __future__ import annotations

import json
from typing import Any

from kubetune import errors, knownresults
from kubetune.kube import CONFIGMAPS, Kube
from kubetune_cli.reading import UserError


def document(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    found = knownresults.read_experiment(kube, namespace, name)
    if found is None:
        raise UserError(f"experiment {namespace}/{name} not found")
    return knownresults.document(*found)


def to_config_map(kube: Kube, name: str, namespace: str, doc: dict[str, Any]) -> str:
    """Create ConfigMap `name` holding `doc`, or replace its `results.json`; what was done."""
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {knownresults.KEY: json.dumps(doc, separators=(",", ":"))},
    }
    try:
        kube.create(CONFIGMAPS, body, namespace)
        return "created"
    except errors.AlreadyExists:
        kube.patch(CONFIGMAPS, name, {"data": body["data"]}, namespace)
        return "updated"
