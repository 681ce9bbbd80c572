"""What the trial-controller keeps of a Trial in its cache.

The controller watches every Trial in its namespaces and 100,000 of them must fit in a few
hundred MiB. Most are finished, and of a finished Trial the reconcile reads only its identity,
`retainRun`, its job's kind and its conditions (to delete the job, `reconciling._delete_job`),
so only those are kept. A Trial still running is kept whole: its next reconcile renders the job
and writes the status with the resourceVersion it read. `managedFields` nobody here reads.
EarlyStopped is not final enough to slim: such a Trial may still wait for its observation.
"""

from __future__ import annotations

from typing import Any

from kubetune.conditions import TrialCondition

Obj = dict[str, Any]

FINAL = frozenset(
    {
        TrialCondition.SUCCEEDED,
        TrialCondition.FAILED,
        TrialCondition.KILLED,
        TrialCondition.METRICS_UNAVAILABLE,
    }
)
KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp", "labels")


def is_final(obj: Obj) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(
        isinstance(c, dict) and c.get("type") in FINAL and c.get("status") == "True"
        for c in conditions
    )


def slim(obj: Obj) -> Obj:
    """The Trial as cached: without managedFields; a finished one reduced to what a finished
    Trial's reconcile reads."""
    meta = obj.get("metadata") or {}
    if not is_final(obj):
        if "managedFields" not in meta:
            return obj
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    spec = obj.get("spec") or {}
    run_spec = spec.get("runSpec")
    kept_spec: Obj = {}
    if isinstance(run_spec, dict):
        kept_spec["runSpec"] = {k: run_spec[k] for k in ("apiVersion", "kind") if k in run_spec}
    if "retainRun" in spec:
        kept_spec["retainRun"] = spec["retainRun"]
    kept: Obj = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    kept["metadata"] = {k: meta[k] for k in KEPT_METADATA if k in meta}
    kept["spec"] = kept_spec
    kept["status"] = {"conditions": (obj.get("status") or {}).get("conditions") or []}
    return kept
