"""The gRPC server: Katib's `api.v1.beta1.DBManager` on port 6789, bounded.

The message and service types are the generated modules `kubeflow-katib` ships
(`kubeflow.katib.katib_api_pb2`, `_pb2_grpc`, imported by `kubetune.katibapi` without the SDK).
Bounds: a maximum message size, a maximum number
of RPCs in progress (more are refused with RESOURCE_EXHAUSTED rather than queued without
limit), a worker pool, and a deadline on every RPC (the caller's, capped by `--max-deadline`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from prometheus_client import Histogram

from kubetune.katibapi import pb, pb_grpc
from kubetune_db_manager.authenticating import Authorizer, Caller
from kubetune_db_manager.storing import Code, Store, StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")

RPCS = Histogram(
    "kubetune_db_manager_rpc_seconds",
    "DBManager RPCs by method and gRPC code, and their duration",
    ["method", "code"],
)

STATUS = {
    Code.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
    Code.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Code.AMBIGUOUS: grpc.StatusCode.FAILED_PRECONDITION,
    Code.DEADLINE: grpc.StatusCode.DEADLINE_EXCEEDED,
    Code.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Code.DENIED: grpc.StatusCode.PERMISSION_DENIED,
    Code.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    Code.FINISHED: grpc.StatusCode.FAILED_PRECONDITION,
}


@dataclass(frozen=True)
class Limits:
    max_message_bytes: int = 4 * 1024 * 1024
    max_concurrent_rpcs: int = 512
    workers: int = 512
    max_deadline: float = 30.0


class DBManager(pb_grpc.DBManagerServicer):  # type: ignore[misc]
    """Each RPC: authorize (`authenticating`), validate, act on the Trial, answer; a
    StoreError becomes its gRPC status."""

    def __init__(self, store: Store, limits: Limits, auth: Authorizer) -> None:
        self.store = store
        self.limits = limits
        self.auth = auth

    def _authorized(
        self, step: str, request: Any, context: grpc.ServicerContext, call: Callable[[float], T]
    ) -> Callable[[float], T]:
        """`call`, once the caller may `step` ("report", "read", "delete"); a StoreError
        (UNAUTHENTICATED, PERMISSION_DENIED...) before it otherwise."""

        def run(deadline: float) -> T:
            caller = Caller.of(context.peer(), context.invocation_metadata())
            name = request.trial_name
            getattr(self.auth, step)(caller, name, lambda: self.store.find(name, deadline))
            return call(deadline)

        return run

    def _deadline(self, context: grpc.ServicerContext) -> float:
        remaining = context.time_remaining()
        cap = self.limits.max_deadline
        return time.monotonic() + (cap if remaining is None else min(remaining, cap))

    def _serve(self, what: str, context: grpc.ServicerContext, call: Callable[[float], T]) -> T:
        started = time.monotonic()
        code = grpc.StatusCode.OK
        try:
            return call(self._deadline(context))
        except StoreError as e:
            code = STATUS[e.code]
            log.info("%s refused: %s", what, e)
            context.abort(code, str(e))
            raise  # abort raises; this line is never reached
        except Exception:
            code = grpc.StatusCode.INTERNAL
            raise
        finally:
            RPCS.labels(what, code.name).observe(time.monotonic() - started)

    def ReportObservationLog(  # noqa: N802 - Katib's RPC name
        self, request: Any, context: grpc.ServicerContext
    ) -> Any:
        logs = [
            (m.metric.name, m.metric.value, m.time_stamp)
            for m in request.observation_log.metric_logs
        ]
        self._serve(
            "ReportObservationLog",
            context,
            self._authorized(
                "report",
                request,
                context,
                lambda deadline: self.store.report(request.trial_name, logs, deadline),
            ),
        )
        return pb.ReportObservationLogReply()

    def GetObservationLog(  # noqa: N802
        self, request: Any, context: grpc.ServicerContext
    ) -> Any:
        rows = self._serve(
            "GetObservationLog",
            context,
            self._authorized(
                "read",
                request,
                context,
                lambda deadline: self.store.get(
                    request.trial_name,
                    request.metric_name,
                    request.start_time,
                    request.end_time,
                    deadline,
                ),
            ),
        )
        return pb.GetObservationLogReply(
            observation_log=pb.ObservationLog(
                metric_logs=[
                    pb.MetricLog(time_stamp=stamp, metric=pb.Metric(name=name, value=value))
                    for stamp, name, value in rows
                ]
            )
        )

    def DeleteObservationLog(  # noqa: N802
        self, request: Any, context: grpc.ServicerContext
    ) -> Any:
        self._serve(
            "DeleteObservationLog",
            context,
            self._authorized(
                "delete",
                request,
                context,
                lambda deadline: self.store.delete(request.trial_name, deadline),
            ),
        )
        return pb.DeleteObservationLogReply()


def server(
    store: Store, address: str, limits: Limits = Limits(), *, auth: Authorizer
) -> tuple[grpc.Server, int]:
    """A started server and the port it bound (`address` may end in `:0`)."""
    options = [
        ("grpc.max_receive_message_length", limits.max_message_bytes),
        ("grpc.max_send_message_length", limits.max_message_bytes),
    ]
    srv = grpc.server(
        futures.ThreadPoolExecutor(max_workers=limits.workers, thread_name_prefix="rpc"),
        options=options,
        maximum_concurrent_rpcs=limits.max_concurrent_rpcs,
    )
    pb_grpc.add_DBManagerServicer_to_server(DBManager(store, limits, auth), srv)
    port = srv.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    srv.start()
    return srv, port
