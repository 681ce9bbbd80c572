"""kubectl against the test cluster, for tests about what a user sees (apply, get as JSON).

`cluster` is anything with the localcluster plugin's `kubectl(*args, check=, stdin=)`.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any


def apply(
    cluster: Any, manifest: dict[str, Any], *extra: str, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """`kubectl apply -f -` of one object (a user's apply: the webhooks see it). With `check`,
    a refusal fails naming kubectl's message (the webhook's reason), not just its exit code."""
    result: subprocess.CompletedProcess[str] = cluster.kubectl(
        "apply", *extra, "-f", "-", check=False, stdin=json.dumps(manifest)
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl apply refused: {result.stderr.strip()}")
    return result


def get_json(cluster: Any, *args: str) -> Any:
    """`kubectl get ARGS -o json`, parsed."""
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
