"""The real node (``localcluster up --node kubelet``) on this machine: pods from a locally
made image run, their logs and exec work, cluster DNS and a ClusterIP Service answer, and
``down`` leaves nothing on the host. Needs root and ``localcluster build-node`` (tox -e node).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from nodehelpers import NEEDS_ROOT, apply, kubectl, pod_ready, up_when_free, wait_for

from localcluster import cluster, node, nodebuild, ociimage

pytestmark = NEEDS_ROOT

# From Debian's busybox-static (tox -e node installs it).
TEST_IMAGE = "localcluster.local/busybox:test"
APPLETS = ("sh", "cat", "sleep", "httpd", "nc", "nslookup", "mkdir", "printf")
HOST_PATHS = ("/var/lib/kubelet", "/var/lib/cni", "/var/log/containers", "/var/log/pods")


def pod(name: str, script: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                }
            ],
        },
    }


def host_snapshot() -> dict[str, object]:
    """What the tests compare before ``up`` and after ``down``."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    return {
        "sysctls": node.read_sysctls(),
        "nft tables": sorted(tables.splitlines()),
        "veths": sorted(ln.split(":")[1].strip() for ln in links.splitlines() if "veth" in ln),
    }


@pytest.fixture(scope="module")
def snapshot() -> dict[str, object]:
    """Filled by ``real_node`` right before its ``up``, when no other real node runs."""
    return {}


@pytest.fixture(scope="module")
def real_node(
    snapshot: dict[str, object], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[cluster.State]:
    missing = nodebuild.binaries().missing()
    if missing:
        pytest.fail(f"node binaries missing ({missing}): run `localcluster build-node`")
    state_dir = tmp_path_factory.mktemp("real-node")
    state = up_when_free(state_dir, before=lambda: snapshot.update(host_snapshot()))
    path = ociimage.write(ociimage.busybox(TEST_IMAGE, APPLETS), state_dir / "busybox.tar")
    # Through the command users run.
    loaded = subprocess.run(
        [sys.executable, "-m", "localcluster", "load", str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert f"busybox.tar: {TEST_IMAGE}" in loaded.stdout
    yield state
    cluster.down(state_dir, quiet=True)


def test_the_node_is_ready_with_its_own_identity(real_node: cluster.State) -> None:
    out = json.loads(kubectl(real_node, "get", "node", cluster.NODE_NAME, "-o", "json"))
    info = out["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.35.4"
    assert info["containerRuntimeVersion"] == "containerd://2.4.2"
    assert {"type": "InternalIP", "address": real_node.node_ip} in out["status"]["addresses"]
    # The kubelet signs in as the node (system:node:<name> in system:nodes, from the cluster's
    # client CA), which the Node authorizer lets renew the node's own lease.
    kcfg = yaml.safe_load((real_node.node_dir / "kubelet.kubeconfig").read_text())
    pem = base64.b64decode(kcfg["users"][0]["user"]["client-certificate-data"])
    cert = x509.load_pem_x509_certificate(pem)
    assert cert.subject.rfc4514_string() == f"CN=system:node:{cluster.NODE_NAME},O=system:nodes"
    ca = x509.load_pem_x509_certificate(
        (Path(real_node.state_dir) / "pki/client-ca.crt").read_bytes()
    )
    assert cert.issuer == ca.subject

    def lease_holder() -> str:
        out = kubectl(
            real_node, "-n", "kube-node-lease", "get", "lease", cluster.NODE_NAME,
            "-o", "jsonpath={.spec.holderIdentity}", check=False,
        )  # fmt: skip
        return out

    wait_for("the node's lease", lambda: lease_holder() == cluster.NODE_NAME)


def test_a_pod_from_a_local_image_runs_logs_and_exec(real_node: cluster.State) -> None:
    apply(real_node, pod("echo", "echo hello-from-the-node; exec sleep 3600"))
    wait_for("pod echo Ready", lambda: pod_ready(real_node, "echo"))
    wait_for("its log", lambda: "hello-from-the-node" in kubectl(real_node, "logs", "echo"))
    out = kubectl(real_node, "exec", "echo", "--", "cat", "/etc/hostname")
    assert out.strip() == "echo"


def test_cluster_dns_resolves_the_kubernetes_service(real_node: cluster.State) -> None:
    apply(real_node, pod("dns", "exec sleep 3600"))
    wait_for("pod dns Ready", lambda: pod_ready(real_node, "dns"))

    def lookup() -> str:
        return kubectl(
            real_node, "exec", "dns", "--", "nslookup", "kubernetes.default.svc.cluster.local",
            check=False,
        )  # fmt: skip

    wait_for("kubernetes.default resolved to 10.0.0.1", lambda: "10.0.0.1" in lookup())


def test_a_cluster_ip_service_reaches_a_pod(real_node: cluster.State) -> None:
    server = pod(
        "web",
        "mkdir -p /www && echo served-by-web > /www/index.html && exec httpd -f -p 8080 -h /www",
        labels={"app": "web"},
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    apply(real_node, server, service, pod("client", "exec sleep 3600"))
    wait_for("pods Ready", lambda: pod_ready(real_node, "web") and pod_ready(real_node, "client"))

    def fetch() -> str:
        request = 'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc web.default.svc.cluster.local 80'
        return kubectl(real_node, "exec", "client", "--", "sh", "-c", request, check=False)

    wait_for("the Service answered through kube-proxy", lambda: "served-by-web" in fetch())


def test_a_secret_s_new_data_reaches_a_running_pod_within_its_resync(
    real_node: cluster.State,
) -> None:
    """Webhook servers that write their own certificate into a mounted Secret (the
    training-operator's rotator) wait for this: the kubelet resyncs each pod every 10 s, not
    the default minute, so the new data shows without a container event."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "rotated", "namespace": "default"},
        "stringData": {"tls.crt": "first"},
    }
    mounted = pod("mounts", "exec sleep 3600")
    spec = mounted["spec"]
    assert isinstance(spec, dict)
    spec["volumes"] = [{"name": "cert", "secret": {"secretName": "rotated"}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "cert", "mountPath": "/cert"}]
    apply(real_node, secret, mounted)
    wait_for("pod mounts Ready", lambda: pod_ready(real_node, "mounts"))

    def seen() -> str:
        return kubectl(real_node, "exec", "mounts", "--", "cat", "/cert/tls.crt", check=False)

    wait_for("the first data", lambda: seen() == "first")
    apply(real_node, {**secret, "stringData": {"tls.crt": "second"}})
    # Under the default one-minute resync (plus jitter) this takes 60-90 s.
    wait_for("the new data in the volume", lambda: seen() == "second", timeout=45)


def test_a_second_real_node_is_refused_while_one_runs(
    real_node: cluster.State, tmp_path: Path
) -> None:
    with pytest.raises(
        cluster.ClusterError, match=f"already runs on this machine from {real_node.state_dir}"
    ):
        cluster.up(tmp_path / "second", node_mode="kubelet", quiet=True)
    assert pod_ready(real_node, "echo"), "the running node was disturbed"


def test_down_leaves_nothing_behind(real_node: cluster.State, snapshot: dict[str, object]) -> None:
    containerd_root = real_node.node_dir / "containerd-root"
    assert cluster.down(Path(real_node.state_dir), quiet=True)
    bins = nodebuild.binaries()
    own = {str(p) for p in bins.paths.values()}
    running = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/exe") in own:
                    running.append(entry)
            except OSError:
                pass
    assert running == [], "node processes still run"
    assert [p for p in Path("/sys/fs/cgroup").glob("*/kubepods")] == []
    mounts = Path("/proc/self/mountinfo").read_text()
    for prefix in ("/var/lib/kubelet", "/run/localcluster-node", str(containerd_root)):
        assert f" {prefix}" not in mounts, f"a mount under {prefix} is left"
    ruleset = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout
    assert "kube-proxy" not in ruleset and "cni" not in ruleset and "KUBE-" not in ruleset
    assert not Path(f"/sys/class/net/{node.BRIDGE}").exists()
    for path in (*HOST_PATHS, "/run/localcluster-node", str(containerd_root)):
        assert not Path(path).exists(), f"{path} is left"
    assert host_snapshot() == snapshot


def test_a_node_killed_without_down_is_cleaned_by_the_next_up(
    snapshot: dict[str, object], tmp_path: Path
) -> None:
    """A CI job killed mid-run leaves its pods (shims re-parented to PID 1), veths, nft tables
    and the bridge; the next ``up`` removes them before it starts, and its ``down`` then leaves
    the host as it was before either node (the module's node ran and went down first)."""
    assert snapshot, "the module's real node ran first"
    first = up_when_free(tmp_path / "first")
    node.load(ociimage.write(ociimage.busybox(TEST_IMAGE, APPLETS), tmp_path / "busybox.tar"))
    apply(first, pod("left", "exec sleep 3600"))
    wait_for("pod left Ready", lambda: pod_ready(first, "left"))
    for comp in first.components.values():  # as a killed job: no `down`
        with contextlib.suppress(ProcessLookupError):
            os.killpg(comp.pid, signal.SIGKILL)
    left = node.leftovers(first.node_dir / "containerd-root", {})
    assert any(item.startswith("process") for item in left), left
    assert any("veth" in ln for ln in subprocess.run(
        ["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines())  # fmt: skip

    second = up_when_free(tmp_path / "second")
    assert not Path(first.state_dir).exists(), "the dead node's state was not removed"
    assert cluster.down(Path(second.state_dir), quiet=True)
    assert host_snapshot() == snapshot
