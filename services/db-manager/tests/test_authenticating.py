"""Who may call db-manager, against a real API server: only a Trial's own pod reports for it
(its bound token, or the one Running pod that holds the caller's address, with its controller
chain to the Trial's job), never once the Trial finished; reads and deletes follow RBAC.

The address path is played on this host: the client connects from 127.0.0.1, and a test pod
(never scheduled) is given that address as its status, as a kubelet would report it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from dbclient import Server, grant, report, trial
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib.api import report_metrics as sdk
from kubetune_db_manager.authenticating import peer_ip

from kubetune import errors, naming
from kubetune.kube import NAMESPACES, PODS, SERVICE_ACCOUNTS, TRIALS, Kube
from kubetune_testkit.accounts import service_account_token
from kubetune_testkit.builders import owner_reference
from kubetune_testkit.trialpods import GATE, bound_token
from kubetune_testkit.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

AUDIENCE = naming.DB_MANAGER_AUDIENCE
LOOPBACK = "127.0.0.1"


def _observation(kube: Kube, namespace: str, name: str = "t1") -> Any:
    return (kube.get(TRIALS, name, namespace).get("status") or {}).get("observation")


def _refused(call: Callable[[], Any], code: grpc.StatusCode) -> str:
    with pytest.raises(grpc.RpcError) as refused:
        call()
    assert refused.value.code() == code, refused.value.details()
    return str(refused.value.details())


def _pod(kube: Kube, namespace: str, name: str, owner: dict[str, Any] | None = None) -> Any:
    """A pod made by hand (never scheduled), with the owner as its CONTROLLER when given."""
    meta: dict[str, Any] = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner)]
    return kube.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "schedulingGates": [GATE],
                "containers": [{"name": "training-container", "image": "python:3.12"}],
            },
        },
        namespace,
    )


@pytest.fixture
def at_loopback(kube: Kube) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Gives a pod the address 127.0.0.1 (Running, as a kubelet reports it); the pods are
    deleted at the end and waited for, before another test may use the address (a Job's pod
    stays, still Running at that address, until the Job controller drops its finalizer: CI
    saw the next test find two pods there)."""
    given: list[tuple[str, str]] = []

    def give(pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        status = {"phase": "Running", "podIP": LOOPBACK, "podIPs": [{"ip": LOOPBACK}]}
        kube.patch(PODS, meta["name"], {"status": status}, meta["namespace"], subresource="status")
        given.append((meta["namespace"], meta["name"]))

    yield give
    for namespace, name in given:
        with contextlib.suppress(errors.NotFound):
            kube.delete(PODS, name, namespace, grace_seconds=0)

    def gone(namespace: str, name: str) -> Callable[[], bool]:
        return lambda: kube.get_or_none(PODS, name, namespace) is None

    for namespace, name in given:
        wait_for(f"pod {namespace}/{name} to be gone", gone(namespace, name), 120)


def test_peer_addresses() -> None:
    assert peer_ip("ipv4:10.1.2.3:5678") == "10.1.2.3"
    assert peer_ip("ipv6:[fd00::1]:5678") == "fd00::1"
    assert peer_ip("unix:/tmp/socket") is None
    assert peer_ip("ipv4:not-an-ip:1") is None


def test_a_caller_with_nothing_to_show_is_refused(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    """Katib's SDK from a host (or any address no pod holds): nothing proves the caller."""
    trial(kube, cluster, namespace)
    stub = start().stub
    details = _refused(
        lambda: report(stub, "t1", ("loss", "-999")), grpc.StatusCode.UNAUTHENTICATED
    )
    assert f"address {LOOPBACK} belongs to no running pod" in details
    assert "$KUBETUNE_DB_MANAGER_TOKEN_FILE as metadata `authorization: Bearer <token>`" in details
    _refused(
        lambda: stub.GetObservationLog(pb.GetObservationLogRequest(trial_name="t1"), timeout=30),
        grpc.StatusCode.UNAUTHENTICATED,
    )
    assert _observation(kube, namespace) is None


def test_a_pod_of_another_namespace_cannot_report(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    """The reported exploit: a pod of another tenant reports for a victim's Trial. Its own
    Trial's token is valid, but names a pod that does not run the victim."""
    other = f"{namespace[:50]}-other"
    kube.create(NAMESPACES, {"metadata": {"name": other}})
    try:
        trial(kube, cluster, namespace, "victim")
        attacker = trial(kube, cluster, other, "attacker")
        stub = start(every_namespace=True, token=attacker).stub
        details = _refused(
            lambda: report(stub, "victim", ("loss", "-999")), grpc.StatusCode.PERMISSION_DENIED
        )
        assert f"system:serviceaccount:{other}:default may not report for trial" in details
        assert _observation(kube, namespace, "victim") is None
    finally:
        kube.delete(NAMESPACES, other)


def test_a_token_of_a_pod_not_run_by_the_trial_is_refused(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    token = trial(kube, cluster, namespace)
    victim = kube.get(TRIALS, "t1", namespace)
    forger = _pod(kube, namespace, "forger", victim)  # controller reference to the Trial itself
    server = start()
    forged = server.stub_for(bound_token(kube, forger, AUDIENCE))
    details = _refused(
        lambda: report(forged, "t1", ("loss", "-999")), grpc.StatusCode.PERMISSION_DENIED
    )
    assert f"pod {namespace}/forger is of no trial" in details
    # A token that names no pod (`kubectl create token`), and the pod's token for the API
    # server's audience instead of db-manager's, prove nothing either.
    plain = service_account_token(cluster, "default", namespace, "10m", f"--audience={AUDIENCE}")
    details = _refused(
        lambda: report(server.stub_for(plain), "t1", ("loss", "-999")),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    assert "names no pod" in details
    pod = kube.list_all(PODS, namespace, label_selector="job-name=t1")[0]
    details = _refused(
        lambda: report(server.stub_for(bound_token(kube, pod)), "t1", ("loss", "-999")),
        grpc.StatusCode.UNAUTHENTICATED,
    )
    assert f"not valid for audience {AUDIENCE}" in details
    assert _observation(kube, namespace) is None
    # The Trial's own pod, with its token, reports.
    report(server.stub_for(token), "t1", ("loss", "0.5"))
    assert _observation(kube, namespace)["metrics"][0]["latest"] == "0.5"


def test_a_finished_trial_takes_no_report(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    """Its result decided the Experiment's optimum (or its goal): it stays as it was."""
    stub = start(token=trial(kube, cluster, namespace)).stub
    report(stub, "t1", ("loss", "0.5"))
    succeeded = {
        "type": "Succeeded",
        "status": "True",
        "reason": "TrialSucceeded",
        "message": "done",
    }
    kube.patch(
        TRIALS, "t1", {"status": {"conditions": [succeeded]}}, namespace, subresource="status"
    )
    details = _refused(
        lambda: report(stub, "t1", ("loss", "-999")), grpc.StatusCode.FAILED_PRECONDITION
    )
    assert f"trial {namespace}/t1 is finished (Succeeded)" in details
    assert _observation(kube, namespace)["metrics"][0]["latest"] == "0.5"


def test_katibs_sdk_reports_from_the_one_pod_that_holds_the_address(
    kube: Kube,
    cluster: Any,
    namespace: str,
    start: Callable[..., Server],
    at_loopback: Callable[[dict[str, Any]], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`report_metrics` as Katib ships it sends no token: the pod whose address the connection
    comes from is the caller. An address two pods hold proves nothing (host network; the
    stand-in node of the e2e tests) and the refusal names the token as the fix."""
    trial(kube, cluster, namespace)
    pod = kube.list_all(PODS, namespace, label_selector="job-name=t1")[0]
    at_loopback(pod)
    monkeypatch.setenv("KATIB_TRIAL_NAME", "t1")
    # Only the namespace the SDK names in its error message is read from the pod's files.
    monkeypatch.setattr(sdk.utils, "get_current_k8s_namespace", lambda: namespace)
    address = f"{LOOPBACK}:{start().port}"
    sdk.report_metrics({"loss": 0.25}, db_manager_address=address)
    assert _observation(kube, namespace)["metrics"][0]["latest"] == "0.25"

    at_loopback(_pod(kube, namespace, "neighbour"))
    address = f"{LOOPBACK}:{start().port}"  # a new process: no verdict kept from above
    with pytest.raises(RuntimeError) as refused:
        sdk.report_metrics({"loss": -999}, db_manager_address=address)
    assert f"address {LOOPBACK} is shared by 2 pods (host network?)" in str(refused.value)
    assert "$KUBETUNE_DB_MANAGER_TOKEN_FILE" in str(refused.value)
    assert _observation(kube, namespace)["metrics"][0]["latest"] == "0.25"


def test_a_pod_at_the_address_that_the_trial_does_not_run_is_refused(
    kube: Kube,
    cluster: Any,
    namespace: str,
    start: Callable[..., Server],
    at_loopback: Callable[[dict[str, Any]], None],
) -> None:
    trial(kube, cluster, namespace)
    at_loopback(_pod(kube, namespace, "forger", kube.get(TRIALS, "t1", namespace)))
    stub = start().stub
    details = _refused(
        lambda: report(stub, "t1", ("loss", "-999")), grpc.StatusCode.PERMISSION_DENIED
    )
    assert f"pod {namespace}/forger is of no trial" in details
    assert _observation(kube, namespace) is None


def test_reads_need_get_and_deletes_need_delete_on_the_trial(
    kube: Kube, cluster: Any, namespace: str, start: Callable[..., Server]
) -> None:
    trial(kube, cluster, namespace)
    kube.create(
        SERVICE_ACCOUNTS,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}},
        namespace,
    )
    token = service_account_token(cluster, "reader", namespace, "10m", f"--audience={AUDIENCE}")
    stub = start(token=token).stub

    def read() -> Any:
        return stub.GetObservationLog(pb.GetObservationLogRequest(trial_name="t1"), timeout=30)

    def delete() -> Any:
        return stub.DeleteObservationLog(
            pb.DeleteObservationLogRequest(trial_name="t1"), timeout=30
        )

    details = _refused(read, grpc.StatusCode.PERMISSION_DENIED)
    assert f"system:serviceaccount:{namespace}:reader may not get trial {namespace}/t1" in details
    _refused(delete, grpc.StatusCode.PERMISSION_DENIED)
    grant(kube, namespace, "get", account="reader")

    def allowed() -> bool:
        try:
            read()
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e.details()
            return False
        return True

    wait_for("the reader's Role to reach the authorizer", allowed)
    _refused(delete, grpc.StatusCode.PERMISSION_DENIED)
