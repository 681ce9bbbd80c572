"""The Node object, its status heartbeat and its Lease in kube-node-lease."""

from __future__ import annotations

import datetime as dt
import logging
import os
import platform
import threading
import uuid
from typing import Any

import psutil

from .kube import MERGE, ApiError, Kube
from .status import now_iso

log = logging.getLogger(__name__)
JSON = dict[str, Any]
LEASE_NS = "kube-node-lease"


def micro_now() -> str:
    """metav1.MicroTime."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _read(path: str, default: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip() or default
    except OSError:
        return default


def _os_image() -> str:
    try:
        with open("/etc/os-release", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "Linux"


class NodeManager:
    """Registers the node and keeps its lease and status fresh."""

    def __init__(
        self,
        kube: Kube,
        name: str,
        ip: str,
        capacity: dict[str, str],
        lease_seconds: int = 40,
        status_interval: float = 30.0,
        kubelet_port: int = 0,
    ) -> None:
        self.kube = kube
        self.name = name
        self.ip = ip
        self.capacity = capacity
        self.lease_seconds = lease_seconds
        self.status_interval = status_interval
        self.kubelet_port = kubelet_port
        self.uid = ""
        self.transition = now_iso()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _status(self) -> JSON:
        hb = now_iso()
        conds = [
            (
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            (
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ]
        try:
            version = str(self.kube.get("/version").get("gitVersion", "v0.0.0"))
        except Exception:  # noqa: BLE001 - informational only
            version = "v0.0.0"
        return {
            "capacity": self.capacity,
            "allocatable": self.capacity,
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": m,
                    "lastHeartbeatTime": hb,
                    "lastTransitionTime": self.transition,
                }
                for t, s, r, m in conds
            ],
            "addresses": [
                {"type": "InternalIP", "address": self.ip},
                {"type": "Hostname", "address": self.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.kubelet_port}},
            "nodeInfo": {
                "machineID": _read(
                    "/etc/machine-id", uuid.uuid5(uuid.NAMESPACE_DNS, self.name).hex
                ),
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, self.name)),
                "bootID": _read("/proc/sys/kernel/random/boot_id", ""),
                "kernelVersion": platform.release(),
                "osImage": _os_image(),
                "containerRuntimeVersion": "localcluster-nodeagent://0.1.0",
                "kubeletVersion": version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(
                    platform.machine(), platform.machine()
                ),
            },
            "phase": "Running",
        }

    def register(self) -> None:
        """Create (or adopt) the Node, post Ready, drop the not-ready taint, take the lease."""
        arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": arch,
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": arch,
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels},
            "spec": {},
        }
        try:
            node = self.kube.post("/api/v1/nodes", body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            node = self.kube.patch(f"/api/v1/nodes/{self.name}", {"metadata": {"labels": labels}})
        self.uid = node["metadata"]["uid"]
        self.kube.patch(f"/api/v1/nodes/{self.name}/status", {"status": self._status()})
        try:
            self._untaint()
        except ApiError as exc:  # the node-lifecycle controller may have been quicker
            log.info("could not remove the not-ready taint: %s", exc)
        self._renew_lease()

    def _untaint(self) -> None:
        """Remove the admission-added not-ready taint now that Ready is posted."""
        node = self.kube.get(f"/api/v1/nodes/{self.name}")
        taints = (node.get("spec") or {}).get("taints") or []
        keep = [t for t in taints if t.get("key") != "node.kubernetes.io/not-ready"]
        if len(keep) != len(taints):
            self.kube.patch(
                f"/api/v1/nodes/{self.name}",
                {
                    "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                    "spec": {"taints": keep or None},
                },
                content_type=MERGE,
            )

    def _renew_lease(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/{self.name}"
        try:
            self.kube.patch(
                path,
                {
                    "spec": {
                        "renewTime": micro_now(),
                        "holderIdentity": self.name,
                        "leaseDurationSeconds": self.lease_seconds,
                    }
                },
                content_type=MERGE,
            )
            return
        except ApiError as exc:
            if exc.status != 404:
                raise
        self.kube.post(
            f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases",
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": self.name,
                    "namespace": LEASE_NS,
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": self.uid}
                    ],
                },
                "spec": {
                    "holderIdentity": self.name,
                    "leaseDurationSeconds": self.lease_seconds,
                    "renewTime": micro_now(),
                },
            },
        )

    def start(self) -> None:
        """Heartbeat thread: lease every lease/4 seconds, status every status_interval."""
        self._thread = threading.Thread(target=self._beat, name="node-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the heartbeat."""
        self._stop.set()

    def _beat(self) -> None:
        period = max(1.0, self.lease_seconds / 4)
        since_status = 0.0
        while not self._stop.wait(period):
            since_status += period
            try:
                self._renew_lease()
                if since_status >= self.status_interval:
                    since_status = 0.0
                    self.kube.patch(f"/api/v1/nodes/{self.name}/status", {"status": self._status()})
            except ApiError as exc:
                if exc.status == 404 and "nodes" in str(exc):
                    log.warning("node %s was deleted; registering again", self.name)
                    try:
                        self.register()
                    except Exception:
                        log.exception("re-registration failed")
                else:
                    log.warning("heartbeat failed: %s", exc)
            except Exception as exc:  # noqa: BLE001 - keep beating through API restarts
                log.warning("heartbeat failed: %s", exc)


def default_capacity(
    cpu: str | None, memory: str | None, pods: str, extra: dict[str, str]
) -> dict[str, str]:
    """Capacity and allocatable of the node."""
    cap = {
        "cpu": cpu or str(os.cpu_count() or 1),
        "memory": memory or f"{psutil.virtual_memory().total // 1024}Ki",
        "pods": pods,
        "ephemeral-storage": f"{psutil.disk_usage('/').total // 1024}Ki",
    }
    cap.update(extra)
    return cap
