"""A stand-in for the Argo Workflows controller, as far as a Trial's pods and status see it.

Only what the real controller shows: one pod per Workflow (a container-template entrypoint)
with Argo's `init` and `wait` containers beside `main`, `main`'s exit code handed to `wait`
through /var/run/argo, sidecars (here an istio-style proxy that never exits by itself) stopped
by `wait` once `main` has ended, and `status.phase` taken from `main`'s exit code, not from the
pod's phase (a killed sidecar must not fail the workflow). The real CRD is installed, taken
from Argo's own Go module by `localcluster build` (`localcluster.thirdparty`).
"""

from __future__ import annotations

import shlex
from typing import Any

from kubetune import errors
from kubetune.kube import PODS, Kube, Resource
from kubetune.runtime import Context, Controller, Key, owner_keys

WORKFLOWS = Resource("argoproj.io", "v1alpha1", "workflows", "Workflow")
RUN = "/var/run/argo"
EXITCODE = f"{RUN}/ctr/main/exitcode"
MOUNT = [{"name": "var-run-argo", "mountPath": RUN}]
EXEC_IMAGE = "quay.io/argoproj/argoexec:v3.6.0"
PROXY_MARK = "istio-proxy-standin"


def _pod(workflow: dict[str, Any], template: dict[str, Any], python: str) -> dict[str, Any]:
    name = workflow["metadata"]["name"]
    container = dict(template["container"])
    argv = [*(container.pop("command", None) or []), *(container.pop("args", None) or [])]
    main_script = f"{shlex.join(argv)}; rc=$?; mkdir -p {RUN}/ctr/main; echo $rc > {EXITCODE}"
    main = {**container, "name": "main", "command": ["sh", "-c", main_script + "; exit $rc"]}
    main["volumeMounts"] = [*(container.get("volumeMounts") or []), *MOUNT]
    wait_script = (
        f"while [ ! -e {EXITCODE} ]; do sleep 0.1; done; pkill -TERM -f {PROXY_MARK}; true"
    )
    proxy = (
        f"import signal, sys, time; sys.argv[0] = '{PROXY_MARK}'; "
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); time.sleep(10**6)"
    )
    labels = (template.get("metadata") or {}).get("labels") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{template['name']}",
            "labels": {**labels, "workflows.argoproj.io/workflow": name},
            "ownerReferences": [
                {
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "Workflow",
                    "name": name,
                    "uid": workflow["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 2,
            "volumes": [{"name": "var-run-argo", "emptyDir": {}}],
            "initContainers": [
                {"name": "init", "image": EXEC_IMAGE, "command": ["true"], "volumeMounts": MOUNT}
            ],
            "containers": [
                {
                    "name": "wait",
                    "image": EXEC_IMAGE,
                    "command": ["sh", "-c", wait_script],
                    "volumeMounts": MOUNT,
                },
                main,
                {
                    "name": "istio-proxy",
                    "image": "istio/proxyv2:1.24.0",
                    "command": [python, "-c", proxy, PROXY_MARK],
                },
            ],
        },
    }


def _main_exit_code(pod: dict[str, Any]) -> int | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if status["name"] == "main" and terminated:
            return int(terminated.get("exitCode", 1))
    return None


class ArgoControllerStandIn:
    """Runs Workflows of one namespace on kubetune's runtime, in the test process."""

    def __init__(self, kube: Kube, namespace: str, python: str) -> None:
        self.kube = kube
        self.python = python
        self.controller = Controller("standin-argo-workflow-controller", self.reconcile)
        self.controller.watch(WORKFLOWS, namespace=namespace)
        self.controller.watch(
            PODS,
            owner_keys("Workflow", "argoproj.io/v1alpha1"),
            namespace=namespace,
            label_selector="workflows.argoproj.io/workflow",
        )

    def reconcile(self, ctx: Context, key: Key) -> None:
        workflow = self.kube.get_or_none(WORKFLOWS, key.name, key.namespace)
        if workflow is None or workflow["metadata"].get("deletionTimestamp"):
            return
        status = dict(workflow.get("status") or {})
        if status.get("phase") in ("Succeeded", "Failed", "Error"):
            return
        templates = {t["name"]: t for t in workflow["spec"].get("templates") or []}
        entry = templates.get(workflow["spec"].get("entrypoint", ""))
        if entry is None or "container" not in entry:
            status.update(phase="Error", message="the stand-in runs a container entrypoint only")
        else:
            pod = _pod(workflow, entry, self.python)
            current = self.kube.get_or_none(PODS, pod["metadata"]["name"], key.namespace)
            if current is None:
                try:
                    current = self.kube.create(PODS, pod, key.namespace)
                except errors.AlreadyExists:
                    current = self.kube.get(PODS, pod["metadata"]["name"], key.namespace)
            code = _main_exit_code(current)
            if code is None:
                running = (current.get("status") or {}).get("phase") == "Running"
                status["phase"] = "Running" if running else "Pending"
            else:
                status["phase"] = "Succeeded" if code == 0 else "Failed"
        if status != (workflow.get("status") or {}):
            self.kube.patch(WORKFLOWS, key.name, {"status": status}, key.namespace)
