"""A team's own algorithm written the way Katib documents it: gRPC servers subclassing the
`kubeflow-katib` package's generated `SuggestionServicer` and `EarlyStoppingServicer`.

The tests and the end-to-end suite run it as the "image" of a katib-config entry (console script
`katib-test-algorithm`, mapped to an image name in the node agent's image map), so kubetune's
bridge is tested against a real Katib-protocol server, not against its own idea of one.

* `suggestion`: a deterministic grid over the parameters (lists as given; double/int from min to
  max by `step`, the feasible space's or the algorithm setting `step`), handed out in order. Its
  only state, how many points it handed out, lives in `--state DIR` (the FromVolume path), so a
  restarted server continues the grid. `ValidateAlgorithmSettings` refuses unknown settings and a
  double without a step (INVALID_ARGUMENT, as Katib's services do).
* `early-stopping`: once a Succeeded Trial is in the request, one rule: the objective at
  `start_step` (setting, default 2) must not be below `min_value` (setting, default 0.5).
  `ValidateEarlyStoppingSettings` refuses unknown settings; `SetTrialStatus` is recorded.

Every request is appended to `DIR/requests.jsonl` (as protobuf JSON), so tests check what
kubetune sent against upstream's rules.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from concurrent import futures
from decimal import Decimal
from pathlib import Path
from typing import Any

GRID_SETTINGS = ("step",)
STOP_SETTINGS = ("min_value", "start_step")


def _api() -> tuple[Any, Any]:
    from kubetune.katibapi import pb, pb_grpc

    return pb, pb_grpc


def _record(state: Path, method: str, request: Any) -> None:
    from google.protobuf import json_format  # type: ignore[import-untyped]

    line = {"method": method, "request": json_format.MessageToDict(request)}
    with (state / "requests.jsonl").open("a") as out:
        out.write(json.dumps(line) + "\n")


def read_requests(state: Path) -> list[dict[str, Any]]:
    """What the server was asked, oldest first."""
    path = state / "requests.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _settings(items: Sequence[Any]) -> dict[str, str]:
    return {s.name: s.value for s in items}


def _points(spec: Any, step: str | None) -> list[str]:
    space = spec.feasible_space
    if space.list:
        return list(space.list)
    increment = space.step or step
    if not increment:
        raise ValueError(f"parameter {spec.name}: a grid needs feasibleSpace.step or setting step")
    low, high, inc = Decimal(space.min), Decimal(space.max), Decimal(increment)
    out = []
    value = low
    while value <= high:
        out.append(str(int(value)) if spec.parameter_type == _api()[0].INT else str(value))
        value += inc
    return out


def grid(experiment: Any) -> list[list[tuple[str, str]]]:
    """Every point, first parameter slowest (the order the server hands them out)."""
    step = _settings(experiment.spec.algorithm.algorithm_settings).get("step")
    specs = list(experiment.spec.parameter_specs.parameters)
    axes = [[(s.name, v) for v in _points(s, step)] for s in specs]
    return [list(p) for p in itertools.product(*axes)]


def suggestion_servicer(state: Path) -> Any:
    pb, pb_grpc = _api()
    import grpc

    base: Any = pb_grpc.SuggestionServicer

    class GridSuggestion(base):  # type: ignore[misc]
        lock = threading.Lock()

        def ValidateAlgorithmSettings(self, request: Any, context: Any) -> Any:  # noqa: N802
            _record(state, "ValidateAlgorithmSettings", request)
            unknown = set(_settings(request.experiment.spec.algorithm.algorithm_settings))
            unknown -= set(GRID_SETTINGS)
            if unknown:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"unknown setting(s) {', '.join(sorted(unknown))} for the grid",
                )
            try:
                grid(request.experiment)
            except ValueError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            return pb.ValidateAlgorithmSettingsReply()

        def GetSuggestions(self, request: Any, context: Any) -> Any:  # noqa: N802
            _record(state, "GetSuggestions", request)
            with self.lock:
                counter = state / "handed-out"
                handed = int(counter.read_text()) if counter.exists() else 0
                points = grid(request.experiment)[handed : handed + request.current_request_number]
                counter.write_text(str(handed + len(points)))
            reply = pb.GetSuggestionsReply()
            for point in points:
                item = reply.parameter_assignments.add()
                for name, value in point:
                    item.assignments.add(name=name, value=value)
                item.labels["grid-index"] = str(handed)
                handed += 1
            reply.algorithm.algorithm_name = request.experiment.spec.algorithm.algorithm_name
            reply.algorithm.algorithm_settings.add(name="handed_out", value=str(handed))
            return reply

    return GridSuggestion()


def early_stopping_servicer(state: Path) -> Any:
    pb, pb_grpc = _api()
    import grpc

    base: Any = pb_grpc.EarlyStoppingServicer

    class Threshold(base):  # type: ignore[misc]
        def ValidateEarlyStoppingSettings(self, request: Any, context: Any) -> Any:  # noqa: N802
            _record(state, "ValidateEarlyStoppingSettings", request)
            unknown = set(_settings(request.early_stopping.algorithm_settings)) - set(STOP_SETTINGS)
            if unknown:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"unknown early stopping setting(s) {', '.join(sorted(unknown))}",
                )
            return pb.ValidateEarlyStoppingSettingsReply()

        def GetEarlyStoppingRules(self, request: Any, context: Any) -> Any:  # noqa: N802
            _record(state, "GetEarlyStoppingRules", request)
            reply = pb.GetEarlyStoppingRulesReply()
            succeeded = [
                t for t in request.trials if t.status.condition == pb.TrialStatus.SUCCEEDED
            ]
            if succeeded:
                settings = _settings(request.experiment.spec.early_stopping.algorithm_settings)
                reply.early_stopping_rules.add(
                    name=request.experiment.spec.objective.objective_metric_name,
                    value=settings.get("min_value", "0.5"),
                    comparison=pb.LESS,
                    start_step=int(settings.get("start_step", "2")),
                )
            return reply

        def SetTrialStatus(self, request: Any, context: Any) -> Any:  # noqa: N802
            _record(state, "SetTrialStatus", request)
            return pb.SetTrialStatusReply()

    return Threshold()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="katib-test-algorithm", description="A Katib-protocol grid and early stopping."
    )
    p.add_argument("service", choices=["suggestion", "early-stopping", "both"])
    p.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("KATIB_TEST_PORT", "0")),
        help="default: $KATIB_TEST_PORT, else 6789 (6788 for early-stopping)",
    )
    p.add_argument(
        "--state",
        default=os.environ.get("KATIB_TEST_STATE", "/opt/katib/data"),
        help="state and request log directory",
    )
    args = p.parse_args(argv)
    _, pb_grpc = _api()
    import grpc

    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    if args.service in ("suggestion", "both"):
        pb_grpc.add_SuggestionServicer_to_server(suggestion_servicer(state), server)
    if args.service in ("early-stopping", "both"):
        pb_grpc.add_EarlyStoppingServicer_to_server(early_stopping_servicer(state), server)
    port = args.port or (6788 if args.service == "early-stopping" else 6789)
    server.add_insecure_port(f"0.0.0.0:{port}")
    server.start()
    print(f"katib-test-algorithm {args.service} listening on {port}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.stop(1).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
