"""A Trial's pod as the cluster makes it: the Trial's Job, and the pod the Job controller creates
for it, so the pod's controller chain (pod -> Job -> Trial) is the real one. The pod never runs
(a scheduling gate keeps it Pending); a test may set its status through `pods/status`."""

from __future__ import annotations

from typing import Any

from kubetune.kube import JOBS, PODS, SERVICE_ACCOUNTS, Kube
from kubetune_testkit.builders import CONTAINER, owner_reference
from kubetune_testkit.waiting import wait_for

Obj = dict[str, Any]
GATE = {"name": "kubetune.test/never"}


def job_pod(kube: Kube, namespace: str, trial: Obj, account: str = "default") -> Obj:
    """The Trial's Job (named after it, the Trial its controller) and the pod the Job
    controller made for it, once that pod exists."""
    name = trial["metadata"]["name"]
    job = kube.create(
        JOBS,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "ownerReferences": [owner_reference(trial)]},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": {"katib.kubeflow.org/trial": name}},
                    "spec": {
                        "restartPolicy": "Never",
                        "serviceAccountName": account,
                        "schedulingGates": [GATE],
                        "containers": [{"name": CONTAINER, "image": "python:3.12"}],
                    },
                },
            },
        },
        namespace,
    )
    selector = f"batch.kubernetes.io/controller-uid={job['metadata']['uid']}"

    def made() -> Obj | None:
        pods = kube.list_all(PODS, namespace, label_selector=selector)
        return pods[0] if pods else None

    pod: Obj = wait_for(f"the pod of Job {namespace}/{name}", made)
    return pod


def bound_token(kube: Kube, pod: Obj, audience: str | None = None) -> str:
    """A token of the pod's service account bound to the pod (what its projected token is),
    from the TokenRequest API, for `audience` when given (else the API server's)."""
    meta = pod["metadata"]
    spec: Obj = {
        "expirationSeconds": 600,
        "boundObjectRef": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "uid": meta["uid"],
        },
    }
    if audience:
        spec["audiences"] = [audience]
    account = pod["spec"].get("serviceAccountName") or "default"
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    path = SERVICE_ACCOUNTS.path(meta["namespace"], account, "token")
    answer = kube.request("POST", path, body=body)
    return str(answer["status"]["token"])
