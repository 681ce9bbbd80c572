"""The objects behind a Suggestion, as pure functions: Deployment, Service, PVC, PV, RBAC.

Neighbours: `deciding` picks which of these a pass creates, `reconciling` creates them. Names
are Katib's (`kubetune.naming`) unless `owning` chose fallbacks (passed in as `Names`); image,
resources, command and volume settings come from the algorithm's `kubetune.config` entry
(katib-config's `runtime.suggestions[]`, with its `volumeMountPath` and PVC/PV specs for
FromVolume). The algorithm process talks to the API server (not gRPC), so its pods
run as a ServiceAccount bound (per namespace) to the ClusterRole
`kubetune-suggestion-algorithm` unless the config entry names its own `serviceAccountName`.

A Katib-protocol entry (`SuggestionConfig.katib_grpc`) gets the pod Katib would run: the image
with its own entrypoint, the entry's command/args/env/resources, port 6789 and the volume at the
entry's path, and (for a Katib early-stopping image) that image on 6788; plus kubetune's bridge
sidecar (`suggestion-algorithm bridge`), which calls them on localhost and writes the Suggestion's
status. The sidecar uses the same ServiceAccount: it needs exactly the algorithm's rights, and
only it gets the token (the pod's automatic mount is off; a projected token volume goes to the
sidecar alone), so the Katib images have no API credentials at all.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kubetune import incluster, knownresults, naming
from kubetune.api.suggestion import Suggestion
from kubetune.api.warmstart import WarmStartSpec
from kubetune.config import SUGGESTION_IMAGE, EarlyStoppingConfig, SuggestionConfig
from kubetune_suggestion_controller import cleaning

Obj = dict[str, Any]

PORT = 6789
PORT_NAME = "suggestion-api"
CONTAINER = "suggestion"
ALGORITHM_SA = "kubetune-suggestion-algorithm"
ALGORITHM_CLUSTER_ROLE = "kubetune-suggestion-algorithm"
DEFAULT_COMMAND = ["suggestion-algorithm"]
KATIB_PORT_NAME = "api"
EARLY_STOPPING_PORT = 6788
EARLY_STOPPING_PORT_NAME = "earlystop-api"
EARLY_STOPPING_CONTAINER = "early-stopping"
BRIDGE_CONTAINER = "kubetune-bridge"
BRIDGE_VOLUME = "kubetune-bridge"
BRIDGE_DIR = "/var/run/kubetune-bridge"
"""The sidecar's own directory (its readiness file), apart from the algorithm's volume."""
WARM_START_VOLUME = "kubetune-warm-start"
STATE_GROUP = 65532
"""The group the FromVolume state volume is writable for: the pod's fsGroup (kubetune's images
run as 65532:65532; another image's user gets it as a supplementary group)."""
STATE_DIRECTORY_CONTAINER = "state-directory"
STATE_DIRECTORY_SCRIPT = (
    "import os,sys\n"
    "p,g=sys.argv[1],int(sys.argv[2])\n"
    "os.chown(p,-1,g)\n"
    "os.chmod(p,0o775)\n"
    "print('state directory group', g, 'writable')\n"
)
"""Gives the hostPath directory the kubelet made (root's, 0755) to `STATE_GROUP`, writable."""
TOKEN_VOLUME = "kube-api-access"
TOKEN_PATH = str(incluster.SERVICE_ACCOUNT_DIR)  # where the sidecar's `kube.connect` reads it
TOKEN_VOLUME_SOURCE: dict[str, Any] = {
    "projected": {
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                    ]
                }
            },
        ]
    }
}
"""The API credentials, mounted into the bridge sidecar only: a Katib image talks gRPC to its
neighbour and needs none (the pod's automatic token is off, so it gets none)."""
BRIDGE_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "20m", "memory": "64Mi"},
    "limits": {"cpu": "500m", "memory": "256Mi"},
}
READY_FILE = "ready"
"""Written by the algorithm under its data directory after its first pass (readiness)."""
CREATED_DIR = "kubetune.kubeflow.org/host-path"
"""PV annotation: the hostPath directory kubetune derived for it (removed with the PV)."""


def algorithm_of(suggestion: Suggestion) -> str:
    return (suggestion.spec.algorithm.algorithm_name if suggestion.spec.algorithm else "") or ""


def _name(suggestion: Suggestion) -> str:
    return suggestion.metadata.name or ""


def _namespace(suggestion: Suggestion) -> str:
    return suggestion.metadata.namespace or ""


def owner(suggestion: Suggestion) -> Obj:
    return {
        "apiVersion": suggestion.api_version,
        "kind": "Suggestion",
        "name": _name(suggestion),
        "uid": suggestion.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


@dataclass(frozen=True)
class Names:
    """The names of a Suggestion's objects in this pass (`owning` chooses them)."""

    deployment: str
    service: str
    pvc: str
    pv: str

    def of(self, kind: str) -> str:
        return {
            "Deployment": self.deployment,
            "Service": self.service,
            "PersistentVolumeClaim": self.pvc,
            "PersistentVolume": self.pv,
        }[kind]


def katib_names(suggestion: Suggestion) -> Names:
    return Names(
        deployment_name(suggestion),
        service_name(suggestion),
        pvc_name(suggestion),
        pv_name(suggestion),
    )


def labels(suggestion: Suggestion, names: Names | None = None) -> dict[str, str]:
    """Selector labels of the Deployment's pods and the Service."""
    name = _name(suggestion)
    deployment = names.deployment if names else deployment_name(suggestion)
    return naming.suggestion_labels(name, name, deployment)


def _meta(suggestion: Suggestion, name: str, names: Names) -> Obj:
    return {
        "name": name,
        "namespace": _namespace(suggestion),
        "labels": {**(suggestion.metadata.labels or {}), **labels(suggestion, names)},
        "ownerReferences": [owner(suggestion)],
    }


def deployment_name(suggestion: Suggestion) -> str:
    """Katib's name of the Deployment (and of the Service, PVC and PV below)."""
    return naming.suggestion_deployment_name(_name(suggestion), algorithm_of(suggestion))


def service_name(suggestion: Suggestion) -> str:
    return naming.suggestion_service_name(_name(suggestion), algorithm_of(suggestion))


def pvc_name(suggestion: Suggestion) -> str:
    return naming.suggestion_pvc_name(_name(suggestion), algorithm_of(suggestion))


def pv_name(suggestion: Suggestion) -> str:
    return naming.suggestion_pv_name(
        _name(suggestion), algorithm_of(suggestion), _namespace(suggestion)
    )


def mount_path(entry: SuggestionConfig) -> str:
    return entry.volume_mount_path or naming.DEFAULT_SUGGESTION_VOLUME_PATH


def _ready_probe(directory: str) -> Obj:
    return {
        "exec": {"command": ["cat", f"{directory.rstrip('/')}/{READY_FILE}"]},
        "periodSeconds": 2,
    }


def image_port(entry: SuggestionConfig) -> int:
    """The image's gRPC port: Katib's 6789, or (kubetune extension, for images of one's own) the
    first `ports[].containerPort` of the entry."""
    for item in (entry.model_extra or {}).get("ports") or []:
        if isinstance(item, dict) and isinstance(item.get("containerPort"), int):
            return int(item["containerPort"])
    return PORT


def _image_container(
    name: str,
    entry: SuggestionConfig | EarlyStoppingConfig,
    port: tuple[str, int],
    keys: tuple[str, ...],
) -> Obj:
    """A Katib image's container as Katib runs it: its own entrypoint unless the entry sets
    `command`, the entry's `keys` and resources copied."""
    extra = entry.model_extra or {}
    container: Obj = {
        "name": name,
        "image": entry.image,
        "imagePullPolicy": entry.image_pull_policy or "IfNotPresent",
        "ports": [{"name": port[0], "containerPort": port[1]}],
    }
    for key in keys:
        if extra.get(key):
            container[key] = copy.deepcopy(extra[key])
    if entry.resources:
        container["resources"] = copy.deepcopy(entry.resources)
    return container


def _early_stopping_container(entry: EarlyStoppingConfig) -> Obj:
    """A Katib early-stopping image as Katib runs it, on 6788."""
    return _image_container(
        EARLY_STOPPING_CONTAINER,
        entry,
        (EARLY_STOPPING_PORT_NAME, EARLY_STOPPING_PORT),
        ("command", "args", "env"),
    )


def _katib_containers(
    suggestion: Suggestion,
    entry: SuggestionConfig,
    bridge_image: str,
    early_stopping: EarlyStoppingConfig | None,
) -> list[Obj]:
    """The image as Katib runs it (its entrypoint unless the entry sets `command`), the early
    stopping image if any, and the bridge sidecar last."""
    port = image_port(entry)
    algorithm = _image_container(
        CONTAINER,
        entry,
        (KATIB_PORT_NAME, port),
        ("command", "args", "env", "envFrom", "readinessProbe", "livenessProbe"),
    )
    algorithm["volumeMounts"] = [{"name": naming.SUGGESTION_VOLUME, "mountPath": mount_path(entry)}]
    containers = [algorithm]
    args = [
        "bridge",
        "--suggestion",
        _name(suggestion),
        "--endpoint",
        f"localhost:{port}",
        "--data-dir",
        BRIDGE_DIR,
    ]
    if early_stopping is not None:
        containers.append(_early_stopping_container(early_stopping))
        args += ["--early-stopping-endpoint", f"localhost:{EARLY_STOPPING_PORT}"]
    containers.append(
        {
            "name": BRIDGE_CONTAINER,
            "image": bridge_image,
            "imagePullPolicy": entry.image_pull_policy or "IfNotPresent",
            "command": list(DEFAULT_COMMAND),
            "args": args,
            "env": [
                {"name": "KUBETUNE_SUGGESTION", "value": _name(suggestion)},
                {
                    "name": "KUBETUNE_NAMESPACE",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                },
                {"name": "PYTHONUNBUFFERED", "value": "1"},
            ],
            "resources": copy.deepcopy(BRIDGE_RESOURCES),
            "volumeMounts": [
                {"name": BRIDGE_VOLUME, "mountPath": BRIDGE_DIR},
                {"name": TOKEN_VOLUME, "mountPath": TOKEN_PATH, "readOnly": True},
            ],
            "readinessProbe": _ready_probe(BRIDGE_DIR),
        }
    )
    return containers


def deployment(
    suggestion: Suggestion,
    entry: SuggestionConfig,
    volume: bool,
    *,
    bridge_image: str | None = None,
    early_stopping: EarlyStoppingConfig | None = None,
    names: Names | None = None,
    warm_start: WarmStartSpec | None = None,
    state_image: str | None = None,
) -> Obj:
    """The algorithm's Deployment; `bridge_image` (for a Katib-protocol entry) is the sidecar's;
    `warm_start`'s ConfigMaps are mounted (`warm_start_volumes`); `state_image` (with `python3`,
    default the entry's image) makes a hostPath state directory writable (`state_volume_access`)."""
    names = names or katib_names(suggestion)
    name, algorithm = _name(suggestion), algorithm_of(suggestion)
    extra = entry.model_extra or {}
    path = mount_path(entry)
    container: Obj = {
        "name": extra.get("name") or CONTAINER,
        "image": entry.image,
        "imagePullPolicy": entry.image_pull_policy or "IfNotPresent",
        "command": list(extra.get("command") or DEFAULT_COMMAND),
        "args": [
            "--suggestion",
            name,
            "--algorithm",
            algorithm,
            "--data-dir",
            path,
            *(extra.get("args") or []),
        ],
        "env": [
            {"name": "KUBETUNE_SUGGESTION", "value": name},
            {
                "name": "KUBETUNE_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            *(extra.get("env") or []),
        ],
        "ports": [{"name": PORT_NAME, "containerPort": PORT}],
        # A file, not an HTTP probe: the process writes it after its first pass, and it works
        # where pods share the host network (the local cluster) and 6789 is taken twice.
        "readinessProbe": extra.get("readinessProbe") or _ready_probe(path),
    }
    if extra.get("livenessProbe"):
        container["livenessProbe"] = extra["livenessProbe"]
    if entry.resources:
        container["resources"] = copy.deepcopy(entry.resources)
    pod_spec: Obj = {
        "serviceAccountName": entry.service_account_name or ALGORITHM_SA,
        "containers": [container],
    }
    # The state directory: the PVC (FromVolume) or a pod-private emptyDir.
    container["volumeMounts"] = [{"name": naming.SUGGESTION_VOLUME, "mountPath": path}]
    source: Obj = {"emptyDir": {}}
    if volume:
        source = {"persistentVolumeClaim": {"claimName": names.pvc}}
        state_volume_access(pod_spec, entry, path, state_image or entry.image)
    pod_spec["volumes"] = [{"name": naming.SUGGESTION_VOLUME, **source}]
    if entry.katib_grpc():
        pod_spec["containers"] = _katib_containers(
            suggestion, entry, bridge_image or SUGGESTION_IMAGE, early_stopping
        )
        pod_spec["volumes"].append({"name": BRIDGE_VOLUME, "emptyDir": {}})
        pod_spec["volumes"].append({"name": TOKEN_VOLUME, **copy.deepcopy(TOKEN_VOLUME_SOURCE)})
        pod_spec["automountServiceAccountToken"] = False
    elif early_stopping is not None:  # kubetune's algorithm asks the Katib image for the rules
        pod_spec["containers"].append(_early_stopping_container(early_stopping))
        container["args"] += ["--early-stopping-endpoint", f"localhost:{EARLY_STOPPING_PORT}"]
    for volume_entry, mount in warm_start_volumes(warm_start):
        pod_spec["volumes"].append(volume_entry)
        container["volumeMounts"].append(mount)
    pod_labels = {**labels(suggestion, names), naming.ISTIO_INJECT: "false"}
    meta = _meta(suggestion, names.deployment, names)
    meta["labels"][naming.ISTIO_INJECT] = "false"
    meta["annotations"] = dict(suggestion.metadata.annotations or {})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            # never two algorithm processes on one study (and one RWO volume)
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels(suggestion, names)},
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {naming.ISTIO_INJECT: "false"},
                },
                "spec": pod_spec,
            },
        },
    }


def state_volume_access(pod_spec: Obj, entry: SuggestionConfig, path: str, image: str) -> None:
    """Make the state volume writable for the algorithm, which does not run as root.

    The pod's fsGroup `STATE_GROUP` does it for volumes whose ownership the kubelet manages
    (most provisioned ones); a hostPath is not one of them, and the kubelet creates its
    directory as root's, 0755. So for katib-config's hostPath PV an init container, root with
    only CAP_CHOWN and CAP_FOWNER and no privilege escalation, gives that directory to the group
    first (else the algorithm falls back to a temporary directory, and a restarted pod begins
    a fresh study: the real node's e2e found the directory empty).
    """
    pod_spec["securityContext"] = {
        "fsGroup": STATE_GROUP,
        "fsGroupChangePolicy": "OnRootMismatch",
    }
    if "hostPath" not in (entry.persistent_volume_spec or {}):
        return
    pod_spec["initContainers"] = [
        {
            "name": STATE_DIRECTORY_CONTAINER,
            "image": image,
            "imagePullPolicy": entry.image_pull_policy or "IfNotPresent",
            "command": ["python3", "-I", "-S", "-c", STATE_DIRECTORY_SCRIPT],
            "args": [path, str(STATE_GROUP)],
            "resources": copy.deepcopy(cleaning.RESOURCES),
            "securityContext": cleaning.root_with_only(["CHOWN", "FOWNER"]),
            "volumeMounts": [{"name": naming.SUGGESTION_VOLUME, "mountPath": path}],
        }
    ]


def warm_start_volumes(warm_start: WarmStartSpec | None) -> list[tuple[Obj, Obj]]:
    """(volume, mount) of each warm-start ConfigMap, read-only under
    `knownresults.MOUNT_ROOT/<name>`: the kubelet reads them, so the algorithm's ServiceAccount
    needs no right on ConfigMaps. Optional: a missing one is reported by the algorithm (an
    Event and `status.warmStart`), it does not hold the pod in ContainerCreating."""
    out = []
    for i, name in enumerate((warm_start.config_maps if warm_start else None) or []):
        volume_name = f"{WARM_START_VOLUME}-{i}"
        out.append(
            (
                {
                    "name": volume_name,
                    "configMap": {
                        "name": name,
                        "optional": True,
                        "items": [{"key": knownresults.KEY, "path": knownresults.KEY}],
                    },
                },
                {
                    "name": volume_name,
                    "mountPath": f"{knownresults.MOUNT_ROOT}/{name}",
                    "readOnly": True,
                },
            )
        )
    return out


def service(suggestion: Suggestion, names: Names | None = None) -> Obj:
    names = names or katib_names(suggestion)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(suggestion, names.service, names),
        "spec": {
            "type": "ClusterIP",
            "selector": labels(suggestion, names),
            "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT}],
        },
    }


def pvc(suggestion: Suggestion, entry: SuggestionConfig, names: Names | None = None) -> Obj:
    names = names or katib_names(suggestion)
    spec: Obj = copy.deepcopy(entry.persistent_volume_claim_spec or {})
    spec.setdefault("accessModes", ["ReadWriteOnce"])
    spec.setdefault("resources", {}).setdefault("requests", {}).setdefault("storage", "1Gi")
    if entry.persistent_volume_spec:
        spec["volumeName"] = names.pv
        spec.setdefault(
            "storageClassName", entry.persistent_volume_spec.get("storageClassName") or ""
        )
    meta = _meta(suggestion, names.pvc, names)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def pv(suggestion: Suggestion, entry: SuggestionConfig, names: Names | None = None) -> Obj:
    """The PV pre-bound to the claim; a hostPath in the config is a prefix (path = prefix + name).

    Cluster-scoped: no owner reference (the garbage collector ignores namespaced owners of
    cluster-scoped objects); annotations name the Suggestion and its uid instead (`owning`
    reads them), and the Suggestion's finalizer deletes it.
    """
    names = names or katib_names(suggestion)
    name = names.pv
    claim = pvc(suggestion, entry, names)["spec"]
    spec: Obj = copy.deepcopy(entry.persistent_volume_spec or {})
    spec.setdefault("accessModes", claim["accessModes"])
    spec.setdefault("capacity", {"storage": claim["resources"]["requests"]["storage"]})
    spec.setdefault("storageClassName", "")
    spec["persistentVolumeReclaimPolicy"] = "Delete"
    spec["claimRef"] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": _namespace(suggestion),
        "name": names.pvc,
    }
    annotations = {
        naming.ANNOTATION_SUGGESTION: f"{_namespace(suggestion)}/{_name(suggestion)}",
        naming.ANNOTATION_SUGGESTION_UID: suggestion.metadata.uid or "",
    }
    if "hostPath" in spec:
        prefix = (spec["hostPath"] or {}).get("path") or naming.DEFAULT_PV_HOST_PREFIX
        path = naming.suggestion_pv_host_path(name, prefix)
        spec["hostPath"] = {**(spec["hostPath"] or {}), "path": path}
        spec["hostPath"].setdefault("type", "DirectoryOrCreate")
        annotations[CREATED_DIR] = path
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "labels": {
                **(entry.persistent_volume_labels or {}),
                naming.LABEL_SUGGESTION: naming.label_value(_name(suggestion)),
                naming.LABEL_EXPERIMENT: naming.label_value(_name(suggestion)),
            },
            "annotations": annotations,
        },
        "spec": spec,
    }


def service_account(namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": ALGORITHM_SA, "namespace": namespace},
    }


def role_binding(namespace: str) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": ALGORITHM_SA, "namespace": namespace},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": ALGORITHM_CLUSTER_ROLE,
        },
        "subjects": [{"kind": "ServiceAccount", "name": ALGORITHM_SA, "namespace": namespace}],
    }
