"""The cluster's kubectl as a subprocess, shared by the installers (operators on the real
node, upstream Katib), and the report a failed install prints about its pods."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass


class KubectlError(RuntimeError):
    """kubectl exited non-zero; the message carries its command and stderr."""


@dataclass(frozen=True)
class Kubectl:
    """One cluster's kubectl: the binary and the kubeconfig it is run with."""

    binary: str
    kubeconfig: str

    def run(
        self, *args: str, stdin: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Output captured; a failure is the caller's to read (``returncode``)."""
        return subprocess.run(
            [self.binary, "--kubeconfig", self.kubeconfig, *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )

    def out(self, *args: str, stdin: str | None = None, timeout: float = 300) -> str:
        """Standard output; :class:`KubectlError` when kubectl fails."""
        proc = self.run(*args, stdin=stdin, timeout=timeout)
        if proc.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(args[:3])} failed: {proc.stderr.strip()}")
        return proc.stdout


def pods_report(kubectl: Kubectl, namespace: str, log_lines: int = 15) -> str:
    """Each pod of ``namespace``: phase, every container's state and restarts, and the last
    lines of its log; then the namespace's warning events. What a failed install shows, for a
    CI log nobody watched."""
    failed = (KubectlError, subprocess.TimeoutExpired)
    lines: list[str] = []
    try:
        pods = json.loads(kubectl.out("-n", namespace, "get", "pods", "-o", "json"))
    except (*failed, ValueError) as exc:
        return f"pods in {namespace}: {exc}"
    for pod in pods.get("items", []):
        name = pod["metadata"]["name"]
        status = pod.get("status", {})
        lines.append(f"pod {namespace}/{name}: {status.get('phase')}")
        for cs in status.get("containerStatuses") or []:
            state = json.dumps(cs.get("state", {}))
            lines.append(f"  {cs['name']}: {state} restarts={cs.get('restartCount')}")
        try:
            log = kubectl.out("-n", namespace, "logs", name, f"--tail={log_lines}")
        except failed as exc:
            log = str(exc)
        lines += [f"  | {line}" for line in log.splitlines()]
    try:
        events = kubectl.out(
            "-n", namespace, "get", "events", "--field-selector=type=Warning", "-o", "wide"
        )
    except failed as exc:
        events = str(exc)
    lines += [f"  event: {line}" for line in events.splitlines()[-log_lines:]]
    return "\n".join(lines)
