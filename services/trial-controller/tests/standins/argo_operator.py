"""Stand-in for the Argo Workflows controller with the emissary executor, for single-step
workflows (the entrypoint is a `container` template, as in Katib's Argo example's training
step): one pod with init container `init`, containers `wait` and `main`; `main` runs the step's
command under a wrapper that records its exit code in /var/run/argo (as emissary does), and
`wait` stays up until that record exists, then exits. Labels
`workflows.argoproj.io/workflow` and `.../completed`, annotation `.../node-name`; the Workflow's
`status.phase` goes Pending -> Running -> Succeeded / Failed (no status subresource in the
minimal CRD, so the stand-in writes the main resource). Not modelled: DAGs, steps, outputs.
"""

from __future__ import annotations

import shlex
from typing import Any

from kubetune import errors
from kubetune.kube import PODS, Kube, Resource
from kubetune.runtime import Context, Controller, Key, owner_keys

from . import now

WORKFLOWS = Resource("argoproj.io", "v1alpha1", "workflows", "Workflow")
A = "workflows.argoproj.io/"
RUN = "/var/run/argo"
EXEC_IMAGE = "quay.io/argoproj/argoexec:v3.6.0"
MOUNT = [{"name": "var-run-argo", "mountPath": RUN}]


class ArgoOperatorStandIn:
    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.controller = Controller("standin-argo-workflow-controller", self.reconcile)
        self.controller.watch(WORKFLOWS, namespace=namespace)
        self.controller.watch(
            PODS,
            owner_keys("Workflow", "argoproj.io/v1alpha1"),
            namespace=namespace,
            label_selector=f"{A}workflow",
        )

    def _pod(self, wf: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
        name = wf["metadata"]["name"]
        container = dict(template["container"])
        argv = [*(container.pop("command", None) or []), *(container.pop("args", None) or [])]
        script = (
            f"{shlex.join(argv)}; rc=$?; mkdir -p {RUN}/ctr/main; "
            f"echo $rc > {RUN}/ctr/main/exitcode; exit $rc"
        )
        main = {**container, "name": "main", "command": ["sh", "-c", script]}
        main["volumeMounts"] = [*(container.get("volumeMounts") or []), *MOUNT]
        meta = template.get("metadata") or {}
        spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "volumes": [{"name": "var-run-argo", "emptyDir": {}}],
            "initContainers": [
                {
                    "name": "init",
                    "image": EXEC_IMAGE,
                    "command": ["sh", "-c", "true"],
                    "volumeMounts": MOUNT,
                }
            ],
            "containers": [
                {
                    "name": "wait",
                    "image": EXEC_IMAGE,
                    "command": [
                        "sh",
                        "-c",
                        f"while [ ! -e {RUN}/ctr/main/exitcode ]; do sleep 0.1; done",
                    ],
                    "volumeMounts": MOUNT,
                },
                main,
            ],
        }
        account = wf["spec"].get("serviceAccountName")
        if account:
            spec["serviceAccountName"] = account
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{template['name']}",
                "namespace": wf["metadata"]["namespace"],
                "labels": {
                    **(meta.get("labels") or {}),
                    f"{A}workflow": name,
                    f"{A}completed": "false",
                },
                "annotations": {**(meta.get("annotations") or {}), f"{A}node-name": name},
                "ownerReferences": [
                    {
                        "apiVersion": "argoproj.io/v1alpha1",
                        "kind": "Workflow",
                        "name": name,
                        "uid": wf["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
        }

    def reconcile(self, ctx: Context, key: Key) -> None:
        wf = self.kube.get_or_none(WORKFLOWS, key.name, key.namespace)
        if wf is None or wf["metadata"].get("deletionTimestamp"):
            return
        status = dict(wf.get("status") or {})
        if status.get("phase") in ("Succeeded", "Failed", "Error"):
            return
        templates = {t["name"]: t for t in wf["spec"].get("templates") or []}
        entry = templates.get(wf["spec"].get("entrypoint", ""))
        if entry is None or "container" not in entry:
            status.update(phase="Error", message="stand-in supports a container entrypoint only")
        else:
            pod = self._pod(wf, entry)
            current = self.kube.get_or_none(PODS, pod["metadata"]["name"], key.namespace)
            if current is None:
                try:
                    current = self.kube.create(PODS, pod, key.namespace)
                except errors.AlreadyExists:
                    current = self.kube.get(PODS, pod["metadata"]["name"], key.namespace)
            phase = (current.get("status") or {}).get("phase") or "Pending"
            status.setdefault("startedAt", now())
            if phase in ("Succeeded", "Failed"):
                status["phase"] = phase
                status["finishedAt"] = now()
                status["message"] = "" if phase == "Succeeded" else "Error (exit code 1)"
                self.kube.patch(
                    PODS,
                    pod["metadata"]["name"],
                    {"metadata": {"labels": {f"{A}completed": "true"}}},
                    key.namespace,
                )
            else:
                status["phase"] = "Running" if phase == "Running" else "Pending"
        if status != (wf.get("status") or {}):
            self.kube.patch(
                WORKFLOWS,
                key.name,
                {
                    "metadata": {"resourceVersion": wf["metadata"]["resourceVersion"]},
                    "status": status,
                },
                key.namespace,
            )
