"""Read Experiments (a JSON list on stdin) into the Katib SDK's model and write them back
(a JSON list on stdout): what a Katib client sees of each. Run with the SDK's own venv."""

from __future__ import annotations

import json
import sys

from kubeflow.katib import ApiClient

client = ApiClient()
out = []
for manifest in json.load(sys.stdin):
    model = client._ApiClient__deserialize(manifest, "V1beta1Experiment")  # type: ignore[attr-defined]
    out.append(client.sanitize_for_serialization(model))
json.dump(out, sys.stdout)
