"""The Pareto front of a multi-objective Experiment as the experiment-controller computes it on
every reconcile: from the Trial summaries it keeps (`fronts.pareto_front`), at 1,000 / 10,000 /
100,000 Succeeded trials, two and three objectives.

Two shapes of results: `random` (independent uniform values: a small front, the usual case)
and `tradeoff` (every trial on one line or plane of trade-offs: the whole set is the front, the
worst case). Two and three objectives have their own sweeps; four run the O(n·f) comparison
with the front kept, so `--widths 4` is printed only on request.
Prints the median of --repeat runs of the front alone and of a whole `planning.plan` pass, in
CPU seconds of this process (the machine is shared: wall clock mostly measures the others) and
wall-clock seconds.

    python bench/pareto_front.py [--sizes 1000,10000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from functools import partial
from typing import Any


def _objective(width: int) -> Any:
    from kubetune.api.common import ObjectiveSpec

    targets = [{"metricName": f"m{i}", "type": "minimize"} for i in range(width)]
    targets[0]["type"] = "maximize"
    return ObjectiveSpec.model_validate(
        {"type": "maximize", "objectiveMetricName": "m0", "objectives": targets}
    )


def _summaries(n: int, width: int, shape: str, seed: int) -> list[Any]:
    from kubetune.conditions import TrialState
    from kubetune_experiment_controller.summaries import TrialSummary

    rng = random.Random(seed)
    out = []
    for i in range(n):
        if shape == "random":
            values = [rng.random() for _ in range(width)]
        else:  # on the front: the first (maximised) grows as the others (minimised) do
            cuts = sorted(rng.random() for _ in range(width - 1))
            values = [b - a for a, b in zip([0.0, *cuts], [*cuts, 1.0], strict=True)]
            values[0] = 1.0 - values[0]
        metrics = tuple((f"m{k}", repr(v), repr(v), repr(v)) for k, v in enumerate(values))
        out.append(
            TrialSummary(
                name=f"exp-{i:06d}",
                state=TrialState.SUCCEEDED,
                created=f"2026-01-01T00:00:{i % 60:02d}Z",
                assignments=(("lr", repr(rng.random())), ("layers", str(i % 8))),
                metrics=metrics,
            )
        )
    return out


def _median(fn: Any, repeat: int) -> tuple[float, float, Any]:
    """Median CPU and wall-clock seconds of `repeat` calls, and the last result."""
    cpu, wall, result = [], [], None
    for _ in range(repeat):
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        result = fn()
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    return statistics.median(cpu), statistics.median(wall), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--widths", default="2,3")
    args = parser.parse_args()

    from kubetune.api.experiment import Experiment
    from kubetune_experiment_controller import planning
    from kubetune_experiment_controller.fronts import pareto_front
    from kubetune_testkit import builders

    print(
        f"{'trials':>8} {'objectives':>10} {'shape':>9} {'front':>7} "
        f"{'front cpu/wall s':>17} {'plan cpu/wall s':>16}",
        flush=True,
    )
    for n in (int(s) for s in args.sizes.split(",")):
        for width in (int(w) for w in args.widths.split(",")):
            for shape in ("random", "tradeoff"):
                objective = _objective(width)
                trials = _summaries(n, width, shape, seed=n + width)
                cpu, wall, front = _median(partial(pareto_front, objective, trials), args.repeat)
                body = builders.experiment("exp", "ns", collector=None, maxTrialCount=n + 1)
                body["spec"]["objective"] = objective.to_wire()
                experiment = Experiment.model_validate(body)
                plan_cpu, plan_wall, _ = _median(
                    partial(planning.plan, experiment, trials, None, "2026-01-01T00:00:00Z"),
                    args.repeat,
                )
                print(
                    f"{n:>8} {width:>10} {shape:>9} {front.size:>7} "
                    f"{cpu:>8.3f}/{wall:<8.3f} {plan_cpu:>7.3f}/{plan_wall:<8.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
