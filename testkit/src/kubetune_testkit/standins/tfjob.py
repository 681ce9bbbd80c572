"""Stand-in for the Kubeflow training operator's TFJob controller (v1.9 behaviour towards pods and
status): one pod per replica named `<job>-<type>-<index>`, the operator's labels, `job-role:
master` on the chief/master (worker 0 when there is none), and `status.conditions` Created,
Running, Succeeded / Failed (Running turned False at the end), `replicaStatuses`, times.
Not modelled: restarts, PS/evaluator semantics, cleanPodPolicy, TF_CONFIG, services.
"""

from __future__ import annotations

import copy
from typing import Any

from kubetune.kube import PODS, Kube, Resource
from kubetune.runtime import Context, Key
from kubetune_testkit.standins import OperatorStandIn, now, pod_phase_counts

TFJOBS = Resource("kubeflow.org", "v1", "tfjobs", "TFJob")
OPERATOR = "tfjob-controller"
L = "training.kubeflow.org/"
MASTER_TYPES = ("chief", "master")


def _condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    stamp = now()
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
    }


def _set(conds: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    for c in conds:
        if c["type"] == new["type"] and c["status"] == new["status"]:
            return conds
    return [c for c in conds if c["type"] != new["type"]] + [new]


class TFJobOperatorStandIn(OperatorStandIn):
    """Runs TFJobs of one namespace on kubetune's runtime, in the test process."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        selector = f"{L}operator-name={OPERATOR}"
        super().__init__("standin-tfjob-operator", kube, namespace, TFJOBS, selector)

    def _pod(self, job: dict[str, Any], rtype: str, index: int, master: bool) -> dict[str, Any]:
        name = job["metadata"]["name"]
        template = copy.deepcopy(job["spec"]["tfReplicaSpecs"][rtype].get("template") or {})
        meta = template.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        labels.update(
            {
                f"{L}job-name": name,
                f"{L}replica-type": rtype.lower(),
                f"{L}replica-index": str(index),
                f"{L}operator-name": OPERATOR,
            }
        )
        if master:
            labels[f"{L}job-role"] = "master"
        spec = template.get("spec") or {}
        spec.setdefault("restartPolicy", "Never")
        annotations = dict(meta.get("annotations") or {})
        return self.owned_pod(job, f"{name}-{rtype.lower()}-{index}", labels, annotations, spec)

    def reconcile(self, ctx: Context, key: Key) -> None:
        job = self.live(TFJOBS, key)
        if job is None:
            return
        name = key.name
        specs: dict[str, Any] = job["spec"].get("tfReplicaSpecs") or {}
        has_master = any(t.lower() in MASTER_TYPES for t in specs)
        pods = {
            p["metadata"]["name"]: p
            for p in self.kube.list_all(PODS, key.namespace, label_selector=f"{L}job-name={name}")
        }
        status = dict(job.get("status") or {})
        conds: list[dict[str, Any]] = list(status.get("conditions") or [])
        done = any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conds)
        replica_statuses: dict[str, Any] = {}
        master_done = False
        any_failed = False
        any_running = False
        for rtype, rspec in specs.items():
            owned = []
            for index in range(int(rspec.get("replicas") or 1)):
                master = (
                    rtype.lower() in MASTER_TYPES or (not has_master and rtype.lower() == "worker")
                ) and index == 0
                pod = self._pod(job, rtype, index, master)
                current = pods.get(pod["metadata"]["name"])
                if current is None and not done:
                    current = self.create_pod(pod, key.namespace)
                if current is None:
                    continue
                owned.append(current)
                phase = (current.get("status") or {}).get("phase")
                any_running |= phase == "Running"
                any_failed |= phase == "Failed"
                if master and phase == "Succeeded":
                    master_done = True
            replica_statuses[rtype] = pod_phase_counts(owned)
        kind_ns = f"TFJob {key.namespace}/{name}"
        conds = _set(conds, _condition("Created", "True", "TFJobCreated", f"{kind_ns} is created."))
        if not done:
            if any_failed:
                conds = _set(conds, _condition("Running", "False", "TFJobFailed", "failed"))
                conds = _set(
                    conds,
                    _condition(
                        "Failed",
                        "True",
                        "TFJobFailed",
                        f"{kind_ns} has failed because a replica failed.",
                    ),
                )
                status["completionTime"] = now()
            elif master_done:  # default success policy: the chief, else worker 0
                conds = _set(conds, _condition("Running", "False", "TFJobSucceeded", "done"))
                conds = _set(
                    conds,
                    _condition(
                        "Succeeded", "True", "TFJobSucceeded", f"{kind_ns} successfully completed."
                    ),
                )
                status["completionTime"] = now()
            elif any_running:
                conds = _set(
                    conds, _condition("Running", "True", "TFJobRunning", f"{kind_ns} is running.")
                )
        status.setdefault("startTime", now())
        status["conditions"] = conds
        status["replicaStatuses"] = replica_statuses
        self.write_status(TFJOBS, job, status, "status")
