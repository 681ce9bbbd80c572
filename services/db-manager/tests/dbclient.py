"""A gRPC client of db-manager for the tests: the server process, stubs that send a bearer
token as a Push trial does, and the Trials (with their Job's pod) to report for."""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import grpc
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from kubetune import naming
from kubetune.kube import ROLES, TRIALS, Kube
from kubetune_testkit import builders
from kubetune_testkit.accounts import bind_role
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.trialpods import bound_token, job_pod

T0 = "2026-12-01T15:00:00Z"


class Details(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


class Bearer(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Adds `authorization: Bearer <token>` to every call, as a Push trial sends its token."""

    def __init__(self, token: str) -> None:
        self.token = token

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        metadata = [*(details.metadata or ()), ("authorization", f"Bearer {self.token}")]
        return continuation(
            Details(
                details.method,
                details.timeout,
                metadata,
                details.credentials,
                details.wait_for_ready,
                details.compression,
            ),
            request,
        )


class Server:
    """One db-manager process and a stub talking to it (with `token` when given)."""

    def __init__(self, process: ServiceProcess, port: int, token: str | None = None) -> None:
        self.process = process
        self.port = port
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = self.stub_for(token)

    def stub_for(self, token: str | None) -> Any:
        """A stub on this server's channel that sends `token` (nothing when None)."""
        calls = grpc.intercept_channel(self.channel, Bearer(token)) if token else self.channel
        return pb_grpc.DBManagerStub(calls)

    def ready(self) -> None:
        """Serving (importing Katib's SDK takes seconds; minutes on a loaded machine)."""
        future = grpc.channel_ready_future(self.channel)
        deadline = time.monotonic() + 300
        while True:
            try:
                future.result(timeout=2)
                return
            except grpc.FutureTimeoutError:
                assert self.process.alive(), self.process.logs()
                assert time.monotonic() < deadline, "db-manager did not serve in 300 s"


def trial(kube: Kube, cluster: Any, namespace: str, name: str = "t1") -> str:
    """A Push Trial with its Job and the Job controller's pod; that pod's token for db-manager."""
    objective = builders.objective("loss", "minimize", additional=["accuracy"])
    body = builders.trial(name, objective_spec=objective, collector="Push")
    pod = job_pod(kube, namespace, kube.create(TRIALS, body, namespace))
    return bound_token(kube, pod, naming.DB_MANAGER_AUDIENCE)


def grant(kube: Kube, namespace: str, *verbs: str, account: str = "default") -> None:
    """`verbs` on the namespace's Trials for `account` (a Role and its RoleBinding)."""
    role = f"trials-{'-'.join(verbs)}-{account}"
    kube.create(
        ROLES,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": role},
            "rules": [
                {"apiGroups": ["kubeflow.org"], "resources": ["trials"], "verbs": list(verbs)}
            ],
        },
        namespace,
    )
    bind_role(kube, namespace, role, ("Role", role), (account,))


def report(
    stub: Any, trial_name: str, *metrics: tuple[str, str], time: str = T0, timeout: float = 30
) -> None:
    stub.ReportObservationLog(
        pb.ReportObservationLogRequest(
            trial_name=trial_name,
            observation_log=pb.ObservationLog(
                metric_logs=[
                    pb.MetricLog(time_stamp=time, metric=pb.Metric(name=n, value=v))
                    for n, v in metrics
                ]
            ),
        ),
        timeout=timeout,
    )
