"""A running Trial whose pods Katib's webhook injected: reported by name, once.

After a take-over, a Trial Katib started may still run pods with Katib's metrics collector
(`kubetune.katibsidecar`): their training command is Katib's wrapper and their metrics go to
Katib's db-manager, so kubetune cannot collect them. The trial-controller keeps following the
job as for any Trial, and says so on the Trial and its Experiment (a Warning Event each,
recorded once per Trial), with what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubetune import katibsidecar
from kubetune.kube import EXPERIMENTS, TRIALS, Obj
from kubetune.runtime import Context

REASON = "KatibCollectorPod"


def experiment_of(raw: Obj) -> Obj | None:
    """The Trial's Experiment as an Event's involved object (from its controller reference)."""
    namespace = raw["metadata"]["namespace"]
    for ref in raw["metadata"].get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("kind") == EXPERIMENTS.kind and ref.get("name"):
            return {
                "metadata": {"name": ref["name"], "namespace": namespace, "uid": ref.get("uid")}
            }
    return None


def message(trial: str, pods: Sequence[str]) -> str:
    listed = ", ".join(pods)
    return (
        f"Trial {trial} cannot be taken over: its pod(s) {listed} carry Katib's metrics "
        f"collector ({katibsidecar.SIDECAR_NAME} with -s-db), whose metrics go to Katib's "
        f"db-manager, not to kubetune; {katibsidecar.WHAT_TO_DO}"
    )


def report(ctx: Context, raw: Obj, pods: Sequence[dict[str, Any]]) -> bool:
    """Record the Events when any of `pods` is Katib-injected; True when one is."""
    katib = sorted(
        str(p["metadata"]["name"]) for p in pods if katibsidecar.katib_sidecar(p) is not None
    )
    if not katib:
        return False
    name = raw["metadata"]["name"]
    text = message(name, katib)
    cause = f"{REASON}/{name}"
    ctx.record(TRIALS, raw, type_="Warning", reason=REASON, message=text, cause=cause)
    experiment = experiment_of(raw)
    if experiment is not None:
        ctx.record(
            EXPERIMENTS, experiment, type_="Warning", reason=REASON, message=text, cause=cause
        )
    return True
