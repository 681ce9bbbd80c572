"""Katib's SDK as its users call it for pushed metrics, both ends.

Run with the interpreter of the SDK's own venv (kubetune_testkit.katibsdk), or in a trial pod of
the example trainer image, which has the SDK:

    python push_and_read.py report ADDRESS X LOSS...   # in a trial pod: report_metrics per value
    python push_and_read.py report-as-pod ADDRESS X LOSS...   # the same, never with a token
    python push_and_read.py read ADDRESS NAMESPACE TRIAL   # get_trial_metrics, printed as JSON

db-manager accepts a report only from the trial's own pod. `report_metrics` sends no
credentials, so db-manager identifies the pod by the connection's address; on the local
cluster every pod shares one address, which proves nothing. `report` therefore first calls
`report_metrics` unchanged and prints its refusal (`refused: ...`; exit 3 if it was accepted),
then reports every value with the same SDK call while each channel the SDK opens sends the
pod's token ($KUBETUNE_DB_MANAGER_TOKEN_FILE, mounted by kubetune's webhook) as the metadata
`authorization: Bearer <token>`. `report-as-pod` is for a pod with an address of its own (a
real node): `report_metrics` exactly as shipped, no token, for every value. ADDRESS `default`
calls `report_metrics` with no address, as a trial does (the SDK dials
katib-db-manager.kubeflow:6789). `read` sends
$KUBETUNE_DB_MANAGER_TOKEN when set (a token for the audience kubetune-db-manager of someone who
may get the Trial).
"""

import json
import os
import sys

import grpc
from kubeflow.katib import KatibClient, report_metrics


def send_token(token):
    """Every channel the SDK opens from now on sends `token()` (read per call: the kubelet
    refreshes the file) as `authorization: Bearer`; the requests stay the SDK's own."""
    insecure_channel = grpc.insecure_channel

    class Bearer(grpc.UnaryUnaryClientInterceptor):
        def intercept_unary_unary(self, continuation, details, request):
            metadata = [*(details.metadata or ()), ("authorization", f"Bearer {token()}")]
            return continuation(details._replace(metadata=metadata), request)

    def channel(target, *args, **kwargs):
        return grpc.intercept_channel(insecure_channel(target, *args, **kwargs), Bearer())

    grpc.insecure_channel = channel


def pod_token():
    with open(os.environ["KUBETUNE_DB_MANAGER_TOKEN_FILE"]) as fh:
        return fh.read().strip()


def where(address):
    return {} if address == "default" else {"db_manager_address": address}


def report_each(address, losses):
    for i, loss in enumerate(losses):
        report_metrics({"loss": float(loss), "epoch": i}, **where(address))
        print(f"reported loss={loss}", flush=True)


def report(address, x, *losses):
    print(f"x={x}", flush=True)
    try:
        report_metrics({"loss": 1e9}, **where(address))
    except RuntimeError as e:
        print(f"refused: {e}", flush=True)
    else:
        print("accepted without a token", flush=True)
        sys.exit(3)
    send_token(pod_token)
    report_each(address, losses)


def report_as_pod(address, x, *losses):
    print(f"x={x}", flush=True)
    report_each(address, losses)


def read(address, namespace, trial):
    token = os.environ.get("KUBETUNE_DB_MANAGER_TOKEN")
    if token:
        send_token(lambda: token)
    client = KatibClient(namespace=namespace)
    logs = client.get_trial_metrics(trial, namespace, db_manager_address=address)
    print(json.dumps([[m.time_stamp, m.metric.name, m.metric.value] for m in logs]))


if __name__ == "__main__":
    {"report": report, "report-as-pod": report_as_pod, "read": read}[sys.argv[1]](*sys.argv[2:])
