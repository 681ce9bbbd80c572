"""`kubetune.incluster` on a real API server: a pod's way in (its ServiceAccount token and CA
files, `KUBERNETES_SERVICE_HOST`/`_PORT`) without the `kubernetes` package, through the same
`Kube` calls the services make."""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import errors, incluster
from kubetune.incluster import InCluster, NotInCluster
from kubetune.kube import CONFIGMAPS, NAMESPACES, SERVICE_ACCOUNTS, Kube
from kubetune_testkit.accounts import bind_role, service_account_token

pytestmark = pytest.mark.integration


def _environment(cluster: Any, directory: Path) -> dict[str, str]:
    """The cluster's address as a pod's environment, its CA written where a pod has it."""
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    entry = config["clusters"][0]["cluster"]
    (directory / "ca.crt").write_bytes(base64.b64decode(entry["certificate-authority-data"]))
    server = urllib.parse.urlsplit(entry["server"])
    return {incluster.HOST_ENV: server.hostname or "", incluster.PORT_ENV: str(server.port)}


@pytest.fixture
def pod_dir(
    cluster: Any, kube: Kube, namespace: str, tmp_path: Path
) -> tuple[Path, dict[str, str]]:
    """A ServiceAccount `worker` that may edit the namespace, its token and CA as a pod sees."""
    kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": "worker"}}, namespace)
    bind_role(kube, namespace, "worker-edit", ("ClusterRole", "edit"), ("worker",))
    (tmp_path / "token").write_text(service_account_token(cluster, "worker", namespace))
    return tmp_path, _environment(cluster, tmp_path)


def test_a_pod_reads_writes_and_watches_with_its_token(
    pod_dir: tuple[Path, dict[str, str]], namespace: str
) -> None:
    directory, environ = pod_dir
    pod = Kube(InCluster.from_environment(environ, directory=directory))
    body = {"metadata": {"name": "cm", "labels": {"app": "x"}}, "data": {"a": "1"}}
    created = pod.create(CONFIGMAPS, body, namespace)
    seen: list[dict[str, Any]] = []
    watching = threading.Thread(
        target=lambda: seen.extend(
            pod.watch(
                CONFIGMAPS,
                namespace,
                resource_version=created["metadata"]["resourceVersion"],
                timeout_seconds=3,
                label_selector="app=x",
            )
        )
    )
    watching.start()
    pod.patch(CONFIGMAPS, "cm", {"data": {"a": "2"}}, namespace)
    assert pod.get(CONFIGMAPS, "cm", namespace)["data"] == {"a": "2"}
    page = pod.list(CONFIGMAPS, namespace, label_selector="app=x", limit=5)
    assert [item["metadata"]["name"] for item in page["items"]] == ["cm"]
    watching.join(15)
    assert [(e["type"], e["object"]["data"]) for e in seen if e["type"] != "BOOKMARK"] == [
        ("MODIFIED", {"a": "2"})
    ]
    pod.delete(CONFIGMAPS, "cm", namespace)
    with pytest.raises(errors.NotFound):
        pod.get(CONFIGMAPS, "cm", namespace)
    # The token's own rights, no more: namespaces are not the worker's to list.
    with pytest.raises(errors.Forbidden):
        pod.list(NAMESPACES)


def test_a_rotated_token_is_read_again(
    pod_dir: tuple[Path, dict[str, str]], namespace: str
) -> None:
    directory, environ = pod_dir
    good = (directory / "token").read_text()
    (directory / "token").write_text("not-a-token")
    transport = InCluster.from_environment(environ, directory=directory)
    transport.reread_seconds = 0.0
    pod = Kube(transport)
    with pytest.raises(errors.ApiError) as refused:
        pod.list(CONFIGMAPS, namespace)
    assert refused.value.status == 401
    (directory / "token").write_text(good)
    names = [item["metadata"]["name"] for item in pod.list(CONFIGMAPS, namespace)["items"]]
    assert names == ["kube-root-ca.crt"]


def test_a_kept_connection_is_reused_unless_it_was_closed_while_idle(
    pod_dir: tuple[Path, dict[str, str]], namespace: str
) -> None:
    """Keep-alive: the next request goes over the same connection; one found closed (as the
    server closes idle ones) is dropped, not written to."""
    directory, environ = pod_dir
    transport = InCluster.from_environment(environ, directory=directory)
    pod = Kube(transport)
    pod.list(CONFIGMAPS, namespace)
    (kept,) = transport.pool._idle
    pod.get(CONFIGMAPS, "kube-root-ca.crt", namespace)
    assert transport.pool._idle == [kept]
    kept.stream._sock.shutdown(socket.SHUT_RDWR)  # at EOF, as when the server closed it
    pod.patch(CONFIGMAPS, "kube-root-ca.crt", {"metadata": {"labels": {"seen": "yes"}}}, namespace)
    (fresh,) = transport.pool._idle
    assert fresh is not kept


def test_what_is_missing_is_named(tmp_path: Path) -> None:
    with pytest.raises(NotInCluster, match="KUBERNETES_SERVICE_HOST"):
        InCluster.from_environment({}, directory=tmp_path)
    environ = {incluster.HOST_ENV: "10.0.0.1", incluster.PORT_ENV: "443"}
    with pytest.raises(NotInCluster, match=r"ca\.crt is missing"):
        InCluster.from_environment(environ, directory=tmp_path)
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    with pytest.raises(NotInCluster, match="token"):
        InCluster.from_environment(environ, directory=tmp_path)
    (tmp_path / "token").write_text("\n")
    with pytest.raises(NotInCluster, match=r"token .* is empty"):
        InCluster.from_environment(environ, directory=tmp_path)
    assert incluster.host_url("fd00::1", "6443") == "https://[fd00::1]:6443"


def test_connect_in_a_pod_does_not_import_the_kubernetes_package(
    pod_dir: tuple[Path, dict[str, str]], namespace: str, tmp_path: Path
) -> None:
    """What the collector pays at start: no kubeconfig around, so `connect` goes in-cluster,
    and a request works without `kubernetes` ever imported."""
    directory, environ = pod_dir
    script = (
        "import sys\n"
        "from kubetune import incluster\n"
        f"incluster.SERVICE_ACCOUNT_DIR = {str(directory)!r}\n"
        "from kubetune.kube import CONFIGMAPS, Kube, connect\n"
        f"Kube(connect()).list(CONFIGMAPS, {namespace!r})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    env = {**environ, "HOME": str(home), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
