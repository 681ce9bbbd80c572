"""The webhook's reads from the API server, behind the seams `validating` and `injecting` use.

Everything is a GET (namespace, ConfigMap, PersistentVolume, a pod's owners, the Trial); the
ClusterRole in kustomize/base/webhook grants exactly these. Errors other than NotFound become
`ClusterError`, so the rules can say "cannot check, retry" instead of guessing (a kind that
discovery does not know is `KindNotInstalled`, a definite answer); a name that is
no valid object name raises `kubetune.errors.InvalidName` before any request (`kubetune.kube`).

A GET costs milliseconds, the rules themselves a fraction of one, so two answers are kept for
`cache_seconds` (admission latency budget; see bench/webhook_latency.py):

* a namespace that HAS the injection label (a namespace just labelled is seen at once, since
  negative answers are never kept; one that lost its label passes for a few more seconds);
* a pod's owners and their Trial, keyed by name and checked against the `uid` of the owner
  reference, so a job recreated under the same name is fetched again. Owner references and a
  Trial's spec do not change after creation.

PersistentVolume, ConfigMap, Secret and ServiceAccount lookups are never cached: their answers
must be current (a pull secret is read only for the pod being admitted, `pullsecrets`).

The `trials/status` check (`OwnerChain`) reads the calling pod on every write (its existence
must be current) and the pod's owners through the same cache: a trial's collector writes its
status several times, and the trial pod's admission has just read the same job and Trial.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from kubetune import errors, naming
from kubetune.clock import SYSTEM, Clock
from kubetune.kube import (
    CONFIGMAPS,
    NAMESPACES,
    PERSISTENT_VOLUMES,
    SECRETS,
    SERVICE_ACCOUNTS,
    SUBJECT_ACCESS_REVIEWS,
    Kube,
    Resource,
)
from kubetune.trialpods import CannotCheck, KubeReader
from kubetune_webhook.permissions import Permission
from kubetune_webhook.validating import ClusterError, KindNotInstalled


class TTLCache:
    """A small thread-safe LRU whose entries expire after `ttl` seconds (0 = keep nothing)."""

    def __init__(self, ttl: float, size: int = 4096, clock: Clock = SYSTEM) -> None:
        self.ttl = ttl
        self.size = size
        self.clock = clock
        self._items: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        if self.ttl <= 0:
            return None
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                return None
            if self.clock.monotonic() - entry[0] > self.ttl:
                del self._items[key]
                return None
            self._items.move_to_end(key)
            return entry[1]

    def put(self, key: Any, value: Any) -> None:
        if self.ttl <= 0:
            return
        with self._lock:
            self._items[key] = (self.clock.monotonic(), value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


class KubeCluster:
    """`validating.Cluster` and `injecting.Owners` over `kubetune.kube.Kube`."""

    def __init__(self, kube: Kube, cache_seconds: float = 10.0) -> None:
        self.kube = kube
        self._resources: dict[tuple[str, str], Resource] = {}
        self._lock = threading.Lock()
        self._labelled = TTLCache(cache_seconds)
        self._objects = TTLCache(cache_seconds)

    def _get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.kube.get_or_none(res, name, namespace)
        except errors.InvalidName:
            raise  # not a lookup failure: the name can be no object's; the caller says so
        except errors.ApiError as e:
            raise ClusterError(str(e)) from e
        except Exception as e:
            raise ClusterError(f"API server unreachable: {e}") from e

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        cached = self._labelled.get(name)
        if cached is not None:
            return dict(cached)
        obj = self._get(NAMESPACES, name)
        if obj is None:
            return None
        labels = dict((obj.get("metadata") or {}).get("labels") or {})
        if labels.get(naming.LABEL_INJECTION) == naming.INJECTION_ENABLED:
            self._labelled.put(name, labels)
        return labels

    def config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        obj = self._get(CONFIGMAPS, name, namespace)
        return None if obj is None else dict(obj.get("data") or {})

    def persistent_volume(self, name: str) -> dict[str, Any] | None:
        return self._get(PERSISTENT_VOLUMES, name)

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(SECRETS, name, namespace)

    def service_account(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(SERVICE_ACCOUNTS, name, namespace)

    def may(self, user: dict[str, Any], permission: Permission) -> bool:
        """Ask the API server's authorizers (never cached: rights change at any time)."""
        spec: dict[str, Any] = {
            "user": str(user.get("username") or ""),
            "groups": list(user.get("groups") or []),
            "extra": dict(user.get("extra") or {}),
            "resourceAttributes": {
                "verb": permission.verb,
                "group": permission.group,
                "resource": permission.resource,
                "namespace": permission.namespace,
                **({"name": permission.name} if permission.name else {}),
            },
        }
        if user.get("uid"):
            spec["uid"] = str(user["uid"])
        review = {"apiVersion": SUBJECT_ACCESS_REVIEWS.api_version, "kind": "SubjectAccessReview"}
        try:
            answer = self.kube.create(SUBJECT_ACCESS_REVIEWS, {**review, "spec": spec})
        except errors.ApiError as e:
            raise ClusterError(str(e)) from e
        except Exception as e:
            raise ClusterError(f"API server unreachable: {e}") from e
        return bool((answer.get("status") or {}).get("allowed"))

    def resource(self, api_version: str, kind: str) -> Resource:
        """Discovery, cached: owner kinds are few and do not change while we run."""
        key = (api_version, kind)
        with self._lock:
            found = self._resources.get(key)
        if found is None:
            try:
                found = self.kube.resource_for(api_version, kind)
            except errors.InvalidName:
                raise
            except errors.NotFound as e:  # not cached: its CRD may be installed any moment
                raise KindNotInstalled(str(e)) from e
            except errors.ApiError as e:
                raise ClusterError(str(e)) from e
            except Exception as e:
                raise ClusterError(f"API server unreachable: {e}") from e
            with self._lock:
                self._resources[key] = found
        return found

    def get_object(
        self, api_version: str, kind: str, name: str, namespace: str, uid: str | None = None
    ) -> dict[str, Any] | None:
        key = (api_version, kind, namespace, name)
        cached = self._objects.get(key)
        if cached is not None and uid is not None and cached["metadata"].get("uid") == uid:
            return dict(cached)
        res = self.resource(api_version, kind)
        obj = self._get(res, name, namespace if res.namespaced else None)
        if obj is not None and isinstance(obj.get("metadata"), dict):
            self._objects.put(key, obj)
        return obj


class OwnerChain:
    """`kubetune.trialpods.Reader` of the `trials/status` check: the pod from the API server,
    its owners (the job, the Trial) from `KubeCluster.get_object`'s cache, which answers only
    with an object of the uid the reference names (a recreated job or Trial is read again)."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.pods = KubeReader(cluster.kube)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pods.pod(namespace, name)

    def owner(
        self, api_version: str, kind: str, name: str, namespace: str, uid: str
    ) -> dict[str, Any] | None:
        try:
            if not self.cluster.resource(api_version, kind).namespaced:
                return None
            return self.cluster.get_object(api_version, kind, name, namespace, uid)
        except (ClusterError, KindNotInstalled) as e:
            raise CannotCheck(f"{kind} {name}: {e}") from e
