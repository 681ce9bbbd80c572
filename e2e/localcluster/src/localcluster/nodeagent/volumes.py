"""Pod volumes as host directories, later bind-mounted at each mountPath.

Layout: ``<state-dir>/volumes/<pod uid>/<plugin>/<volume name>``. emptyDir (``medium:
Memory`` under /dev/shm), configMap, secret, downwardAPI and projected volumes
(including the ``kube-api-access-*`` service-account token from the TokenRequest API)
live there and are removed with the pod; hostPath and hostPath/local PersistentVolumes
are used in place, so PVC data outlives the pod. Files are written atomically (temp file
+ rename) so a refresh never shows a half-written token.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .envvars import ConfigError, field_value, resource_value
from .kube import ApiError, Kube

JSON = dict[str, Any]
READ_ONLY_KINDS = ("configMap", "secret", "projected", "downwardAPI")


class MountError(Exception):
    """A volume cannot be set up yet (FailedMount); the pod stays ContainerCreating."""


@dataclass
class Volume:
    """A materialised volume."""

    name: str
    path: str
    kind: str
    read_only: bool = False


def _write_file(root: str, rel: str, data: bytes, mode: int) -> None:
    rel = rel.lstrip("/")
    if ".." in rel.split("/"):
        raise MountError(f"invalid path {rel!r}")
    dst = os.path.join(root, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = dst + ".tmp-nodeagent"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, dst)


class VolumeManager:
    """Sets up and refreshes one pod's volumes."""

    def __init__(
        self,
        kube: Kube,
        root: str,
        pod: JSON,
        pod_ip: str,
        host_ip: str,
        allocatable: dict[str, str],
        get_configmap: Callable[[str, str], JSON | None],
        get_secret: Callable[[str, str], JSON | None],
    ) -> None:
        self.kube = kube
        self.pod = pod
        uid = pod["metadata"]["uid"]
        self.root = os.path.join(root, "volumes", uid)
        self.shm_root = os.path.join("/dev/shm", "nodeagent-volumes", uid)
        self.pod_ip = pod_ip
        self.host_ip = host_ip
        self.allocatable = allocatable
        self.get_configmap = get_configmap
        self.get_secret = get_secret
        self.ns = pod["metadata"]["namespace"]
        self.volumes: dict[str, Volume] = {}
        self._tokens: dict[tuple[str, int], tuple[str, float]] = {}

    def setup(self) -> dict[str, Volume]:
        """Materialise (or refresh) every volume of the pod."""
        for vol in (self.pod.get("spec") or {}).get("volumes") or []:
            self.volumes[vol["name"]] = self._one(vol)
        return self.volumes

    def refresh(self) -> None:
        """Rewrite the API-backed volumes (tokens expire; ConfigMaps change)."""
        for vol in (self.pod.get("spec") or {}).get("volumes") or []:
            if any(k in vol for k in READ_ONLY_KINDS):
                with contextlib.suppress(MountError, ApiError):
                    self.volumes[vol["name"]] = self._one(vol)

    def cleanup(self) -> None:
        """Remove the pod-owned directories (never hostPath or PV data)."""
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.shm_root, ignore_errors=True)

    def _dir(self, plugin: str, name: str, memory: bool = False) -> str:
        path = os.path.join(self.shm_root if memory else self.root, plugin, name)
        os.makedirs(path, exist_ok=True)
        return path

    def _one(self, vol: JSON) -> Volume:
        name = vol["name"]
        if "emptyDir" in vol:
            memory = (vol["emptyDir"] or {}).get("medium") == "Memory"
            return Volume(name, self._dir("empty-dir", name, memory), "emptyDir")
        if "hostPath" in vol:
            return Volume(name, self._host_path(vol["hostPath"]), "hostPath")
        if "persistentVolumeClaim" in vol:
            ref = vol["persistentVolumeClaim"]
            return Volume(name, self._pvc(ref["claimName"]), "pvc", bool(ref.get("readOnly")))
        if "configMap" in vol:
            path = self._dir("configmap", name)
            self._fill(
                path, [{"configMap": vol["configMap"]}], vol["configMap"].get("defaultMode", 0o644)
            )
            return Volume(name, path, "configMap", True)
        if "secret" in vol:
            path = self._dir("secret", name)
            src = dict(vol["secret"])
            src["name"] = src.pop("secretName", "")
            self._fill(path, [{"secret": src}], src.get("defaultMode", 0o644))
            return Volume(name, path, "secret", True)
        if "downwardAPI" in vol:
            path = self._dir("downward-api", name)
            self._fill(
                path,
                [{"downwardAPI": vol["downwardAPI"]}],
                vol["downwardAPI"].get("defaultMode", 0o644),
            )
            return Volume(name, path, "downwardAPI", True)
        if "projected" in vol:
            path = self._dir("projected", name)
            proj = vol["projected"] or {}
            self._fill(path, proj.get("sources") or [], proj.get("defaultMode", 0o644))
            return Volume(name, path, "projected", True)
        kinds = [k for k in vol if k != "name"]
        raise MountError(f"volume {name}: unsupported volume type {kinds}")

    def _host_path(self, hp: JSON) -> str:
        path = hp["path"]
        kind = hp.get("type") or ""
        if kind == "DirectoryOrCreate":
            os.makedirs(path, exist_ok=True)
        elif kind == "FileOrCreate":
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not os.path.exists(path):
                with open(path, "a", encoding="utf-8"):
                    pass
        elif kind == "Directory" and not os.path.isdir(path):
            raise MountError(f"hostPath type check failed: {path} is not a directory")
        elif kind == "File" and not os.path.isfile(path):
            raise MountError(f"hostPath type check failed: {path} is not a file")
        elif not kind and not os.path.exists(path):
            os.makedirs(path, exist_ok=True)
        return str(path)

    def _pvc(self, claim: str) -> str:
        try:
            pvc = self.kube.get(f"/api/v1/namespaces/{self.ns}/persistentvolumeclaims/{claim}")
        except ApiError as exc:
            raise MountError(f'persistentvolumeclaim "{claim}" not found') from exc
        pv_name = (pvc.get("spec") or {}).get("volumeName")
        if (pvc.get("status") or {}).get("phase") != "Bound" or not pv_name:
            raise MountError(f'persistentvolumeclaim "{claim}" is not bound')
        pv = self.kube.get(f"/api/v1/persistentvolumes/{pv_name}")
        spec = pv.get("spec") or {}
        if "hostPath" in spec:
            return self._host_path(spec["hostPath"])
        if "local" in spec:
            return self._host_path({"path": spec["local"]["path"]})
        raise MountError(f"persistentvolume {pv_name}: only hostPath/local volumes work here")

    def _fill(self, root: str, sources: list[JSON], default_mode: int) -> None:
        for src in sources:
            if "configMap" in src or "secret" in src:
                secret = "secret" in src
                ref = src.get("secret") or src.get("configMap") or {}
                obj = (self.get_secret if secret else self.get_configmap)(
                    self.ns, ref.get("name", "")
                )
                if obj is None:
                    if ref.get("optional"):
                        continue
                    kind = "secret" if secret else "configmap"
                    raise MountError(f'{kind} "{ref.get("name", "")}" not found')
                data: dict[str, bytes] = {}
                for k, v in (obj.get("data") or {}).items():
                    data[k] = base64.b64decode(v) if secret else str(v).encode()
                for k, v in (obj.get("binaryData") or {}).items():
                    data[k] = base64.b64decode(v)
                items = ref.get("items")
                if items:
                    for it in items:
                        if it["key"] not in data:
                            if ref.get("optional"):
                                continue
                            raise MountError(f"configmap/secret key {it['key']} not found")
                        _write_file(root, it["path"], data[it["key"]], it.get("mode", default_mode))
                else:
                    for k, v in data.items():
                        _write_file(root, k, v, default_mode)
            elif "downwardAPI" in src:
                for it in (src["downwardAPI"] or {}).get("items") or []:
                    try:
                        if "fieldRef" in it:
                            val = field_value(
                                self.pod, it["fieldRef"]["fieldPath"], self.pod_ip, self.host_ip
                            )
                        else:
                            val = resource_value(
                                self.pod, "", it["resourceFieldRef"], self.allocatable
                            )
                    except ConfigError as exc:
                        raise MountError(str(exc)) from exc
                    _write_file(root, it["path"], val.encode(), it.get("mode", default_mode))
            elif "serviceAccountToken" in src:
                tok = src["serviceAccountToken"]
                _write_file(root, tok.get("path", "token"), self._token(tok).encode(), default_mode)
            elif "clusterTrustBundle" in src or "podCertificate" in src:
                raise MountError("clusterTrustBundle/podCertificate sources are not supported")

    def _token(self, tok: JSON) -> str:
        key = (str(tok.get("audience") or ""), int(tok.get("expirationSeconds") or 3600))
        cached = self._tokens.get(key)
        if cached and time.time() - cached[1] < key[1] * 0.5:
            return cached[0]
        token = self._request_token(tok)
        self._tokens[key] = (token, time.time())
        return token

    def _request_token(self, tok: JSON) -> str:
        meta = self.pod["metadata"]
        sa = (self.pod.get("spec") or {}).get("serviceAccountName") or "default"
        spec: JSON = {
            "expirationSeconds": int(tok.get("expirationSeconds") or 3600),
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": meta["name"],
                "uid": meta["uid"],
            },
        }
        if tok.get("audience"):
            spec["audiences"] = [tok["audience"]]
        try:
            out = self.kube.post(
                f"/api/v1/namespaces/{self.ns}/serviceaccounts/{sa}/token",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
            )
        except ApiError as exc:
            raise MountError(f"failed to fetch token for serviceaccount {sa}: {exc}") from exc
        return str(out["status"]["token"])
