"""db-manager as shipped (its console script) against a real API server, called by a real gRPC
client with the message types of the `kubeflow-katib` package.

Every Trial here has its Job and the Job controller's pod, and the client sends that pod's
bound token (audience kubetune-db-manager) as the Push trial's containers do; who may call
is tested in test_authenticating.py."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from dbclient import T0, Server, grant, report, trial
from kubeflow.katib import katib_api_pb2 as pb

from kubetune import metrichistory
from kubetune.kube import NAMESPACES, TRIALS, Kube
from kubetune_testkit.processes import ServiceProcess, free_port
from kubetune_testkit.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

CONCURRENT = 48


def test_reports_go_into_the_trial_and_read_back(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    token = trial(kube, cluster, namespace)
    grant(kube, namespace, "delete")  # the trial's pod reads its own history, deletes with RBAC
    stub = start(token=token).stub
    report(stub, "t1", ("loss", "0.9"), ("accuracy", "0.1"), time=T0)
    report(stub, "t1", ("loss", "0.4"), ("accuracy", "0.5"), time="2026-12-01T15:00:01Z")
    report(stub, "t1", ("loss", "0.6"), ("accuracy", "0.3"), time="2026-12-01T15:00:02Z")

    status = kube.get(TRIALS, "t1", namespace)["status"]
    assert status["observation"] == {
        "metrics": [
            {"name": "loss", "min": "0.4", "max": "0.9", "latest": "0.6"},
            {"name": "accuracy", "min": "0.1", "max": "0.5", "latest": "0.3"},
        ]
    }
    assert [v for _, v, _ in metrichistory.read(status)["loss"]] == ["0.9", "0.4", "0.6"]

    reply = stub.GetObservationLog(pb.GetObservationLogRequest(trial_name="t1"), timeout=30)
    rows = [
        (m.time_stamp, m.metric.name, m.metric.value) for m in reply.observation_log.metric_logs
    ]
    assert rows == [
        (T0, "loss", "0.9"),
        (T0, "accuracy", "0.1"),
        ("2026-12-01T15:00:01Z", "loss", "0.4"),
        ("2026-12-01T15:00:01Z", "accuracy", "0.5"),
        ("2026-12-01T15:00:02Z", "loss", "0.6"),
        ("2026-12-01T15:00:02Z", "accuracy", "0.3"),
    ]
    only = stub.GetObservationLog(
        pb.GetObservationLogRequest(
            trial_name="t1", metric_name="loss", start_time="2026-12-01T15:00:01Z"
        ),
        timeout=30,
    )
    assert [m.metric.value for m in only.observation_log.metric_logs] == ["0.4", "0.6"]

    stub.DeleteObservationLog(pb.DeleteObservationLogRequest(trial_name="t1"), timeout=30)
    status = kube.get(TRIALS, "t1", namespace)["status"]
    assert metrichistory.FIELD not in status
    assert status["observation"]["metrics"][0]["latest"] == "0.6"  # the result stays


def test_unknown_trial_and_bad_values_are_errors_that_name_them(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    stub = start(token=trial(kube, cluster, namespace)).stub
    with pytest.raises(grpc.RpcError) as missing:
        report(stub, "no-such-trial", ("loss", "0.5"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no-such-trial" in str(missing.value.details())
    with pytest.raises(grpc.RpcError) as missing_get:
        stub.GetObservationLog(pb.GetObservationLogRequest(trial_name="nope"), timeout=30)
    assert missing_get.value.code() == grpc.StatusCode.NOT_FOUND

    with pytest.raises(grpc.RpcError) as bad:
        report(stub, "t1", ("loss", "0.5"), ("accuracy", "high"))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = str(bad.value.details())
    assert "'high'" in details and "'accuracy'" in details and "metric_logs[1]" in details
    with pytest.raises(grpc.RpcError) as bad_time:
        report(stub, "t1", ("loss", "0.5"), time="yesterday")
    assert bad_time.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "time_stamp" in str(bad_time.value.details())
    with pytest.raises(grpc.RpcError) as bad_name:
        report(stub, "../etc", ("loss", "0.5"))
    assert bad_name.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # A refused report writes nothing, not even its valid part.
    assert metrichistory.FIELD not in (kube.get(TRIALS, "t1", namespace).get("status") or {})


def in_threads(work: Callable[[int], None], count: int) -> list[BaseException]:
    """`work(0)` ... `work(count - 1)` in threads at once; what they raised."""
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001 - collected for the caller's assertion
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_two_replicas_reporting_at_once_lose_nothing(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    token = trial(kube, cluster, namespace)
    stubs = [start(token=token).stub, start(token=token).stub]

    def push(worker: int) -> None:
        for i in range(10):
            report(stubs[worker % 2], "t1", ("loss", f"{worker}.{i}"))

    assert not in_threads(push, 6)
    status = kube.get(TRIALS, "t1", namespace)["status"]
    assert metrichistory.reports(status, "loss") == 60
    values = sorted(v for _, v, _ in metrichistory.read(status)["loss"])
    assert values == sorted(f"{w}.{i}" for w in range(6) for i in range(10))


def test_reports_queued_for_one_trial_are_merged_into_few_writes(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    """Reports arriving together for one Trial share one read-modify-patch (issue 15's 200
    reports/s: one write per report was the bottleneck), and every value is kept. With a worker
    for each (the default 32 would queue a third of them behind the first batch)."""
    server = start("--workers", str(CONCURRENT), token=trial(kube, cluster, namespace))
    # The caller's verdict is kept a few seconds: one report first, so that the concurrent
    # ones reach the Trial together rather than each after its own TokenReview.
    report(server.stub, "t1", ("accuracy", "0.5"))
    rv = kube.get(TRIALS, "t1", namespace)["metadata"]["resourceVersion"]
    writes: list[str] = []

    def watch() -> None:
        for event in kube.watch(TRIALS, namespace, resource_version=rv, timeout_seconds=90):
            if event.get("type") == "MODIFIED":
                writes.append(event["object"]["metadata"]["resourceVersion"])
                status = event["object"].get("status")
                if metrichistory.reports(status, "loss") == CONCURRENT:
                    return

    watcher = threading.Thread(target=watch)
    watcher.start()
    barrier = threading.Barrier(CONCURRENT)

    def push(i: int) -> None:
        barrier.wait()
        report(server.stub, "t1", ("loss", f"0.{i:03d}"))

    assert not in_threads(push, CONCURRENT)
    status = kube.get(TRIALS, "t1", namespace)["status"]
    assert metrichistory.reports(status, "loss") == CONCURRENT
    kept = sorted(v for _, v, _ in metrichistory.read(status)["loss"])
    assert kept == sorted(f"0.{i:03d}" for i in range(CONCURRENT))
    watcher.join(60)
    # One write per report would be 48; how many share a write depends on how the reports
    # arrive on a loaded machine (CI saw 13 and 17), so here only: fewer writes than reports.
    # test_merging.py holds a write until all the others are queued, and counts exactly.
    assert 1 <= len(writes) < CONCURRENT, f"{len(writes)} writes for {CONCURRENT} reports"


def test_a_write_by_someone_else_between_reports_is_kept(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    """db-manager bases a report on its own last write (no read): a change made meanwhile
    (another replica, DeleteObservationLog elsewhere, a collector) must not be overwritten."""
    server = start(token=trial(kube, cluster, namespace))
    report(server.stub, "t1", ("loss", "0.5"))
    other = metrichistory.History()
    other.append("loss", "0.5", T0)
    other.append("loss", "0.4", T0)
    kube.patch(
        TRIALS,
        "t1",
        {"status": {metrichistory.FIELD: other.to_wire()}},
        namespace,
        subresource="status",
    )
    report(server.stub, "t1", ("loss", "0.3"))
    status = kube.get(TRIALS, "t1", namespace)["status"]
    assert [v for _, v, _ in metrichistory.read(status)["loss"]] == ["0.5", "0.4", "0.3"]
    assert metrichistory.reports(status, "loss") == 3


def test_killed_mid_stream_loses_no_acknowledged_value(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    """SIGKILL while a client streams reports: every value answered OK is in the Trial."""
    server = start(token=trial(kube, cluster, namespace))
    acknowledged: list[str] = []
    failed = threading.Event()

    def stream() -> None:
        for i in range(1_000):
            value = f"0.{i:04d}"
            try:
                report(server.stub, "t1", ("loss", value), timeout=5)
            except grpc.RpcError:
                failed.set()
                return
            acknowledged.append(value)

    client = threading.Thread(target=stream)
    client.start()
    wait_for("some acknowledged reports", lambda: len(acknowledged) >= 20)
    server.process.kill()
    client.join(60)
    assert failed.is_set(), "the stream did not notice the kill"
    assert 20 <= len(acknowledged) < 1_000
    status = kube.get(TRIALS, "t1", namespace)["status"]
    kept = {v for _, v, _ in metrichistory.read(status)["loss"]}
    reported = metrichistory.reports(status, "loss")
    # The first 100 are always kept, so each acknowledged one (fewer than 100 here, or the
    # count covers them) is there; at most the one in flight was written without an answer.
    assert reported in (len(acknowledged), len(acknowledged) + 1)
    assert set(acknowledged[:100]) <= kept


def test_a_port_another_db_manager_serves_is_not_shared(
    cluster: Any,
    namespace: str,
    start: Callable[..., Server],
    services: Callable[..., ServiceProcess],
) -> None:
    """gRPC's default SO_REUSEPORT would let a second process bind the port and take half its
    connections; db-manager turns it off, so the second one stops, naming the address."""
    first = start()
    address = ["--address", "127.0.0.1", "--port", str(first.port), "--probe-port", "0"]
    second = services("db-manager", "--kubeconfig", cluster.kubeconfig, *address).start()
    assert second.popen.wait(300) == 2, second.logs()
    assert f"cannot listen on 127.0.0.1:{first.port}" in second.output()
    assert first.process.alive()


def test_bad_limits_are_refused(services: Callable[..., ServiceProcess]) -> None:
    process = services("db-manager", "--max-concurrent-rpcs", "0").start()
    assert process.popen.wait(30) == 2
    assert "--max-concurrent-rpcs must be positive" in process.output()


def test_a_name_in_two_namespaces_is_ambiguous_without_namespace(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    """Katib's API names no namespace: db-manager serving all of them says which collide."""
    other = f"{namespace[:50]}-other"
    kube.create(NAMESPACES, {"metadata": {"name": other}})
    try:
        name = f"dup-{namespace[-6:]}"
        token = trial(kube, cluster, namespace, name)
        trial(kube, cluster, other, name)
        server = start(every_namespace=True, token=token)
        with pytest.raises(grpc.RpcError) as ambiguous:
            report(server.stub, name, ("loss", "0.5"))
        assert ambiguous.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert f"namespaces {min(namespace, other)}, {max(namespace, other)}" in str(
            ambiguous.value.details()
        )
    finally:
        kube.delete(NAMESPACES, other)


def test_numbers_outside_the_strict_grammar_and_huge_names_are_refused(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    """The one metric check of every writer: `1_0` and full-width digits convert with float()
    but are not numbers here; a 1 MB name is refused, not stored in the Trial."""
    stub = start(token=trial(kube, cluster, namespace)).stub
    for metric, says in [
        (("loss", "1_0"), "'1_0'"),
        (("loss", "\uff11\uff10"), "is not a number"),
        (("n" * 1_000_000, "0.5"), "use a shorter name"),
    ]:
        with pytest.raises(grpc.RpcError) as bad:
            report(stub, "t1", ("accuracy", "0.5"), metric)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert says in str(bad.value.details()) and "metric_logs[1]" in str(bad.value.details())
    assert metrichistory.FIELD not in (kube.get(TRIALS, "t1", namespace).get("status") or {})


def test_a_trial_keeps_at_most_a_hundred_metrics(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    """Reports that together name more than 100 metrics are refused, and nothing of the one
    that crosses the bound is written (10,000 names once made a 1 MB Trial)."""
    stub = start(token=trial(kube, cluster, namespace)).stub
    report(stub, "t1", *[(f"m{i:03d}", "0.5") for i in range(60)])
    with pytest.raises(grpc.RpcError) as many:
        report(stub, "t1", *[(f"n{i:03d}", "0.5") for i in range(60)])
    assert many.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "120 metrics, more than 100" in str(many.value.details())
    kept = metrichistory.read(kube.get(TRIALS, "t1", namespace)["status"])
    assert sorted(kept) == [f"m{i:03d}" for i in range(60)]
    report(stub, "t1", *[(f"n{i:03d}", "0.5") for i in range(40)])  # up to the bound is fine


def raw_report(trial_name: str, logs: int, size: int, name: str = "loss") -> bytes:
    """A serialized report of `logs` values of `name`, padded to about `size` bytes (values
    of at most 122 characters: the rest is the name's to fill)."""
    one = pb.MetricLog(time_stamp=T0, metric=pb.Metric(name=name, value="0.5"))
    digits = max(1, min(120, (size // logs) - one.ByteSize() - 3))
    value = "0." + "1" * digits
    request = pb.ReportObservationLogRequest(
        trial_name=trial_name,
        observation_log=pb.ObservationLog(
            metric_logs=[pb.MetricLog(time_stamp=T0, metric=pb.Metric(name=name, value=value))]
            * logs
        ),
    )
    return bytes(request.SerializeToString())


def scrape(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in db-manager's /metrics")


def test_concurrent_maximal_reports_stay_within_the_byte_budget(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    """Memory is bounded by bytes in flight: 40 reports of ~1 MiB (the largest message) sent
    at once are served within the budget (room for one at a time) or refused with
    RESOURCE_EXHAUSTED naming the limit; a report priced above the budget is always refused;
    the budget's high-water mark never passes its limit, and no refused value is written."""
    token = trial(kube, cluster, namespace)
    budget = 24 * 1024 * 1024
    probes = free_port()
    server = start("--budget-bytes", str(budget), "--probe-port", str(probes), token=token)
    send = server.channel.unary_unary(
        "/api.v1.beta1.DBManager/ReportObservationLog",
        request_serializer=None,
        response_deserializer=pb.ReportObservationLogReply.FromString,
    )
    long_name = "loss-" + "x" * 140
    maximal = raw_report("t1", 4_000, 1024 * 1024 - 4096, long_name)  # ~14 MiB priced
    too_dear = raw_report("t1", 10_000, 300_000)  # the most logs: ~27 MiB priced
    assert 1000 * 1024 < len(maximal) < 1024 * 1024, len(maximal)
    codes: list[grpc.StatusCode] = []
    details: list[str] = []
    barrier = threading.Barrier(44)

    def push(i: int) -> None:
        barrier.wait()
        try:
            send(
                too_dear if i % 11 == 0 else maximal,
                timeout=120,
                metadata=[("authorization", f"Bearer {token}")],
            )
            codes.append(grpc.StatusCode.OK)
        except grpc.RpcError as e:
            codes.append(e.code())
            details.append(str(e.details()))

    assert not in_threads(push, 44)
    ok = codes.count(grpc.StatusCode.OK)
    refused = codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert ok + refused == 44, codes
    assert ok >= 1 and refused >= 4
    assert all("--budget-bytes" in d and "smaller batches" in d for d in details), details
    peak = scrape(probes, "kubetune_db_manager_budget_peak_bytes")
    assert 4 * len(maximal) < peak <= budget
    status = kube.get(TRIALS, "t1", namespace)["status"]
    assert metrichistory.reports(status, long_name) == 4_000 * ok
    assert metrichistory.reports(status, "loss") == 0
