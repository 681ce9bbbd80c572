"""kubectl against the real node's cluster, waiting on a condition with a deadline, and waiting
for the machine's one real node."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from localcluster import cluster, node

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


def another_node_runs() -> bool:
    owner = node.LOCK_FILE.read_text().strip() if node.LOCK_FILE.exists() else ""
    return bool(owner) and bool(cluster.status(Path(owner))["running"])


def up_when_free(state_dir: Path, before: Callable[[], None] | None = None) -> cluster.State:
    """``up --node kubelet`` once no other real node holds the machine's lock; ``before``
    runs right before each try (a snapshot of the host must not see the other node). The
    lock refuses before anything starts, so trying again is safe."""
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        if another_node_runs() and time.monotonic() < deadline:
            time.sleep(5)
            continue
        if before is not None:
            before()
        try:
            return cluster.up(state_dir, node_mode="kubelet", timeout=240)
        except cluster.ClusterError as exc:
            if "already runs on this machine" not in str(exc) or time.monotonic() > deadline:
                raise
