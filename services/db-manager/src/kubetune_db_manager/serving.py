"""The gRPC server: Katib's `api.v1.beta1.DBManager` on port 6789, bounded.

The message and service types are the generated modules `kubeflow-katib` ships
(`kubeflow.katib.katib_api_pb2`, `_pb2_grpc`, imported by `kubetune.katibapi` without the SDK).
Bounds: a maximum message size, a maximum number
of RPCs in progress (more are refused with RESOURCE_EXHAUSTED rather than queued without
limit), a worker pool, a deadline on every RPC (the caller's, capped by `--max-deadline`), and
a byte budget: requests arrive unparsed and are parsed only once the memory they will take
(`admission.cost`) is held, so memory is bounded by bytes in flight, not by the RPC count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from prometheus_client import Gauge, Histogram

from kubetune.katibapi import pb, pb_grpc
from kubetune_db_manager import admission
from kubetune_db_manager.authenticating import Authorizer, Caller
from kubetune_db_manager.storing import MAX_LOGS, Code, Store, StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")

RPCS = Histogram(
    "kubetune_db_manager_rpc_seconds",
    "DBManager RPCs by method and gRPC code, and their duration",
    ["method", "code"],
)
BUDGET_USED = Gauge(
    "kubetune_db_manager_budget_used_bytes", "Bytes of the request budget held right now"
)
BUDGET_PEAK = Gauge(
    "kubetune_db_manager_budget_peak_bytes", "The most bytes of the request budget ever held"
)
BUDGET_LIMIT = Gauge("kubetune_db_manager_budget_limit_bytes", "The request budget (bytes)")

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
    max_message_bytes: int = 1024 * 1024
    max_concurrent_rpcs: int = 64
    workers: int = 32
    max_deadline: float = 30.0
    budget_bytes: int = 32 * 1024 * 1024
    budget_wait: float = 2.0


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


class Admitted:
    """The method handlers, taking raw bytes: each request is priced (`admission.cost`), waits
    at most `budget_wait` for that many bytes of the budget, and only then is parsed and
    served; refused unparsed with RESOURCE_EXHAUSTED when the budget stays full."""

    def __init__(self, servicer: DBManager, limits: Limits) -> None:
        self.servicer = servicer
        self.limits = limits
        self.budget = admission.Budget(limits.budget_bytes)
        BUDGET_LIMIT.set(limits.budget_bytes)

    def handler(self, name: str, request_type: Any, reply_type: Any) -> grpc.RpcMethodHandler:
        method = getattr(self.servicer, name)

        def serve(raw: bytes, context: grpc.ServicerContext) -> Any:
            try:
                logs = admission.count_metric_logs(raw, MAX_LOGS) if name == REPORT else 0
            except admission.Malformed as e:
                _refuse(context, grpc.StatusCode.INVALID_ARGUMENT, f"not a {name} request: {e}")
            if logs is None:
                _refuse(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"observation_log has more than {MAX_LOGS} metric_logs: report in smaller "
                    "batches",
                )
            with self._holding(admission.cost(len(raw), logs), len(raw), context):
                try:
                    request = request_type.FromString(raw)
                except DecodeError as e:
                    _refuse(context, grpc.StatusCode.INVALID_ARGUMENT, f"not a {name} request: {e}")
                return method(request, context)

        return grpc.unary_unary_rpc_method_handler(
            serve, request_deserializer=None, response_serializer=reply_type.SerializeToString
        )

    @contextmanager
    def _holding(self, price: int, size: int, context: grpc.ServicerContext) -> Iterator[None]:
        """Hold `price` bytes of the budget for the block, or refuse the request."""
        remaining = context.time_remaining()
        wait = self.limits.budget_wait
        if remaining is not None:
            wait = min(remaining, wait)
        if not self.budget.acquire(price, wait):
            limit = self.limits.budget_bytes
            if price > limit:
                why = f"needs {price} bytes of memory, more than the {limit}-byte request budget"
            else:
                why = (
                    f"needs {price} bytes of memory and the {limit}-byte request budget stayed "
                    f"full for {wait:.1f} s"
                )
            _refuse(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"this request ({size} bytes) {why} (--budget-bytes): send smaller batches "
                "(fewer metric logs per report) or retry later",
            )
        BUDGET_USED.set(self.budget.used)
        BUDGET_PEAK.set(self.budget.peak)
        try:
            yield
        finally:
            self.budget.release(price)
            BUDGET_USED.set(self.budget.used)


def _refuse(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    log.info("refused: %s", message)
    context.abort(code, message)
    raise AssertionError("ServicerContext.abort raises")


REPORT = "ReportObservationLog"
METHODS = {
    REPORT: (pb.ReportObservationLogRequest, pb.ReportObservationLogReply),
    "GetObservationLog": (pb.GetObservationLogRequest, pb.GetObservationLogReply),
    "DeleteObservationLog": (pb.DeleteObservationLogRequest, pb.DeleteObservationLogReply),
}


def server(
    store: Store, address: str, limits: Limits = Limits(), *, auth: Authorizer
) -> tuple[grpc.Server, int]:
    """A started server and the port it bound (`address` may end in `:0`)."""
    options = [
        ("grpc.max_receive_message_length", limits.max_message_bytes),
        ("grpc.max_send_message_length", limits.max_message_bytes),
        # With bandwidth-delay probing the transport widens each stream's window and buffers
        # whole messages nobody asked for yet: 160 concurrent 6 MB requests, refused as too
        # large, took the process from 146 to 506 MiB; without it, 148 MiB. A stream's window
        # then opens to a message when a handler reads it.
        ("grpc.http2.bdp_probe", 0),
        # gRPC sets SO_REUSEPORT by default: a second process binding the same port would then
        # silently take half the connections instead of failing to start.
        ("grpc.so_reuseport", 0),
    ]
    srv = grpc.server(
        futures.ThreadPoolExecutor(max_workers=limits.workers, thread_name_prefix="rpc"),
        options=options,
        maximum_concurrent_rpcs=limits.max_concurrent_rpcs,
    )
    admitted = Admitted(DBManager(store, limits, auth), limits)
    handlers = {name: admitted.handler(name, *types) for name, types in METHODS.items()}
    srv.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("api.v1.beta1.DBManager", handlers),)
    )
    port = srv.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    srv.start()
    return srv, port
