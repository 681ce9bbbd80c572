"""Every name kubetune derives, and the labels and annotations it puts on objects.

Kubernetes limits names: 63 characters for label values, Service names and anything that ends up
as a label value (Deployment and Job names become pod labels), 253 for most other object names.
Upstream Katib concatenates without a limit and then fails at create time; here a name that would
be too long is cut and given a stable hash suffix of the full name, so the same inputs always give
the same, valid name, and two long names that share a prefix stay distinct.
"""

from __future__ import annotations

import hashlib
import re

LABEL_LIMIT = 63
"""Label values, Service names (DNS-1035 label) and names that become label values."""
NAME_LIMIT = 253
"""DNS-1123 subdomain: PVCs, PVs, ConfigMaps and most other names."""

_HASH_LEN = 8
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""Kubernetes' `rand.String` alphabet (no vowels, no look-alikes), as upstream trial names use."""

DOMAIN = "katib.kubeflow.org"
LABEL_EXPERIMENT = f"{DOMAIN}/experiment"
LABEL_SUGGESTION = f"{DOMAIN}/suggestion"
LABEL_DEPLOYMENT = f"{DOMAIN}/deployment"
LABEL_TRIAL = f"{DOMAIN}/trial"
"""On a trial's job and on every pod template in it (trial-controller), and on the trial's pods
(webhook). The pod webhook's objectSelector requires it: pods without it are never sent to the
webhook, whatever their owners. The owner walk then confirms the pod really is that Trial's."""
LABEL_INJECTION = f"{DOMAIN}/metrics-collector-injection"
INJECTION_ENABLED = "enabled"
ISTIO_INJECT = "sidecar.istio.io/inject"
ANNOTATION_TRAINING_CONTAINERS = "kubetune.kubeflow.org/training-containers"
"""kubetune's extension on a trial's pod template: more containers (comma-separated names)
whose processes must complete, besides the primary one. The collector waits for all of them
and the trial fails if any fails; other containers (sidecars) are never waited for."""

ANNOTATION_RENDER_ERROR = "kubetune.io/render-error"
"""On a Trial the experiment-controller created without runSpec: why its template could not
become one (naming the field and the fix). The trial-controller fails the Trial with it."""

ANNOTATION_SUGGESTION = "kubetune.kubeflow.org/suggestion"
"""On a suggestion PV: `<namespace>/<name>` of the Suggestion that made it (a PV is cluster-scoped
and cannot carry a namespaced owner reference)."""
ANNOTATION_SUGGESTION_UID = "kubetune.kubeflow.org/suggestion-uid"
"""On a suggestion PV: the uid of the Suggestion that made it; only that Suggestion uses or
deletes it."""
NAME_ANNOTATIONS = {
    kind: f"kubetune.kubeflow.org/{short}-name"
    for kind, short in (
        ("Deployment", "deployment"),
        ("Service", "service"),
        ("PersistentVolumeClaim", "pvc"),
        ("PersistentVolume", "pv"),
    )
}
"""On a Suggestion, by kind: the fallback name its object got because another owner holds
Katib's name (`owned_name`); absent while Katib's name is used. Written by the
suggestion-controller, read by it and by the webhook (a PBT trial's claim)."""

DEFAULT_SUGGESTION_VOLUME_PATH = "/opt/katib/data"
DEFAULT_PV_HOST_PREFIX = "/tmp/katib/suggestions/"
METRICS_VOLUME = "metrics-volume"
DB_MANAGER_AUDIENCE = "kubetune-db-manager"
"""Audience of the token a Push trial pod shows db-manager (never the API server's)."""
DB_MANAGER_TOKEN_VOLUME = "kubetune-db-manager-token"
DB_MANAGER_TOKEN_DIR = "/var/run/secrets/kubetune/db-manager"
DB_MANAGER_TOKEN_FILE = f"{DB_MANAGER_TOKEN_DIR}/token"
DB_MANAGER_TOKEN_ENV = "KUBETUNE_DB_MANAGER_TOKEN_FILE"
"""Names the file a Push trial's containers read the token from (the kubelet refreshes it)."""
SUGGESTION_VOLUME = "suggestion-volume"


def _digest(text: str, length: int = _HASH_LEN) -> str:
    """A stable suffix over the alphabet above; 27^8 ≈ 2.8e11 values."""
    number = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    out = []
    for _ in range(length):
        number, index = divmod(number, len(_ALPHABET))
        out.append(_ALPHABET[index])
    return "".join(out)


def shorten(name: str, limit: int) -> str:
    """`name` if it fits, else a prefix of it, `-`, and a hash of the whole name (len == limit).

    The prefix loses trailing `-` and `.` so the result stays a valid DNS-1123 name.
    """
    if len(name) <= limit:
        return name
    prefix = name[: limit - _HASH_LEN - 1].rstrip("-.")
    return f"{prefix}-{_digest(name)}"


def suggestion_name(experiment: str) -> str:
    """The Suggestion has the Experiment's name (upstream), so it is found without a lookup."""
    return experiment


def suggestion_deployment_name(suggestion: str, algorithm: str) -> str:
    """Deployment and Service of the algorithm: `<suggestion>-<algorithm>`, a DNS-1035 label."""
    return shorten(f"{suggestion}-{algorithm}", LABEL_LIMIT)


def suggestion_service_name(suggestion: str, algorithm: str) -> str:
    return suggestion_deployment_name(suggestion, algorithm)


def suggestion_pvc_name(suggestion: str, algorithm: str) -> str:
    """The FromVolume claim `<suggestion>-<algorithm>` (seed resume-from-volume)."""
    return shorten(f"{suggestion}-{algorithm}", NAME_LIMIT)


def suggestion_pv_name(suggestion: str, algorithm: str, namespace: str) -> str:
    """The cluster-scoped `<suggestion>-<algorithm>-<namespace>`: unique across namespaces."""
    return shorten(f"{suggestion}-{algorithm}-{namespace}", NAME_LIMIT)


def owned_name(katib_name: str, limit: int, namespace: str, suggestion: str, uid: str) -> str:
    """The fallback for `katib_name` when another owner holds it: a prefix of it and a hash of
    the Suggestion's namespace, name and uid, so a restarted controller derives the same name
    and no other Suggestion (not even a later one of the same name) derives it."""
    prefix = katib_name[: limit - _HASH_LEN - 1].rstrip("-.")
    return f"{prefix}-{_digest(f'{namespace}/{suggestion}/{uid}')}"


def recorded_name(
    katib_name: str,
    limit: int,
    kind: str,
    meta: dict[str, object],
) -> str:
    """The name a Suggestion's object of `kind` has: the fallback when the Suggestion's
    annotation records it, else Katib's. `meta` is the Suggestion's metadata (wire form); an
    annotation holding anything but this Suggestion's own fallback is ignored."""
    annotations = meta.get("annotations")
    recorded = annotations.get(NAME_ANNOTATIONS[kind]) if isinstance(annotations, dict) else None
    if not recorded:
        return katib_name
    fallback = owned_name(
        katib_name,
        limit,
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )
    return fallback if recorded == fallback else katib_name


def suggestion_pv_host_path(pv_name: str, prefix: str = DEFAULT_PV_HOST_PREFIX) -> str:
    return prefix.rstrip("/") + "/" + pv_name


def trial_name(experiment: str, key: str) -> str:
    """`<experiment>-<8 chars>`, derived from `key` (e.g. the assignment index) deterministically.

    Deterministic so that an algorithm restarted between computing and writing an assignment
    writes the same name again instead of a duplicate. Trial names become Job names and label
    values, hence the 63 limit.
    """
    suffix = _digest(f"{experiment}/{key}")
    return shorten(f"{experiment}-{suffix}", LABEL_LIMIT)


_LABEL_VALUE_BAD = re.compile(r"[^A-Za-z0-9._-]")


def label_value(value: str) -> str:
    """A valid label value for any text: bad characters replaced, long values shortened."""
    cleaned = _LABEL_VALUE_BAD.sub("-", value).strip("-._")
    return shorten(cleaned, LABEL_LIMIT)


def experiment_labels(experiment: str) -> dict[str, str]:
    return {LABEL_EXPERIMENT: label_value(experiment)}


def suggestion_labels(experiment: str, suggestion: str, deployment: str) -> dict[str, str]:
    return {
        LABEL_EXPERIMENT: label_value(experiment),
        LABEL_SUGGESTION: label_value(suggestion),
        LABEL_DEPLOYMENT: label_value(deployment),
    }


def trial_labels(experiment: str, trial: str) -> dict[str, str]:
    return {LABEL_EXPERIMENT: label_value(experiment), LABEL_TRIAL: label_value(trial)}
