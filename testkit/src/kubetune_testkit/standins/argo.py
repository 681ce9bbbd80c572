"""Stand-in for the Argo Workflows controller (emissary executor), for single-step workflows.

The entrypoint is a `container` template, as in Katib's Argo example's training step: one pod
`<workflow>-<template>` with init container `init`, containers `wait` and `main`; `main` runs
the step's command under a wrapper that records its exit code in /var/run/argo (as emissary
does), `wait` stays up until that record exists, stops the sidecars and exits. Labels
`workflows.argoproj.io/workflow` and `.../completed`, annotation `.../node-name`; the
Workflow's `status.phase` goes Pending -> Running -> Succeeded / Failed, taken from `main`'s
exit code, not from the pod's phase (a killed sidecar must not fail the workflow). With
`sidecar_python`, the pod also has an istio-style proxy sidecar that never exits by itself.
The minimal CRD has no status subresource, so the stand-in writes the main resource.
Not modelled: DAGs, steps, outputs.
"""

from __future__ import annotations

import shlex
from typing import Any

from kubetune.kube import PODS, Kube, Resource
from kubetune.runtime import Context, Key
from kubetune_testkit.standins import OperatorStandIn, now

WORKFLOWS = Resource("argoproj.io", "v1alpha1", "workflows", "Workflow")
A = "workflows.argoproj.io/"
RUN = "/var/run/argo"
EXITCODE = f"{RUN}/ctr/main/exitcode"
EXEC_IMAGE = "quay.io/argoproj/argoexec:v3.6.0"
MOUNT = [{"name": "var-run-argo", "mountPath": RUN}]
PROXY_MARK = "istio-proxy-standin"
DONE = ("Succeeded", "Failed", "Error")


def _proxy(python: str) -> dict[str, Any]:
    """A sidecar that runs until SIGTERM, findable by its mark on the command line."""
    code = (
        f"import signal, sys, time; sys.argv[0] = '{PROXY_MARK}'; "
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); time.sleep(10**6)"
    )
    return {
        "name": "istio-proxy",
        "image": "istio/proxyv2:1.24.0",
        "command": [python, "-c", code, PROXY_MARK],
    }


def _main_exit_code(pod: dict[str, Any]) -> int | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if status["name"] == "main" and terminated:
            return int(terminated.get("exitCode", 1))
    return None


class ArgoWorkflowStandIn(OperatorStandIn):
    """Runs Workflows of one namespace on kubetune's runtime, in the test process."""

    def __init__(self, kube: Kube, namespace: str, sidecar_python: str | None = None) -> None:
        name = "standin-argo-workflow-controller"
        super().__init__(name, kube, namespace, WORKFLOWS, f"{A}workflow")
        self.sidecar_python = sidecar_python

    def _pod(self, wf: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
        name = wf["metadata"]["name"]
        container = dict(template["container"])
        argv = [*(container.pop("command", None) or []), *(container.pop("args", None) or [])]
        script = f"{shlex.join(argv)}; rc=$?; mkdir -p {RUN}/ctr/main; echo $rc > {EXITCODE}"
        main = {**container, "name": "main", "command": ["sh", "-c", script + "; exit $rc"]}
        main["volumeMounts"] = [*(container.get("volumeMounts") or []), *MOUNT]
        wait = f"while [ ! -e {EXITCODE} ]; do sleep 0.1; done"
        containers = [main]
        if self.sidecar_python:
            wait += f"; pkill -TERM -f {PROXY_MARK}; true"
            containers.append(_proxy(self.sidecar_python))
        waiter = {"name": "wait", "image": EXEC_IMAGE, "command": ["sh", "-c", wait]}
        meta = template.get("metadata") or {}
        spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 2,
            "volumes": [{"name": "var-run-argo", "emptyDir": {}}],
            "initContainers": [
                {"name": "init", "image": EXEC_IMAGE, "command": ["true"], "volumeMounts": MOUNT}
            ],
            "containers": [{**waiter, "volumeMounts": MOUNT}, *containers],
        }
        account = wf["spec"].get("serviceAccountName")
        if account:
            spec["serviceAccountName"] = account
        labels = {**(meta.get("labels") or {}), f"{A}workflow": name, f"{A}completed": "false"}
        annotations = {**(meta.get("annotations") or {}), f"{A}node-name": name}
        return self.owned_pod(wf, f"{name}-{template['name']}", labels, annotations, spec)

    def reconcile(self, ctx: Context, key: Key) -> None:
        wf = self.live(WORKFLOWS, key)
        if wf is None:
            return
        status = dict(wf.get("status") or {})
        if status.get("phase") in DONE:
            return
        templates = {t["name"]: t for t in wf["spec"].get("templates") or []}
        entry = templates.get(wf["spec"].get("entrypoint", ""))
        if entry is None or "container" not in entry:
            status.update(phase="Error", message="stand-in supports a container entrypoint only")
        else:
            pod = self._pod(wf, entry)
            current = self.kube.get_or_none(PODS, pod["metadata"]["name"], key.namespace)
            if current is None:
                current = self.create_pod(pod, key.namespace)
            status.setdefault("startedAt", now())
            code = _main_exit_code(current)
            if code is None:
                running = (current.get("status") or {}).get("phase") == "Running"
                status["phase"] = "Running" if running else "Pending"
            else:
                status["phase"] = "Succeeded" if code == 0 else "Failed"
                status["finishedAt"] = now()
                status["message"] = "" if code == 0 else f"Error (exit code {code})"
                self.kube.patch(
                    PODS,
                    pod["metadata"]["name"],
                    {"metadata": {"labels": {f"{A}completed": "true"}}},
                    key.namespace,
                )
        # The minimal CRD has no status subresource: the main resource carries the status.
        self.write_status(WORKFLOWS, wf, status, "")
