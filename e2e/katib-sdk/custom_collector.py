"""A user's own metrics collector, as Katib's `Custom` collector kind runs one: a container
beside the training that reads the training's metrics file and reports every value through
Katib's DBManager API (`ReportObservationLog`), the way Katib's own file collector does.

    python custom_collector.py ADDRESS FILE METRIC...

The trial's name comes from $TrialName (the downward API, as in Katib's custom collector
example), the pod's token for db-manager from the file $KUBETUNE_DB_MANAGER_TOKEN_FILE names.
The training writes `name=value` lines to FILE and a last line `done`.
"""

import os
import sys
import time

import grpc
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc


def wait_for_done(path):
    while True:
        try:
            with open(path) as fh:
                lines = fh.read().splitlines()
            if lines and lines[-1] == "done":
                return lines[:-1]
        except FileNotFoundError:
            pass
        time.sleep(0.2)


def main(address, path, *metrics):
    lines = wait_for_done(path)
    logs = []
    for line in lines:
        name, _, value = line.partition("=")
        if name in metrics:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            logs.append(pb.MetricLog(time_stamp=stamp, metric=pb.Metric(name=name, value=value)))
    trial = os.environ["TrialName"]  # noqa: SIM112 - the name in Katib's example
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.DBManagerStub(channel)
        request = pb.ReportObservationLogRequest(
            trial_name=trial, observation_log=pb.ObservationLog(metric_logs=logs)
        )
        # db-manager accepts a report from the trial's own pod only: the pod's token for it
        # (audience kubetune-db-manager), which the webhook mounts for Custom collectors.
        with open(os.environ["KUBETUNE_DB_MANAGER_TOKEN_FILE"]) as fh:
            token = fh.read().strip()
        metadata = [("authorization", f"Bearer {token}")]
        stub.ReportObservationLog(request, timeout=60, metadata=metadata)
    print(f"reported {len(logs)} values of {trial}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
