"""Per-assignment time through the bridge (a Katib gRPC algorithm image) against the same
algorithm without it, after 1,000 trials.

The algorithm is kubetune's own `random` (Optuna, in memory). Without the bridge it runs as the
suggestion-algorithm runs it: each pass `catch_up` (the Suggestion's assignments and the
Trials' outcomes) and one `next_assignments`. With the bridge, the same algorithm sits behind a
Katib gRPC `Suggestion` server (a servicer of the kubeflow-katib package, in its own process, as
the image's container is), and each pass is what `suggestion-algorithm bridge` does: convert
the Experiment and every Trial to Katib's messages (`bridge.search`) and one `GetSuggestions`
over loopback, which the server answers by telling its study the finished Trials it has not
seen and asking it for the point. Both sides parse the same 1,000 Trial objects first (the pass
does that in either mode). Passes alternate, so both see the same load. Printed: median and
p90 per pass (one assignment each) over --repeat passes, and the ratio (target, issue 16:
< 2x).

    python bench/bridge.py [--trials 1000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from typing import Any

PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.0001", "max": "0.1"}},
    {"name": "momentum", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}},
    {"name": "layers", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "8"}},
    {"name": "opt", "parameterType": "categorical", "feasibleSpace": {"list": ["sgd", "adam"]}},
]


def _objective(point: dict[str, str]) -> float:
    return -(
        (float(point["lr"]) - 0.01) ** 2 * 100
        + (float(point["momentum"]) - 0.9) ** 2
        + abs(int(point["layers"]) - 3) / 4
        + (point["opt"] == "sgd") * 0.3
    )


def _algorithm() -> Any:
    from kubetune.api.experiment import ParameterSpec
    from kubetune_suggestion_algorithm import algorithms

    return algorithms.build(
        "random",
        {"random_state": 7},
        [ParameterSpec.model_validate(p) for p in PARAMETERS],
        experiment="bench",
        uid="u-bench",
        maximize=True,
        data_dir=None,
        study_name="bench",
    )


def _serve(port: int, ready: Any) -> None:
    """The Katib-protocol image: kubetune's random behind the generated SuggestionServicer."""
    from concurrent import futures

    import grpc

    from kubetune.api.common import ParameterAssignment
    from kubetune.api.suggestion import TrialAssignment
    from kubetune.katibapi import pb, pb_grpc
    from kubetune_suggestion_algorithm.outcomes import Outcome

    search = _algorithm()
    seen: dict[str, TrialAssignment] = {}
    order: list[str] = []

    class Servicer(pb_grpc.SuggestionServicer):  # type: ignore[misc]
        def GetSuggestions(self, request: Any, context: Any) -> Any:  # noqa: N802
            outcomes = {}
            for trial in request.trials:
                if trial.name not in seen:
                    seen[trial.name] = TrialAssignment(
                        name=trial.name,
                        parameter_assignments=[
                            ParameterAssignment(name=a.name, value=a.value)
                            for a in trial.spec.parameter_assignments.assignments
                        ],
                    )
                    order.append(trial.name)
                if trial.status.condition == pb.TrialStatus.SUCCEEDED:
                    value = float(trial.status.observation.metrics[0].value)
                    outcomes[trial.name] = Outcome(value)
            assignments = [seen[n] for n in order]
            search.catch_up(assignments, outcomes)
            new = search.next_assignments(len(assignments), request.current_request_number)
            reply = pb.GetSuggestionsReply()
            for a in new:
                item = reply.parameter_assignments.add()
                for p in a.parameter_assignments or []:
                    item.assignments.add(name=p.name, value=str(p.value))
            # the bench's next pass sends this assignment as a finished Trial
            return reply

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_SuggestionServicer_to_server(Servicer(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    ready.set()
    server.wait_for_termination()


def _history(count: int) -> tuple[Any, list[dict[str, Any]]]:
    """An Experiment and `count` Succeeded Trials of points drawn by the algorithm itself."""
    from kubetune.api.experiment import Experiment
    from kubetune_testkit import builders

    search = _algorithm()
    points = search.next_assignments(0, count)
    experiment = Experiment.model_validate(
        builders.experiment(
            "bench",
            "ns",
            algorithm=builders.algorithm_spec("random", {"random_state": "7"}),
            objective_spec=builders.objective("acc"),
            parameters=PARAMETERS,
        )
    )
    experiment.metadata.uid = "u-bench"
    trials = []
    for a in points:
        values = {p.name: str(p.value) for p in a.parameter_assignments or []}
        body = builders.trial(
            a.name, experiment="bench", assignments=values, objective_spec=builders.objective("acc")
        )
        body["metadata"]["namespace"] = "ns"
        value = str(round(_objective(values), 6))
        body["status"] = {
            "startTime": "2026-01-01T00:00:00Z",
            "completionTime": "2026-01-01T00:01:00Z",
            "conditions": [
                {"type": "Created", "status": "True"},
                {"type": "Running", "status": "False"},
                {"type": "Succeeded", "status": "True"},
            ],
            "observation": {
                "metrics": [{"name": "acc", "min": value, "max": value, "latest": value}]
            },
        }
        trials.append(body)
    return experiment, trials


def _stats(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"median {statistics.median(ordered) * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=30)
    args = p.parse_args()

    from kubetune.api.suggestion import Suggestion, TrialAssignment
    from kubetune.api.trial import Trial
    from kubetune_suggestion_algorithm import bridge, syncing
    from kubetune_testkit.processes import free_port

    experiment, raw = _history(args.trials)

    def parse() -> tuple[list[Trial], list[TrialAssignment], dict[str, Any]]:
        trials = [Trial.model_validate(t) for t in raw]
        assignments = [
            TrialAssignment(
                name=t.metadata.name or "", parameter_assignments=t.spec.parameter_assignments
            )
            for t in trials
        ]
        outcomes = {}
        for t in trials:
            result = syncing.outcome(experiment, t)
            if result is not None:
                outcomes[t.metadata.name or ""] = result
        return trials, assignments, outcomes

    # Without the bridge: a warm algorithm (the first pass tells it the 1,000 Trials).
    direct = _algorithm()
    _, assignments, outcomes = parse()
    direct.catch_up(assignments, outcomes)
    # Through the bridge: the same algorithm in a gRPC server process.
    port = free_port()
    ready = multiprocessing.get_context("spawn").Event()
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(port, ready))
    server.start()
    without, through = [], []
    try:
        ready.wait(60)
        link = bridge.Bridge(f"127.0.0.1:{port}")
        suggestion = Suggestion.model_validate(
            {"metadata": {"name": "bench"}, "spec": {"requests": args.trials + 1}}
        )
        trials, _, _ = parse()
        link.search(experiment, suggestion, trials).next_assignments(len(trials), 1)  # warm
        # Alternating passes: both see the same load (the machine is shared and noisy).
        for _ in range(args.repeat):
            start = time.perf_counter()
            _, assignments, outcomes = parse()
            direct.catch_up(assignments, outcomes)
            direct.next_assignments(len(assignments), 1)
            without.append(time.perf_counter() - start)

            start = time.perf_counter()
            trials, assignments, _ = parse()
            link.search(experiment, suggestion, trials).next_assignments(len(assignments), 1)
            through.append(time.perf_counter() - start)
    finally:
        server.terminate()
        server.join(10)

    print(f"trials: {args.trials}, passes: {args.repeat} (one assignment each)")
    print(f"without the bridge: {_stats(without)}")
    print(f"through the bridge: {_stats(through)}")
    ratio = statistics.median(through) / statistics.median(without)
    print(f"ratio (median): {ratio:.2f}x (target < 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
