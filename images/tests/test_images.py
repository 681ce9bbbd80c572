"""The built images (`python3 images/build.py`), run as a cluster would run them.

Every container runs as the image's own user with a read-only root filesystem (`--read-only`),
on the host network against the session's local control plane. /tmp is a tmpfs only where a
kubeconfig with embedded credentials is used: the client writes those to temporary files,
which the in-cluster configuration (token and CA read from their mounted files) never does.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import ssl
import subprocess
import sys
import tarfile
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import errors, wrapperscript
from kubetune.kube import CUSTOM_RESOURCE_DEFINITIONS, EXPERIMENTS, SUGGESTIONS, TRIALS, Kube
from kubetune_testkit.processes import free_port
from kubetune_testkit.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
TAG = "dev"
SERVICES = (
    "experiment-controller",
    "suggestion-controller",
    "trial-controller",
    "webhook",
    "suggestion-algorithm",
    "pns-collector",
    "db-manager",
    "ui",
)
CONTROLLERS = ("experiment-controller", "suggestion-controller", "trial-controller")
COLLECTOR_LIMIT = 60_000_000
UID = 65532


_BUILT: set[str] = set()


def image(service: str) -> str:
    """The service's image, which must have been built (`python3 images/build.py`)."""
    name = f"kubetune/{service}:{TAG}"
    if name not in _BUILT:
        if docker("image", "inspect", name, check=False).returncode != 0:
            pytest.fail(f"{name} is not built: run `python3 images/build.py`", pytrace=False)
        _BUILT.add(name)
    return name


def docker(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=check, timeout=timeout
    )


@pytest.fixture
def containers() -> Iterator[Callable[..., str]]:
    """`run(*docker_run_args)` starts a detached container, removed after the test."""
    started: list[str] = []

    def run(*args: str) -> str:
        name = f"kubetune-test-{uuid.uuid4().hex[:8]}"
        docker("run", "-d", "--name", name, *args)
        started.append(name)
        return name

    yield run
    for name in started:
        logs = docker("logs", name, check=False)
        print(f"--- {name}\n{logs.stdout}{logs.stderr}")
        docker("rm", "-f", name, check=False)


def process_uid(container: str) -> int:
    """The real UID of the container's main process, read from the host's /proc."""
    pid = docker("inspect", "-f", "{{.State.Pid}}", container).stdout.strip()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {container}")


def get(url: str, context: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as answer:
            return int(answer.status)
    except OSError:
        return 0


@pytest.fixture(scope="session")
def kubeconfig(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The admin kubeconfig, readable by the images' user (the original is root's, 0600)."""
    copy = tmp_path_factory.mktemp("kubeconfig") / "config"
    copy.write_bytes(Path(cluster.kubeconfig).read_bytes())
    copy.chmod(0o644)
    return copy


@pytest.fixture
def kube_args(kubeconfig: Path) -> list[str]:
    return [
        "--network=host",
        "--read-only",
        "--tmpfs=/tmp",
        f"--volume={kubeconfig}:/kubeconfig:ro",
    ]


@pytest.fixture(scope="session")
def kube(cluster: Any) -> Kube:
    kube = Kube(cluster.api_client())
    for path in sorted((REPO / "kustomize" / "base" / "crds").glob("*.kubeflow.org.yaml")):
        with contextlib.suppress(errors.AlreadyExists):
            kube.create(CUSTOM_RESOURCE_DEFINITIONS, yaml.safe_load(path.read_text()))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=120s", "crd", "--all")
    return kube


def load_build() -> Any:
    """images/build.py as a module (it is a script, not an installed package)."""
    spec = importlib.util.spec_from_file_location("images_build", REPO / "images" / "build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_without_docker_build_stops_naming_the_package(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "images" / "build.py")],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(tmp_path), "KUBETUNE_CACHE": str(tmp_path)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "docker is not installed: install the docker.io package" in done.stderr


@pytest.mark.parametrize(
    ("tool", "package"), [("docker", "docker.io"), ("debootstrap", "debootstrap")]
)
def test_a_missing_tool_names_its_package(
    tool: str, package: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = load_build()
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.BuildError, match=rf"install the {package} package \(apt-get install"):
        build.need_tool(tool, package, "why")


@pytest.mark.parametrize("service", SERVICES)
def test_help_exits_0_as_non_root_on_a_read_only_root(service: str) -> None:
    done = docker("run", "--rm", "--read-only", "--network=none", image(service), "--help")
    assert done.returncode == 0
    assert f"usage: {service}" in done.stdout


@pytest.mark.parametrize("service", SERVICES)
def test_image_holds_only_the_runtime(service: str) -> None:
    """Its script as entrypoint (the collector: that script's code), a numeric non-root user,
    and no shell, installer, compiler, package manager or cache in the files."""
    config = json.loads(docker("image", "inspect", image(service)).stdout)[0]["Config"]
    if service == "pns-collector":  # its script's code, run without `site` (see the Dockerfile)
        python, *flags, code = config["Entrypoint"]
        assert (python, flags) == ("/opt/kubetune/bin/python3", ["-I", "-S", "-u", "-c"])
        assert "from kubetune_pns_collector.main import run; run()" in code
    else:
        assert config["Entrypoint"] == [service]
    assert config["User"] == f"{UID}:{UID}"
    created = docker("create", image(service)).stdout.strip()
    try:
        exported = subprocess.run(
            ["docker", "export", created], capture_output=True, check=True, timeout=120
        ).stdout
    finally:
        docker("rm", created, check=False)
    with tarfile.open(fileobj=io.BytesIO(exported)) as tar:
        names = tar.getnames()
    forbidden = [
        n
        for n in names
        if Path(n).name in ("sh", "bash", "dash", "apt", "apt-get", "dpkg", "gcc", "cc", "pip")
        or "/site-packages/pip/" in n
        or "/site-packages/setuptools/" in n
        or n.startswith(("var/cache/", "var/lib/apt", "var/lib/dpkg", "root/.cache"))
    ]
    assert not forbidden, forbidden
    assert f"opt/kubetune/bin/{service}" in names


def test_collector_is_smallest_and_below_60_mb() -> None:
    sizes = {
        s: int(docker("image", "inspect", "-f", "{{.Size}}", image(s)).stdout) for s in SERVICES
    }
    print("image sizes (MB):", {s: round(n / 1e6, 1) for s, n in sizes.items()})
    assert sizes["pns-collector"] < COLLECTOR_LIMIT, sizes
    assert sizes["pns-collector"] == min(sizes.values()), sizes


@pytest.mark.integration
@pytest.mark.parametrize("service", CONTROLLERS)
def test_controller_answers_its_probes(
    service: str, cluster: Any, kube: Kube, containers: Callable[..., str], kube_args: list[str]
) -> None:
    port = free_port()
    name = containers(
        *kube_args,
        image(service),
        "--kubeconfig=/kubeconfig",
        f"--probe-port={port}",
        "--probe-address=127.0.0.1",
        "--no-leader-elect",
    )
    wait_for("/healthz", lambda: get(f"http://127.0.0.1:{port}/healthz") == 200)
    wait_for("/readyz", lambda: get(f"http://127.0.0.1:{port}/readyz") == 200)
    assert process_uid(name) == UID


@pytest.mark.integration
def test_webhook_serves_https_probes(
    cluster: Any, kube: Kube, containers: Callable[..., str], tmp_path: Path, kube_args: list[str]
) -> None:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
            str(tmp_path / "tls.key"),
            "-out",
            str(tmp_path / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )
    # Readable by the image's user, as a mounted Secret is (pytest's dirs are 0700).
    tmp_path.chmod(0o755)
    (tmp_path / "tls.key").chmod(0o644)
    port = free_port()
    name = containers(
        *kube_args,
        f"--volume={tmp_path}:/certs:ro",
        image("webhook"),
        "serve",
        "--kubeconfig=/kubeconfig",
        "--address=127.0.0.1",
        f"--port={port}",
        "--cert-file=/certs/tls.crt",
        "--key-file=/certs/tls.key",
    )
    insecure = ssl.create_default_context(cafile=str(tmp_path / "tls.crt"))
    insecure.check_hostname = False
    wait_for("/readyz", lambda: get(f"https://127.0.0.1:{port}/readyz", insecure) == 200)
    assert get(f"https://127.0.0.1:{port}/healthz", insecure) == 200
    assert process_uid(name) == UID


@pytest.mark.integration
def test_algorithm_serves_one_experiment(
    cluster: Any, kube: Kube, namespace: str, containers: Callable[..., str], kube_args: list[str]
) -> None:
    algorithm = {"algorithmName": "tpe", "algorithmSettings": []}
    kube.create(
        EXPERIMENTS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Experiment",
            "metadata": {"name": "exp", "namespace": namespace},
            "spec": {
                "parameters": [
                    {
                        "name": "lr",
                        "parameterType": "double",
                        "feasibleSpace": {"min": "0.01", "max": "0.1"},
                    },
                    {
                        "name": "n",
                        "parameterType": "discrete",
                        "feasibleSpace": {"list": ["1", "3"]},
                    },
                ],
                "objective": {"type": "maximize", "objectiveMetricName": "acc"},
                "algorithm": algorithm,
            },
        },
        namespace,
    )
    kube.create(
        SUGGESTIONS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Suggestion",
            "metadata": {"name": "exp", "namespace": namespace},
            "spec": {"algorithm": algorithm, "requests": 3, "resumePolicy": "Never"},
        },
        namespace,
    )
    port = free_port()
    name = containers(
        *kube_args,
        "--tmpfs=/opt/katib/data:uid=65532",  # the Deployment's emptyDir or PVC
        image("suggestion-algorithm"),
        "--kubeconfig=/kubeconfig",
        "--suggestion=exp",
        f"--namespace={namespace}",
        "--algorithm=tpe",
        f"--probe-port={port}",
    )

    def assigned() -> list[Any] | None:
        status = kube.get(SUGGESTIONS, "exp", namespace).get("status") or {}
        found = list(status.get("suggestions") or [])
        return found if len(found) == 3 else None

    suggestions = wait_for("3 assignments", assigned, 180)
    for suggestion in suggestions:
        values = {a["name"]: a["value"] for a in suggestion["parameterAssignments"]}
        assert 0.01 <= float(values["lr"]) <= 0.1 and values["n"] in ("1", "3")
    assert get(f"http://127.0.0.1:{port}/healthz") == 200
    assert process_uid(name) == UID


@pytest.mark.integration
def test_collector_wraps_and_collects_a_real_process(
    cluster: Any,
    kube: Kube,
    namespace: str,
    containers: Callable[..., str],
    tmp_path: Path,
    kube_args: list[str],
) -> None:
    """The training container (the base image, root, its command wrapped as the webhook wraps
    it) and the collector share a process namespace (a sandbox's) and the log dir, as in a
    trial pod."""
    log_dir = "/var/log/katib"
    shared = tmp_path / "katib"
    shared.mkdir()
    shared.chmod(0o777)  # an emptyDir: both containers write records there
    kube.create(
        TRIALS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Trial",
            "metadata": {"name": "t"},
            "spec": {
                "objective": {
                    "type": "minimize",
                    "objectiveMetricName": "loss",
                    "metricStrategies": [{"name": "loss", "value": "min"}],
                },
                "primaryContainerName": "main",
                "metricsCollector": {"collector": {"kind": "StdOut"}},
                "runSpec": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "t"}},
            },
        },
        namespace,
    )
    train = 'for i in 1 2 3 4; do echo "epoch $i: loss=0.$((9 - i))"; sleep 0.5; done'
    argv = wrapperscript.wrap_argv(
        ["sh", "-c", "sleep 3; " + train], log_dir, metrics_file=f"{log_dir}/metrics.log"
    )
    # The pod's process namespace belongs to its sandbox (pause), which outlives both.
    sandbox = containers("kubetune/base:bookworm", "sleep", "infinity")
    containers(
        f"--pid=container:{sandbox}",
        f"--volume={shared}:{log_dir}",
        "kubetune/base:bookworm",
        *argv,
    )
    collector = containers(
        *kube_args,
        f"--pid=container:{sandbox}",
        f"--volume={shared}:{log_dir}",
        image("pns-collector"),
        "--kubeconfig=/kubeconfig",
        "--trial-name=t",
        f"--namespace={namespace}",
        "--objective-metric=loss",
        "--objective-type=minimize",
        "--metric-strategies=loss=min",
        f"--metrics-path={log_dir}/metrics.log",
        f"--log-dir={log_dir}",
    )

    def exited() -> str:
        state = docker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", collector)
        return state.stdout.strip() if state.stdout.startswith("exited") else ""

    assert wait_for("the collector to exit", exited, 120) == "exited 0"
    observation = kube.get(TRIALS, "t", namespace)["status"]["observation"]
    loss = {m["name"]: m for m in observation["metrics"]}["loss"]
    assert float(loss["min"]) == pytest.approx(0.5) and float(loss["latest"]) == pytest.approx(0.5)
