"""Which name each object of a Suggestion gets, and whether an object found there is its own.

Katib names the algorithm's Deployment, Service and PVC `<suggestion>-<algorithm>` and the PV
`<suggestion>-<algorithm>-<namespace>`. Algorithm names contain `-`, so two Suggestions can derive
one name (`e1` with multivariate-tpe and `e1-multivariate` with tpe), the PV's even across
namespaces. Katib's name is kept while it is free or the Suggestion's own; when another owner
holds it, the object gets `naming.owned_name` (from the Suggestion's namespace, name and uid, so
a restart derives it again), recorded in the Suggestion's annotation `naming.NAME_ANNOTATIONS`
before the object is made, so later passes and the webhook keep using it after the other owner's
object went.

Nothing is adopted: a namespaced object is the Suggestion's when its controller owner reference
carries the Suggestion's uid; a PV (cluster-scoped, it cannot have a namespaced owner) when its
annotation `naming.ANNOTATION_SUGGESTION_UID` does, or, for a PV made before that annotation
existed, when it is bound to the Suggestion's own claim.
"""

from __future__ import annotations

from typing import Any

from kubetune import naming
from kubetune.api.suggestion import Suggestion
from kubetune_suggestion_controller import composing
from kubetune_suggestion_controller.composing import Names, Obj

LIMITS = {
    "Deployment": naming.LABEL_LIMIT,
    "Service": naming.LABEL_LIMIT,
    "PersistentVolumeClaim": naming.NAME_LIMIT,
    "PersistentVolume": naming.NAME_LIMIT,
}
KINDS = tuple(LIMITS)
"""The claim before the PV: a PV made before the owner annotations is known by its claim."""


def _meta(suggestion: Suggestion) -> dict[str, Any]:
    """The metadata `naming.recorded_name` reads, in wire form."""
    meta = suggestion.metadata
    return {
        "name": meta.name,
        "namespace": meta.namespace,
        "uid": meta.uid,
        "annotations": meta.annotations or {},
    }


def fallback(suggestion: Suggestion, kind: str) -> str:
    """The name the object of `kind` gets when another owner holds Katib's."""
    meta = suggestion.metadata
    return naming.owned_name(
        composing.katib_names(suggestion).of(kind),
        LIMITS[kind],
        meta.namespace or "",
        meta.name or "",
        meta.uid or "",
    )


def recorded(suggestion: Suggestion) -> Names:
    """The names as the Suggestion's annotations record them (Katib's where none is)."""
    katib = composing.katib_names(suggestion)
    meta = _meta(suggestion)
    chosen = [naming.recorded_name(katib.of(k), LIMITS[k], k, meta) for k in KINDS]
    return Names(*chosen)


def owns(suggestion: Suggestion, obj: Obj, claim: Obj | None = None) -> bool:
    """Whether `obj` is this Suggestion's; `claim` is its own PVC (for an older PV)."""
    uid = suggestion.metadata.uid
    meta = obj.get("metadata") or {}
    if not uid:
        return False
    if obj.get("kind") == "PersistentVolume" or "namespace" not in meta:
        annotations = meta.get("annotations") or {}
        if naming.ANNOTATION_SUGGESTION_UID in annotations:
            return bool(annotations[naming.ANNOTATION_SUGGESTION_UID] == uid)
        ref = (obj.get("spec") or {}).get("claimRef") or {}
        claim_uid = ((claim or {}).get("metadata") or {}).get("uid")
        return bool(claim_uid) and ref.get("uid") == claim_uid
    return any(
        ref.get("controller") and ref.get("uid") == uid for ref in meta.get("ownerReferences") or []
    )


def holder(obj: Obj) -> str:
    """Who holds an object that is not the Suggestion's, for the log."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if naming.ANNOTATION_SUGGESTION in annotations:
        return f"Suggestion {annotations[naming.ANNOTATION_SUGGESTION]}"
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return f"{ref.get('kind')} {ref.get('name')}"
    return "no Suggestion"
