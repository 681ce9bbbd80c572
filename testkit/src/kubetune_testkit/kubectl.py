"""kubectl against the test cluster, for tests about what a user sees (apply, get as JSON).

`cluster` is anything with the localcluster plugin's `kubectl(*args, check=, stdin=)`.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")


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


@contextmanager
def port_forward(cluster: Any, namespace: str, target: str, port: int) -> Iterator[str]:
    """`kubectl port-forward -n NAMESPACE TARGET :PORT` while the block runs, yielding the
    local `127.0.0.1:<port>` kubectl chose (for what the API server's proxy cannot carry,
    such as gRPC). `cluster` also needs `kubectl_path` and `kubeconfig`."""
    cmd = [cluster.kubectl_path, "--kubeconfig", str(cluster.kubeconfig), "port-forward"]
    with subprocess.Popen(
        [*cmd, "-n", namespace, target, f":{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        # A kubectl that never says where it listens is stopped, so readline returns.
        timer = threading.Timer(60, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None and proc.stderr is not None
            found = _FORWARDING.search(proc.stdout.readline())
            timer.cancel()
            if found is None:
                proc.kill()
                raise AssertionError(f"kubectl port-forward {target} failed: {proc.stderr.read()}")
            yield f"127.0.0.1:{found.group(1)}"
        finally:
            timer.cancel()
            proc.kill()
