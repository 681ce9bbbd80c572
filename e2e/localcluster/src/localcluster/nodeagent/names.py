"""Service and pod names without cluster DNS: a per-pod ``/etc/hosts`` kept current.

Pods share the host network and no cluster DNS runs, yet operators and clients address
each other by name (``katib-db-manager.kubeflow:6789``, TF_CONFIG's
``job-worker-0.ns.svc:2222``, a PyTorchJob worker waiting for ``job-master-0``). Like the
kubelet, the agent gives each pod its own hosts file, bind-mounted at ``/etc/hosts`` of
every container; here it also lists every Service's endpoint addresses (ClusterIPs are not
routed: there is no kube-proxy) and the hostnames of headless-Service pods, under the names
a pod's DNS search path (``<ns>.svc.cluster.local svc.cluster.local cluster.local``)
would resolve; a Service whose pods listen on another port than its own is named by the
address of the agent's forwarder for it (``serviceports``). The agent re-reads EndpointSlices
and Services every second and rewrites changed files
in place (a bind-mounted file keeps its inode, so rename would not be seen).
Go and glibc resolvers read /etc/hosts first; tools that only speak DNS (``nslookup``)
do not.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]
CLUSTER_DOMAIN = "cluster.local"
HEADER = (
    "# Kubernetes-managed hosts file (localcluster node agent): cluster names, kept current.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
)


def names_for(relative: str, ns: str, own_ns: str) -> list[str]:
    """The names a pod in ``own_ns`` may use for ``<relative>.<ns>.svc.cluster.local``.

    ``relative`` is ``<service>`` or ``<hostname>.<service>``.
    """
    base = f"{relative}.{ns}"
    out = [f"{base}.svc.{CLUSTER_DOMAIN}", f"{base}.svc", base]
    if ns == own_ns:
        out.append(relative)
    return out


@dataclass(frozen=True)
class NameTable:
    """Addresses by (namespace, name relative to the namespace), from EndpointSlices."""

    entries: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_slices(cls, slices: Iterable[JSON]) -> NameTable:
        """Every non-terminating endpoint counts: a ClusterIP name resolves before the
        pod is ready on a real cluster too (and here the ClusterIP would not route)."""
        found: dict[tuple[str, str], list[str]] = {}
        for s in slices:
            meta = s.get("metadata") or {}
            svc = (meta.get("labels") or {}).get("kubernetes.io/service-name")
            if not svc or s.get("addressType", "IPv4") != "IPv4":
                continue
            ns = str(meta.get("namespace") or "")
            for ep in s.get("endpoints") or []:
                if (ep.get("conditions") or {}).get("terminating"):
                    continue
                addrs = [str(a) for a in ep.get("addresses") or []]
                found.setdefault((ns, svc), []).extend(addrs)
                if ep.get("hostname") and addrs:
                    found.setdefault((ns, f"{ep['hostname']}.{svc}"), []).extend(addrs[:1])
        return cls({k: tuple(sorted(set(v))) for k, v in sorted(found.items()) if v})

    def with_addresses(self, addresses: dict[tuple[str, str], tuple[str, ...]]) -> NameTable:
        """The table with these names' addresses replaced (Services reached through the
        agent's forwarders, ``serviceports``)."""
        return NameTable(dict(sorted({**self.entries, **addresses}.items())))

    def render(self, pod: JSON, pod_ip: str) -> str:
        """The hosts file of one pod (its own name first, as the kubelet writes it)."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        own_ns = str(meta.get("namespace") or "")
        hostname = str(spec.get("hostname") or meta.get("name") or "")
        lines = [HEADER]
        if spec.get("subdomain"):
            full = f"{hostname}.{spec['subdomain']}.{own_ns}.svc.{CLUSTER_DOMAIN}"
            lines.append(f"{pod_ip}\t{full}\t{hostname}\n")
        else:
            lines.append(f"{pod_ip}\t{hostname}\n")
        for (ns, rel), addrs in self.entries.items():
            names = " ".join(names_for(rel, ns, own_ns))
            lines.extend(f"{a}\t{names}\n" for a in addrs)
        return "".join(lines)


def write_in_place(path: str, text: str) -> bool:
    """Write ``path`` keeping its inode (bind mounts of it see the change); True if changed."""
    data = text.encode()
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                return False
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
    return True
