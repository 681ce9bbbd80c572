"""Fixtures of the integration tests: the CRDs, a client, the trial-controller as a real process
(its console script, against the test cluster, watching only the test's namespace), and small
helpers to make Trials and wait for their state.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import errors
from kubetune.kube import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CUSTOM_RESOURCE_DEFINITIONS,
    SERVICE_ACCOUNTS,
    TRIALS,
    Kube,
    connect,
)
from localcluster import thirdparty

REPO = Path(__file__).resolve().parents[3]
CRDS = REPO / "kustomize" / "base" / "crds"
COLLECTOR_ROLE = REPO / "kustomize" / "base" / "trial-controller" / "collector-clusterrole.yaml"
ROLE_FILE = REPO / "kustomize" / "base" / "trial-controller" / "clusterrole.yaml"
SCRIPT = shutil.which("trial-controller") or str(Path(sys.executable).parent / "trial-controller")


def wait_for(
    what: str, probe: Callable[[], Any], timeout: float = 60.0, interval: float = 0.1
) -> Any:
    """Poll `probe` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def conditions_of(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def is_true(obj: dict[str, Any] | None, type_: str) -> bool:
    return conditions_of(obj).get(type_, {}).get("status") == "True"


def apply_crd(kube: Kube, path: Path) -> tuple[str, bool]:
    """Create a CRD unless present; wait until Established. Returns (name, created by us)."""
    body = yaml.safe_load(path.read_text())
    name = body["metadata"]["name"]
    created = False
    if kube.get_or_none(CUSTOM_RESOURCE_DEFINITIONS, name) is None:
        try:
            kube.create(CUSTOM_RESOURCE_DEFINITIONS, body)
            created = True
        except errors.AlreadyExists:
            pass

    def established() -> bool:
        crd = kube.get_or_none(CUSTOM_RESOURCE_DEFINITIONS, name) or {}
        return any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (crd.get("status") or {}).get("conditions") or []
        )

    wait_for(f"CRD {name} established", established, 60)
    # Discovery lags a little behind Established.
    group, version, kind = body["spec"]["group"], body["spec"]["versions"][0]["name"], None
    kind = body["spec"]["names"]["kind"]

    def served() -> bool:
        try:
            kube.resource_for(f"{group}/{version}", kind)
            return True
        except errors.NotFound:
            return False

    wait_for(f"{kind} served", served, 60)
    return name, created


@pytest.fixture(scope="session")
def kube(cluster: Any) -> Kube:
    return Kube(connect(cluster.kubeconfig))


@pytest.fixture(scope="session")
def crds(kube: Kube) -> Iterator[None]:
    """kubetune's CRDs (left installed: the other services share them) and the collector role."""
    for path in sorted(CRDS.glob("*.kubeflow.org.yaml")):
        apply_crd(kube, path)
    role = yaml.safe_load(COLLECTOR_ROLE.read_text())
    made_role = False
    if kube.get_or_none(CLUSTER_ROLES, role["metadata"]["name"]) is None:
        kube.create(CLUSTER_ROLES, role)
        made_role = True
    yield
    if made_role:
        with contextlib.suppress(errors.NotFound):
            kube.delete(CLUSTER_ROLES, role["metadata"]["name"])


@pytest.fixture(scope="session")
def thirdparty_crds(kube: Kube, crds: None) -> Iterator[Callable[[str | Path], None]]:
    """Install a CRD on demand; remove at the end those this session added.

    A file name is a real operator's CRD from its Go module (`localcluster.thirdparty`, fetched
    by `localcluster build`); a Path is a CRD file of these tests.
    """
    ours: list[str] = []

    def install(filename: str | Path) -> None:
        path = filename if isinstance(filename, Path) else thirdparty.crd_path(filename)
        name, created = apply_crd(kube, path)
        if created:
            ours.append(name)

    yield install
    for name in ours:
        with contextlib.suppress(errors.NotFound):
            kube.delete(CUSTOM_RESOURCE_DEFINITIONS, name)


@pytest.fixture
def limited_kubeconfig(cluster: Any, kube: Kube, namespace: str, tmp_path: Path) -> Iterator[str]:
    """A kubeconfig with the token of a ServiceAccount that holds only the shipped role."""
    name = f"kubetune-trial-controller-test-{namespace}"
    role = yaml.safe_load(ROLE_FILE.read_text())
    role["metadata"] = {"name": name}
    kube.create(CLUSTER_ROLES, role)
    kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": "trial-controller"}}, namespace)
    kube.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "trial-controller", "namespace": namespace}
            ],
        },
    )
    try:
        token = cluster.kubectl(
            "create", "token", "trial-controller", "-n", namespace, "--duration=1h"
        ).stdout.strip()
        config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
        config["users"] = [{"name": "limited", "user": {"token": token}}]
        for context in config["contexts"]:
            context["context"]["user"] = "limited"
        path = tmp_path / "limited.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        yield str(path)
    finally:
        for resource in (CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES):
            with contextlib.suppress(errors.NotFound):
                kube.delete(resource, name)


@dataclass
class ControllerProcess:
    """The `trial-controller` console script run against the test cluster."""

    kubeconfig: str
    namespace: str
    log_dir: Path
    extra: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    runs: int = 0
    ident: str = "a"

    def start(self, *extra: str) -> ControllerProcess:
        assert self.proc is None or self.proc.poll() is not None
        self.runs += 1
        args = [
            SCRIPT,
            "--kubeconfig",
            self.kubeconfig,
            "--watch-namespace",
            self.namespace,
            "--probe-port=0",
            "--log-level=debug",
            *self.extra,
            *extra,
        ]
        with (self.log_dir / f"trial-controller-{self.ident}{self.runs}.log").open("wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        return self

    def kill(self) -> None:
        """SIGKILL: the harshest restart, no cleanup at all."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> int | None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(30)
        return self.proc.returncode if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-6000:]}"
            for p in sorted(self.log_dir.glob(f"trial-controller-{self.ident}*.log"))
        )


@pytest.fixture
def controller(
    cluster: Any, namespace: str, crds: None, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ControllerProcess]]:
    """A factory: `controller("--trial-resources", "...")` starts the controller (once)."""
    handles: list[ControllerProcess] = []

    def start(
        *extra: str, kubeconfig: str | None = None, leader_elect: bool = False
    ) -> ControllerProcess:
        if leader_elect:
            extra = ("--leader-elect", f"--leader-election-namespace={namespace}", *extra)
        else:
            extra = ("--no-leader-elect", *extra)
        handle = ControllerProcess(
            kubeconfig or cluster.kubeconfig,
            namespace,
            tmp_path,
            list(extra),
            ident="abcdefgh"[len(handles)],
        )
        handles.append(handle)
        return handle.start()

    yield start
    for handle in handles:
        code = handle.stop()
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            print(handle.logs())
        assert code in (0, None, -9), f"controller exited {code}\n{handle.logs()}"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, "rep_" + report.when, report)
    return report


def batch_job(command: str, *, service_account: str | None = None) -> dict[str, Any]:
    """A batch/v1 Job whose pod runs `command` in a shell (the node agent runs it on the host)."""
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "training-container", "image": "busybox", "command": ["sh", "-c", command]}
        ],
    }
    if service_account:
        pod["serviceAccountName"] = service_account
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {},
        "spec": {"backoffLimit": 0, "template": {"spec": pod}},
    }


def trial(
    name: str,
    run_spec: dict[str, Any],
    *,
    retain: bool = True,
    success: str | None = None,
    failure: str | None = None,
    collector: str = "StdOut",
    experiment: str = "exp",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "objective": {
            "type": "maximize",
            "objectiveMetricName": "accuracy",
            "metricStrategies": [{"name": "accuracy", "value": "max"}],
        },
        "parameterAssignments": [{"name": "lr", "value": "0.1"}],
        "runSpec": run_spec,
        "retainRun": retain,
        "metricsCollector": {"collector": {"kind": collector}},
        "primaryContainerName": "training-container",
    }
    if success is not None:
        spec["successCondition"] = success
    if failure is not None:
        spec["failureCondition"] = failure
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {"name": name, "labels": {"katib.kubeflow.org/experiment": experiment}},
        "spec": spec,
    }


def observe(kube: Kube, namespace: str, name: str, accuracy: str | None) -> None:
    """Write `status.observation` as the collector does (it stands in for the collector)."""
    value = accuracy if accuracy is not None else "unavailable"
    kube.patch(
        TRIALS,
        name,
        {
            "status": {
                "observation": {
                    "metrics": [{"name": "accuracy", "min": value, "max": value, "latest": value}]
                }
            }
        },
        namespace,
        subresource="status",
    )
