"""A real Kubernetes node beside the local control plane: containerd, kubelet, kube-proxy,
CNI and CoreDNS (``localcluster up --node kubelet``).

The machine has cgroup v1 only, root lacks CAP_SYS_RESOURCE and no registry can be reached,
so: the kubelet accepts cgroup v1 with the cgroupfs driver, containerd's CRI restricts OOM
score adjustments (runc would otherwise fail every sandbox), and every image (the sandbox's
pause, CoreDNS, the tests') is made here and imported into containerd's ``k8s.io``
namespace. kubelet, CNI and the pod logs use fixed host paths, so one real node runs per
machine at a time (a lock); ``teardown`` removes everything the node left on the host.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from localcluster import nodebuild, ociimage
from localcluster.kubectlrun import Kubectl

NODE_MODES = ("kubelet",)
# Loopback ports of the node's health and metrics endpoints (picked free by ``up``).
LOCAL_PORTS = ("kubelet-healthz", "kube-proxy-healthz", "kube-proxy-metrics")
POD_CIDR = "10.244.0.0/24"
CLUSTER_CIDR = "10.244.0.0/16"
DNS_SERVICE_IP = "10.0.0.10"
CLUSTER_DOMAIN = "cluster.local"
BRIDGE = "lcnode0"
CNI_NETWORK = "localcluster"
RUN_DIR = Path("/run/localcluster-node")
LOCK_FILE = Path("/run/localcluster-node.lock")
CONTAINERD_SOCKET = RUN_DIR / "containerd" / "containerd.sock"
NAMESPACE = "k8s.io"
PAUSE_IMAGE = "localcluster.local/pause:1"
COREDNS_IMAGE = f"localcluster.local/coredns:{nodebuild.COREDNS.version}"
# Host paths the kubelet, CNI and the CRI write to, removed by teardown.
HOST_PATHS = (
    Path("/var/lib/kubelet"),
    Path("/var/lib/cni"),
    Path("/var/log/pods"),
    Path("/var/log/containers"),
    RUN_DIR,
)
# Host settings the kubelet, kube-proxy or the CNI bridge change; restored by teardown.
SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
)
# nft tables kube-proxy (nftables mode) and the portmap plugin create.
NFT_TABLES = (("ip", "kube-proxy"), ("ip6", "kube-proxy"), ("inet", "cni_hostport"))
# iptables-nft tables where the kubelet adds its KUBE-* chains.
IPTABLES_TABLES = tuple((f, t) for f in ("ip", "ip6") for t in ("mangle", "filter", "nat"))
CGROUP_ROOT = Path("/sys/fs/cgroup")
POD_CGROUP = "kubepods"


class NodeError(RuntimeError):
    """The real node could not be started; the message says why and what to do."""


class NodeBusy(NodeError):
    """Another run holds the machine's one real node (nothing was started)."""


def node_ip() -> str:
    """The address of the interface holding the default route (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))
            ip = str(s.getsockname()[0])
        except OSError:
            ip = ""
    if not ip or ip.startswith("127."):
        raise NodeError(
            "the real node needs a non-loopback address (pods reach the API server on it): "
            "no interface with a default route was found"
        )
    return ip


def validate_mode(mode: str) -> None:
    """A known mode, and root (containerd, the kubelet and CNI change the host)."""
    if mode not in NODE_MODES:
        raise NodeError(f"--node {mode!r} is not a node mode: choose from {', '.join(NODE_MODES)}")
    if os.geteuid() != 0:
        raise NodeError("the real node runs as root (it mounts, makes cgroups and a bridge)")


# --- the one-node-per-machine lock ---------------------------------------------------------


def _read_claim(text: str) -> tuple[str, int]:
    """The lock holds the state dir and, on the next line, the PID of the claiming process."""
    owner, _, pid = text.strip().partition("\n")
    return owner, int(pid) if pid.isdigit() else 0


def recorded_claim() -> tuple[str, int]:
    """The state dir and claiming PID the lock records, standing or not (``("", 0)``: none)."""
    return _read_claim(LOCK_FILE.read_text()) if LOCK_FILE.exists() else ("", 0)


def owner(holds: Callable[[Path, int], bool]) -> str:
    """The state dir holding the real node, or "" when none does. ``holds(state_dir, pid)``
    decides whether a recorded claim still stands."""
    held, pid = recorded_claim()
    return held if held and holds(Path(held), pid) else ""


def claim(state_dir: Path, holds: Callable[[Path, int], bool]) -> None:
    """Record ``state_dir`` as the machine's real node, unless another one still runs."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_FILE, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        held, pid = _read_claim(f.read())
        if held and held != str(state_dir) and holds(Path(held), pid):
            raise NodeBusy(
                f"a real node already runs on this machine from {held}: one at a time "
                f"(kubelet and CNI use fixed host paths); `localcluster --state-dir {held} "
                "down` first"
            )
        f.seek(0)
        f.truncate()
        f.write(f"{state_dir}\n{os.getpid()}")


def started(state_dir: Path) -> None:
    """The node runs: from now on its processes hold the claim, not the process that made it
    (which may live on long after the node died, as a test session does)."""
    _rewrite_if_ours(state_dir, str(state_dir))


def release(state_dir: Path) -> None:
    """Forget the claim if it is ours."""
    _rewrite_if_ours(state_dir, "")


def _rewrite_if_ours(state_dir: Path, text: str) -> None:
    if not LOCK_FILE.exists():
        return
    with open(LOCK_FILE, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        if _read_claim(f.read())[0] == str(state_dir):
            f.seek(0)
            f.truncate()
            f.write(text)


# --- configuration files --------------------------------------------------------------------


def containerd_config(bins: nodebuild.NodeBinaries, root: Path, cni_conf: Path) -> str:
    return f"""version = 3
root = "{root}"
state = "{RUN_DIR / "containerd"}"

[grpc]
  address = "{CONTAINERD_SOCKET}"

[plugins.'io.containerd.cri.v1.runtime']
  # root lacks CAP_SYS_RESOURCE: runc could not lower a sandbox's oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "{bins["runc"]}"
  SystemdCgroup = false

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["{bins.cni_bin_dir}"]
  conf_dir = "{cni_conf}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{PAUSE_IMAGE}"
"""


def cni_config() -> dict[str, Any]:
    return {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                # Pods reach nothing outside the node: no masquerade rules to clean up.
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}, "backend": "nftables"},
        ],
    }


def kubelet_config(pki: Path, ip: str, port: int, healthz_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This machine: cgroup v1 only, no systemd, swap allowed.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
        "address": ip,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(pki / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "client-ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [DNS_SERVICE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": "/etc/resolv.conf",
        "serializeImagePulls": False,
        # Shared machine: never evict pods or delete images because other work fills the disk
        # ("0%" turns a signal off). With 1 % of a 252 GB disk as the floor, a disk other runs
        # had filled to 2.7 GB free set DiskPressure: the kubelet evicted the training-operator
        # again and again and tainted the node, and its webhook never served. A full disk now
        # shows as "no space left on device" where something writes.
        "evictionHard": {
            "memory.available": "50Mi",
            "nodefs.available": "0%",
            "imagefs.available": "0%",
            "nodefs.inodesFree": "0%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusUpdateFrequency": "4s",
        # A Secret's new data reaches its pods' volumes only when the kubelet syncs the pod: on
        # a container's event, else every syncFrequency (1 min by default, plus jitter). The
        # training-operator's cert rotator writes its serving certificate into a mounted Secret
        # and then looks for the file with a doubling backoff (1 s ... 512 s, jittered): a
        # write that missed the start's syncs could wait a minute and a half for the volume,
        # then minutes more for the next look. A 10 s resync bounds the first part.
        "syncFrequency": "10s",
    }


def kube_proxy_config(
    kubeconfig_path: Path, node_name: str, ports: dict[str, int]
) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig_path)},
        "mode": "nftables",
        "hostnameOverride": node_name,
        "clusterCIDR": CLUSTER_CIDR,
        "healthzBindAddress": f"127.0.0.1:{ports['kube-proxy-healthz']}",
        "metricsBindAddress": f"127.0.0.1:{ports['kube-proxy-metrics']}",
        # 0: leave the host's conntrack sysctls alone (setting them fails here).
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


COREFILE = f""".:53 {{
    errors
    health :8080
    ready :8181
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 30
    loadbalance
}}
"""


def coredns_manifests() -> list[dict[str, Any]]:
    """CoreDNS as the cluster runs it: a Deployment behind the kube-dns Service."""
    labels = {"k8s-app": "kube-dns"}
    meta = {"name": "coredns", "namespace": "kube-system"}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "localcluster:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "localcluster:coredns"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "localcluster:coredns",
            },
            "subjects": [{"kind": "ServiceAccount", **meta}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta,
            # No `forward` (no upstream can be reached) and so no `loop` either.
            "data": {"Corefile": COREFILE},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {**meta, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "coredns",
                        "dnsPolicy": "Default",
                        "priorityClassName": "system-cluster-critical",
                        "containers": [
                            {
                                "name": "coredns",
                                "image": COREDNS_IMAGE,
                                "imagePullPolicy": "Never",
                                "args": ["-conf", "/etc/coredns/Corefile"],
                                "ports": [
                                    {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                                    {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
                                ],
                                "readinessProbe": {
                                    "httpGet": {"path": "/ready", "port": 8181},
                                    "periodSeconds": 2,
                                },
                                "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns"}],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
            "spec": {
                "clusterIP": DNS_SERVICE_IP,
                "selector": labels,
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                ],
            },
        },
    ]


# --- images -----------------------------------------------------------------------------------


def ctr(args: list[str], timeout: float = 120) -> str:
    """Run ``ctr`` against the node's containerd, in the ``k8s.io`` namespace."""
    bins = nodebuild.binaries()
    proc = subprocess.run(
        [str(bins["ctr"]), "--address", str(CONTAINERD_SOCKET), "-n", NAMESPACE, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise NodeError(f"ctr {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout}")
    return proc.stdout


def load(archive: Path) -> list[str]:
    """Import an OCI or docker-save archive into the node's containerd; returns image names."""
    if not archive.is_file():
        raise NodeError(f"image archive {archive} does not exist (an OCI or docker-save tar)")
    if not CONTAINERD_SOCKET.exists():
        raise NodeError(
            "no real node runs (no containerd socket at "
            f"{CONTAINERD_SOCKET}): `localcluster up --node kubelet` first"
        )
    ctr(["images", "import", str(archive)], timeout=600)
    return ociimage.names_in(archive)


def _node_images(bins: nodebuild.NodeBinaries, directory: Path) -> list[Path]:
    pause = ociimage.Image(PAUSE_IMAGE, entrypoint=["/pause"]).add_file("pause", bins["pause"])
    coredns = ociimage.Image(COREDNS_IMAGE, entrypoint=["/coredns"]).add_file(
        "coredns", bins["coredns"]
    )
    return [
        ociimage.write(pause, directory / "pause.tar"),
        ociimage.write(coredns, directory / "coredns.tar"),
    ]


# --- start -------------------------------------------------------------------------------------


def read_sysctls() -> dict[str, str]:
    out = {}
    for key in SYSCTLS:
        path = Path("/proc/sys") / key.replace(".", "/")
        with contextlib.suppress(OSError):
            out[key] = path.read_text().strip()
    return out


def _restore_sysctls(saved: dict[str, str]) -> None:
    for key, value in saved.items():
        path = Path("/proc/sys") / key.replace(".", "/")
        with contextlib.suppress(OSError):
            if path.read_text().strip() != value:
                path.write_text(value)


def prepare(
    node_dir: Path, pki: Path, ip: str, node_name: str, ports: dict[str, int]
) -> dict[str, list[str]]:
    """Write every config; return the command lines of containerd, kubelet and kube-proxy."""
    bins = nodebuild.binaries()
    missing = bins.missing()
    if missing:
        raise NodeError(
            f"node binaries missing ({', '.join(missing)}): run `localcluster build-node` first"
        )
    cni_conf = node_dir / "cni"
    cni_conf.mkdir(parents=True, exist_ok=True)
    (cni_conf / "10-localcluster.conflist").write_text(json.dumps(cni_config(), indent=2))
    (node_dir / "containerd.toml").write_text(
        containerd_config(bins, node_dir / "containerd-root", cni_conf)
    )
    (node_dir / "kubelet.yaml").write_text(
        yaml.safe_dump(kubelet_config(pki, ip, ports["kubelet"], ports["kubelet-healthz"]))
    )
    (node_dir / "kube-proxy.yaml").write_text(
        yaml.safe_dump(kube_proxy_config(node_dir / "kube-proxy.kubeconfig", node_name, ports))
    )
    return {
        "containerd": [str(bins["containerd"]), "--config", str(node_dir / "containerd.toml")],
        "kubelet": [
            str(bins["kubelet"]),
            f"--config={node_dir / 'kubelet.yaml'}",
            f"--kubeconfig={node_dir / 'kubelet.kubeconfig'}",
            f"--node-ip={ip}",
            f"--hostname-override={node_name}",
            "--v=1",
        ],
        "kube-proxy": [str(bins["kube-proxy"]), f"--config={node_dir / 'kube-proxy.yaml'}"],
    }


def containerd_env() -> dict[str, str]:
    """containerd finds its shim (and the shim runc) on PATH."""
    bins = nodebuild.binaries()
    env = dict(os.environ)
    env["PATH"] = f"{bins['containerd'].parent}:{bins['runc'].parent}:{env.get('PATH', '')}"
    return env


def import_node_images(node_dir: Path) -> None:
    for archive in _node_images(nodebuild.binaries(), node_dir / "images"):
        load(archive)


def containerd_ready() -> bool:
    if not CONTAINERD_SOCKET.exists():
        return False
    try:
        ctr(["version"], timeout=5)
    except (NodeError, subprocess.TimeoutExpired):
        return False
    return True


# --- teardown ---------------------------------------------------------------------------------


def delete_pods(kubectl: str, kubeconfig_path: str, timeout: float = 45) -> None:
    """Delete every pod and wait until containerd runs no task (sandboxes torn down by CRI)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        Kubectl(kubectl, kubeconfig_path).run(
            "delete", "pods", "--all", "-A", "--grace-period=1", "--wait=false", timeout=60
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not ctr(["tasks", "ls", "-q"], timeout=5).strip():
                return
        except (NodeError, subprocess.TimeoutExpired):
            return
        time.sleep(0.5)


def pod_processes() -> set[int]:
    """Processes in the pods' cgroups (containers and sandboxes)."""
    pids: set[int] = set()
    for controller in CGROUP_ROOT.iterdir():
        top = controller / POD_CGROUP
        if not top.is_dir():
            continue
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in procs.read_text().split())
    return pids


def _pids_running(paths: set[str]) -> set[int]:
    """Processes whose executable is one of ``paths`` (the node's own binaries)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/exe") in paths:
                    pids.add(int(entry))
    return pids


def node_processes() -> set[int]:
    """Every process of the node: containers (pod cgroups), shims, containerd, kubelet, ..."""
    bins = nodebuild.binaries()
    ours = {str(bins[n]) for n in ("containerd", "containerd-shim-runc-v2", "kubelet")}
    ours |= {str(bins["kube-proxy"]), str(bins["runc"])}
    return pod_processes() | _pids_running(ours)


def _kill_all(pids_of: Callable[[], set[int]], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = pids_of() - {os.getpid()}
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.2)


def node_mounts(extra: tuple[Path, ...] = ()) -> list[str]:
    """Mount points under the node's paths, deepest first."""
    prefixes = tuple(str(p) for p in (*HOST_PATHS, *extra))
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefixes):
                found.append(point)
    return sorted(set(found), key=lambda p: p.count("/"), reverse=True)


def pod_cgroups() -> list[Path]:
    return [c / POD_CGROUP for c in CGROUP_ROOT.iterdir() if (c / POD_CGROUP).is_dir()]


def _remove_cgroups() -> None:
    for top in pod_cgroups():
        # os.walk passes over a directory that vanishes under it (a dying container's cgroup
        # is removed by its runtime meanwhile); rglob raised FileNotFoundError.
        dirs = sorted(
            (Path(root) / name for root, names, _ in os.walk(top) for name in names),
            key=lambda d: len(d.parts),
            reverse=True,
        )
        for d in [*dirs, top]:
            for _ in range(20):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def nft_tables() -> list[tuple[str, str]]:
    """The node's nft tables that exist now."""
    proc = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=False)
    present = {tuple(ln.split()[1:3]) for ln in proc.stdout.splitlines() if ln.startswith("table")}
    return [t for t in NFT_TABLES if t in present]


def _nft(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nft", *args], capture_output=True, text=True, check=False)


def _kube_chains(family: str, table: str) -> tuple[list[str], list[str], bool]:
    """In one iptables-nft table: the KUBE-* chains, the handles of other chains' rules that
    jump to them, and whether any rule is left that is not the kubelet's."""
    proc = _nft(["-j", "list", "table", family, table])
    if proc.returncode != 0:
        return [], [], False
    items = json.loads(proc.stdout).get("nftables", [])
    chains = [i["chain"]["name"] for i in items if "chain" in i]
    kube = [c for c in chains if c.startswith("KUBE-")]
    jumps: list[str] = []
    others = False
    for rule in (i["rule"] for i in items if "rule" in i):
        if rule["chain"].startswith("KUBE-"):
            continue
        targets = [e["jump"]["target"] for e in rule["expr"] if isinstance(e, dict) and "jump" in e]
        if any(t.startswith("KUBE-") for t in targets):
            jumps.append(rule["chain"] + f" handle {rule['handle']}")
        else:
            others = True
    return kube, jumps, others


def kubelet_iptables() -> list[str]:
    """The kubelet's iptables (canary, hint, firewall) chains that exist now."""
    return [
        f"{family} {table} {chain}"
        for family, table in IPTABLES_TABLES
        for chain in _kube_chains(family, table)[0]
    ]


def _remove_kubelet_iptables() -> None:
    """Drop the kubelet's KUBE-* chains, and a table nothing else uses any more."""
    for family, table in IPTABLES_TABLES:
        kube, jumps, others = _kube_chains(family, table)
        if not kube:
            continue
        for jump in jumps:
            chain, handle = jump.split(" handle ")
            _nft(["delete", "rule", family, table, chain, "handle", handle])
        for chain in kube:
            _nft(["flush", "chain", family, table, chain])
        for chain in kube:
            _nft(["delete", "chain", family, table, chain])
        if not others:
            _nft(["delete", "table", family, table])


def bridge_exists() -> bool:
    return Path(f"/sys/class/net/{BRIDGE}").exists()


def teardown(containerd_root: Path, saved_sysctls: dict[str, str]) -> list[str]:
    """Remove what the node left on the host (its processes must be stopping or gone).

    Returns what could not be removed, for the caller to report.
    """
    _kill_all(node_processes)
    for point in node_mounts((containerd_root,)):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    _remove_cgroups()
    for family, name in nft_tables():
        _nft(["delete", "table", family, name])
    _remove_kubelet_iptables()
    if bridge_exists():
        subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True, check=False)
    for path in (*HOST_PATHS, containerd_root):
        shutil.rmtree(path, ignore_errors=True)
    _restore_sysctls(saved_sysctls)
    return leftovers(containerd_root, saved_sysctls)


def leftovers(containerd_root: Path, saved_sysctls: dict[str, str]) -> list[str]:
    """What of the node is still on the host (empty after a clean ``down``)."""
    left = [f"process {p}" for p in sorted(node_processes())]
    left += [f"cgroup {c}" for c in pod_cgroups()]
    left += [f"mount {m}" for m in node_mounts((containerd_root,))]
    left += [f"nft table {f} {n}" for f, n in nft_tables()]
    left += [f"iptables chain {c}" for c in kubelet_iptables()]
    left += [f"link {BRIDGE}"] if bridge_exists() else []
    left += [f"path {p}" for p in (*HOST_PATHS, containerd_root) if p.exists()]
    now = read_sysctls()
    left += [
        f"sysctl {k}={now.get(k)} (was {v})" for k, v in saved_sysctls.items() if now.get(k) != v
    ]
    return left
