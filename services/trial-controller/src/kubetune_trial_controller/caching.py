"""What the trial-controller keeps of a Trial in its cache.

The controller watches every Trial in its namespaces, and 100,000 of them must fit in a few
hundred MiB. Most are finished, and of a finished Trial the reconcile reads only its identity,
`retainRun`, its job's kind and whether it ended (to delete the job,
`reconciling._delete_job`), so only those are kept: no labels (nothing here selects Trials by
label, and each label is an index entry), only the true conditions it tests. A Trial still
running is kept whole (less the managedFields every informer drops): its next reconcile
renders the job and writes the status with the resourceVersion it read. EarlyStopped alone
is not final: such a Trial may still wait for its observation.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kubetune.conditions import TrialCondition
from kubetune.kube import Obj

FINAL = frozenset(
    {
        TrialCondition.SUCCEEDED,
        TrialCondition.FAILED,
        TrialCondition.KILLED,
        TrialCondition.METRICS_UNAVAILABLE,
    }
)
# The conditions a finished Trial's reconcile tests (`deciding.needs_job`,
# `deciding.awaiting_observation`).
KEPT_CONDITIONS = frozenset(str(t) for t in (*FINAL, TrialCondition.EARLY_STOPPED))
KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")


def is_final(obj: Obj) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(
        isinstance(c, dict) and c.get("type") in FINAL and c.get("status") == "True"
        for c in conditions
    )


def slim(obj: Obj) -> Obj:
    """The Trial as cached (the informer has dropped its managedFields already): a finished
    one reduced to what a finished Trial's reconcile reads."""
    meta = obj.get("metadata") or {}
    if not is_final(obj):
        return obj
    spec = obj.get("spec") or {}
    run_spec = spec.get("runSpec")
    kept_spec: Obj = {}
    if isinstance(run_spec, dict):
        kind = tuple(
            (k, run_spec[k]) for k in ("apiVersion", "kind") if isinstance(run_spec.get(k), str)
        )
        kept_spec["runSpec"] = _shared_run_spec(kind)
    if "retainRun" in spec:
        kept_spec["retainRun"] = spec["retainRun"]
    conditions = (obj.get("status") or {}).get("conditions") or []
    true = tuple(
        str(c["type"])
        for c in conditions
        if isinstance(c, dict) and c.get("type") in KEPT_CONDITIONS and c.get("status") == "True"
    )
    kept: Obj = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    kept["metadata"] = {k: meta[k] for k in KEPT_METADATA if k in meta}
    kept["spec"] = kept_spec
    kept["status"] = _shared_status(true)
    return kept


# The few distinct runSpec kinds and end states are one read-only object each, shared by every
# finished Trial that has them.


@functools.cache
def _shared_run_spec(items: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    return MappingProxyType(dict(items))


@functools.cache
def _shared_status(true_conditions: tuple[str, ...]) -> Mapping[str, Any]:
    conditions = tuple(MappingProxyType({"type": t, "status": "True"}) for t in true_conditions)
    return MappingProxyType({"conditions": conditions})
