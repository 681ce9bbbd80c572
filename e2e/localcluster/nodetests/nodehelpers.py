"""kubectl against the real node's cluster, waiting on a condition with a deadline, and waiting
for the machine's one real node."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from localcluster import cluster

NEEDS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: containerd, the kubelet and kube-proxy run as root"
)
"""The real node's tests' mark: an unprivileged run cannot start a real node."""

WAIT = 120.0


def kubectl(state: cluster.State, *args: str, check: bool = True) -> str:
    proc = subprocess.run(
        [state.kubectl, "--kubeconfig", state.kubeconfig, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=90,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def apply(state: cluster.State, *objs: dict[str, object]) -> None:
    subprocess.run(
        [state.kubectl, "--kubeconfig", state.kubeconfig, "apply", "-f", "-"],
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objs)}),
        text=True,
        check=True,
        capture_output=True,
    )


def wait_for(what: str, check: object, timeout: float = WAIT) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def pod_ready(state: cluster.State, name: str) -> bool:
    out = kubectl(state, "get", "pod", name, "-o", "json", check=False)
    if not out:
        return False
    conds = json.loads(out).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


# Another test env (kubetune's images on the real node) may hold the machine's one real node.
LOCK_WAIT = 1800.0


def up_when_free(state_dir: Path, before: Callable[[], None] | None = None) -> cluster.State:
    """``up --node kubelet`` once no other run holds the machine's one real node."""
    return cluster.up_real_node(state_dir, wait=LOCK_WAIT, before=before, timeout=240)
