"""Container environment, built the way the kubelet builds it.

Order: ``envFrom`` sources (in order), then ``env`` entries (in order). A literal ``value``
is ``$(VAR)``-expanded against the variables declared before it plus the service
variables; ``valueFrom`` results are used verbatim. The image's own env (PATH etc.) is
not visible to expansion, as with a container runtime.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from .expansion import expand, mapping_for

JSON = dict[str, Any]
Getter = Callable[[str, str], JSON | None]


class ConfigError(Exception):
    """A missing ConfigMap/Secret/key: the container waits in CreateContainerConfigError."""


_SUFFIX: dict[str, int | Decimal] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


def parse_quantity(q: str | float) -> Decimal:
    """A Kubernetes quantity ("500m", "1Gi", "2") as a Decimal."""
    s = str(q).strip()
    m = re.fullmatch(r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)", s)
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"bad quantity {q!r}")
    return Decimal(m.group(1)) * Decimal(_SUFFIX[m.group(2)])


def _quoted(v: str) -> str:
    return json.dumps(v, ensure_ascii=False)


def field_value(pod: JSON, path: str, pod_ip: str, host_ip: str) -> str:
    """Resolve a downward-API fieldPath against the pod."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = sorted((meta.get(path.split(".")[1]) or {}).items())
        return "\n".join(f"{k}={_quoted(str(v))}" for k, v in items)
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path not in simple:
        raise ConfigError(f"unsupported fieldPath {path!r}")
    return str(simple[path] or "")


def resource_value(
    pod: JSON, container_name: str, ref: JSON, node_allocatable: dict[str, str]
) -> str:
    """Resolve a resourceFieldRef (limits default to the node's allocatable)."""
    name = ref.get("containerName") or container_name
    cont = next(
        (c for c in (pod.get("spec") or {}).get("containers", []) if c.get("name") == name),
        None,
    )
    if cont is None:
        raise ConfigError(f"resourceFieldRef: no container {name!r}")
    kind, _, res = str(ref.get("resource", "")).partition(".")
    resources = cont.get("resources") or {}
    raw = (resources.get(kind) or {}).get(res)
    if raw is None and kind == "requests":
        raw = (resources.get("limits") or {}).get(res)
    if raw is None:
        raw = node_allocatable.get(res, "0") if kind == "limits" else "0"
    divisor = parse_quantity(ref.get("divisor") or "1")
    value = parse_quantity(raw) / divisor
    return str(math.ceil(value))


def _data(obj: JSON, secret: bool) -> dict[str, str]:
    if secret:
        out = {
            k: base64.b64decode(v).decode(errors="replace")
            for k, v in (obj.get("data") or {}).items()
        }
        out.update(obj.get("stringData") or {})
        return out
    return dict(obj.get("data") or {})


def build_env(
    pod: JSON,
    container: JSON,
    service_env: dict[str, str],
    get_configmap: Getter,
    get_secret: Getter,
    pod_ip: str,
    host_ip: str,
    node_allocatable: dict[str, str] | None = None,
) -> dict[str, str]:
    """The declared env of a container (envFrom, then env), in declaration order."""
    ns = (pod.get("metadata") or {}).get("namespace", "default")
    env: dict[str, str] = {}
    for src in container.get("envFrom") or []:
        prefix = src.get("prefix", "")
        for key, getter, secret in (
            ("configMapRef", get_configmap, False),
            ("secretRef", get_secret, True),
        ):
            ref = src.get(key)
            if not ref:
                continue
            obj = getter(ns, ref.get("name", ""))
            if obj is None:
                if ref.get("optional"):
                    continue
                kind = "secret" if secret else "configmap"
                raise ConfigError(f'{kind} "{ref.get("name", "")}" not found')
            for k, v in _data(obj, secret).items():
                if "=" not in prefix + k:
                    env[prefix + k] = v
    for var in container.get("env") or []:
        name = var["name"]
        vf = var.get("valueFrom")
        if not vf:
            lookup = mapping_for(env, service_env)
            env[name] = expand(str(var.get("value", "")), lookup)
            continue
        if "fieldRef" in vf:
            env[name] = field_value(pod, vf["fieldRef"]["fieldPath"], pod_ip, host_ip)
        elif "resourceFieldRef" in vf:
            env[name] = resource_value(
                pod, container.get("name", ""), vf["resourceFieldRef"], node_allocatable or {}
            )
        else:
            secret = "secretKeyRef" in vf
            ref = vf.get("secretKeyRef") or vf.get("configMapKeyRef") or {}
            obj = (get_secret if secret else get_configmap)(ns, ref.get("name", ""))
            kind = "Secret" if secret else "ConfigMap"
            if obj is None:
                if ref.get("optional"):
                    continue
                raise ConfigError(f'{kind.lower()} "{ref.get("name", "")}" not found')
            data = _data(obj, secret)
            if ref.get("key") not in data:
                if ref.get("optional"):
                    continue
                raise ConfigError(
                    f"couldn't find key {ref.get('key')} in {kind} {ns}/{ref.get('name')}"
                )
            env[name] = data[ref["key"]]
    return env


def service_env(host: str, port: int) -> dict[str, str]:
    """The variables of the ``kubernetes`` Service, pointing at the real API server."""
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": str(port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
        "KUBERNETES_PORT": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp",
        f"KUBERNETES_PORT_{port}_TCP_PORT": str(port),
        f"KUBERNETES_PORT_{port}_TCP_ADDR": host,
    }
