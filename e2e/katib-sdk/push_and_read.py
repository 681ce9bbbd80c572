"""Katib's SDK as its users call it for pushed metrics, both ends.

Run with the interpreter of the SDK's own venv (e2e/tests/katib_sdk.py):

    python push_and_read.py report ADDRESS X LOSS...   # in a trial pod: report_metrics per value
    python push_and_read.py read ADDRESS NAMESPACE TRIAL   # get_trial_metrics, printed as JSON
"""

import json
import sys

from kubeflow.katib import KatibClient, report_metrics


def report(address, x, *losses):
    print(f"x={x}", flush=True)
    for i, loss in enumerate(losses):
        report_metrics({"loss": float(loss), "epoch": i}, db_manager_address=address)
        print(f"reported loss={loss}", flush=True)


def read(address, namespace, trial):
    client = KatibClient(namespace=namespace)
    logs = client.get_trial_metrics(trial, namespace, db_manager_address=address)
    print(json.dumps([[m.time_stamp, m.metric.name, m.metric.value] for m in logs]))


if __name__ == "__main__":
    {"report": report, "read": read}[sys.argv[1]](*sys.argv[2:])
