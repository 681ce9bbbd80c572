"""Which Trial a pod runs for, proven by the owner chain the trial-controller makes.

The trial-controller creates one job per Trial: the Trial's `spec.runSpec` (its apiVersion and
kind), named after the Trial, in the Trial's namespace, with the Trial as its controller
reference. That job's controller (the Job controller, the training-operator, Argo...) makes the
pods, each with its own controller reference. So a pod runs for a Trial only when following
CONTROLLER references from the pod (pod -> ... -> job) ends at exactly that job, and the job's
controller reference is the Trial by uid. Anything looser lets the creator of a pod choose its
Trial: owner references and labels are written by whoever creates the object, and a Trial's
uid is readable by anyone who may read the Trial. In particular:

* a pod whose controller reference is the Trial itself is refused (the trial-controller never
  creates pods, the reference was written by someone else);
* a non-controller reference is never followed (anyone may add one);
* the object whose controller is the Trial must be the job the Trial names (same apiVersion,
  kind and name as its runSpec), not any object someone made with that controller reference;
* every object fetched must carry the uid its reference names, so an object recreated under
  the same name does not pass for the old one.

Used by the webhook's `trials/status` authorizer and by db-manager's report authorization.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from kubetune import errors
from kubetune.kube import PODS, Kube

POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
"""User extra of a pod-bound service-account token: the pod it was issued for."""
TRIAL_GROUP = "kubeflow.org"
TRIAL_KIND = "Trial"
MAX_OWNER_DEPTH = 8
"""Controller hops from a pod to its Trial's job (Pod -> TaskRun -> PipelineRun is 2)."""
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")

Obj = dict[str, Any]


class CannotCheck(Exception):
    """The pod or one of its owners could not be read: no verdict, the caller retries."""


class Reader(Protocol):
    def pod(self, namespace: str, name: str) -> Obj | None:
        """The pod, None when it does not exist. Raises `CannotCheck`."""
        ...

    def owner(self, api_version: str, kind: str, name: str, namespace: str, uid: str) -> Obj | None:
        """An object of the chain (a job of any kind, the Trial), None when it does not
        exist; `uid` is the one its reference names (a cache may answer with a copy of that
        uid only). Raises `CannotCheck`."""
        ...


def one_extra(extra: Any, key: str) -> str:
    """The one value of `key` in a user's extra (`POD_NAME`, `POD_UID`), else ""."""
    values = extra.get(key) if isinstance(extra, dict) else None
    if isinstance(values, list) and len(values) == 1 and isinstance(values[0], str):
        return values[0]
    return ""


def meta(obj: Any) -> Obj:
    found = obj.get("metadata") if isinstance(obj, dict) else None
    return found if isinstance(found, dict) else {}


def _group(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def controller_of(obj: Any) -> Obj | None:
    """The object's one controller reference with every field set, else None (none, or more
    than one, which the API server never stores)."""
    refs = [
        r
        for r in meta(obj).get("ownerReferences") or []
        if isinstance(r, dict) and r.get("controller") is True
    ]
    if len(refs) != 1:
        return None
    ref = refs[0]
    fields = (ref.get("apiVersion"), ref.get("kind"), ref.get("name"), ref.get("uid"))
    if not all(isinstance(v, str) and v for v in fields):
        return None
    return ref


def _is_trial(ref: Obj) -> bool:
    return bool(ref["kind"] == TRIAL_KIND and _group(ref["apiVersion"]) == TRIAL_GROUP)


def is_job_of(job: Any, trial: Any) -> bool:
    """Is `job` the one the trial-controller makes for `trial` (kind and name of its runSpec,
    the Trial as controller by uid)?"""
    run_spec = ((trial.get("spec") if isinstance(trial, dict) else None) or {}).get("runSpec")
    run_spec = run_spec if isinstance(run_spec, dict) else {}
    ref = controller_of(job)
    return bool(
        ref is not None
        and _is_trial(ref)
        and ref["uid"] == meta(trial).get("uid")
        and isinstance(job, dict)
        and job.get("apiVersion") == run_spec.get("apiVersion")
        and job.get("kind") == run_spec.get("kind")
        and meta(job).get("name") == meta(trial).get("name")
    )


def trial_of_pod(pod: Obj, namespace: str, reader: Reader) -> tuple[str, str] | None:
    """(name, uid) of the Trial whose job the pod's controller chain reaches, None when it
    reaches none (see the module docstring for what counts). Raises `CannotCheck`."""
    obj = pod
    for _ in range(MAX_OWNER_DEPTH):
        ref = controller_of(obj)
        if ref is None or not _NAME.match(ref["name"]):
            return None
        if _is_trial(ref):
            if obj is pod:
                return None  # the trial-controller never creates pods
            trial = reader.owner(
                ref["apiVersion"], TRIAL_KIND, ref["name"], namespace, uid=ref["uid"]
            )
            if trial is None or not is_job_of(obj, trial):
                return None
            return ref["name"], ref["uid"]
        owner = reader.owner(ref["apiVersion"], ref["kind"], ref["name"], namespace, uid=ref["uid"])
        if owner is None or meta(owner).get("uid") != ref["uid"]:
            return None
        obj = owner
    return None


class KubeReader:
    """`Reader` over the API server: never cached, a pod's existence must be current."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def pod(self, namespace: str, name: str) -> Obj | None:
        if not _NAME.match(name):
            return None
        try:
            return self.kube.get_or_none(PODS, name, namespace)
        except errors.ApiError as e:
            raise CannotCheck(str(e)) from e
        except Exception as e:
            raise CannotCheck(f"API server unreachable: {e}") from e

    def owner(
        self, api_version: str, kind: str, name: str, namespace: str, uid: str = ""
    ) -> Obj | None:
        try:
            resource = self.kube.resource_for(api_version, kind)
            if not resource.namespaced:
                return None
            return self.kube.get_or_none(resource, name, namespace)
        except errors.ApiError as e:
            raise CannotCheck(f"{kind} {name}: {e}") from e
        except Exception as e:
            raise CannotCheck(f"API server unreachable: {e}") from e
