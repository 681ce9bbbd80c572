"""Per-assignment time of hyperband and pbt after 100 / 1,000 / 2,500 / 5,000 assignments.

Neither keeps a study: each pass replays the Suggestion's assignments and the Trials' outcomes
(`catch_up`) and computes the next slot of its schedule, so the cost of one assignment is that
replay plus the new point. The history is made by the algorithm itself (driven as the cluster
would: batches of 10, every Trial finishing with a smooth objective of its point), then a fresh
instance (as in a restarted pod) and the warm one each time `catch_up` + one
`next_assignments` (median of --repeat runs). The `slot` column says where the timed slot is:
hyperband's bracket/rung (a rung ≥ 1 ranks the previous rung's Trials: 2,500 is in the rung
that ranks 2,187), pbt's generation. pbt copies a small checkpoint per assignment under
a temp directory, as it does on the suggestion's volume. Target (issue 16): < 100 ms at 1,000.

    python bench/stateless_algorithms.py [--sizes 100,1000,2500,5000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.0001", "max": "0.1"}},
    {"name": "momentum", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}},
    {"name": "layers", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "8"}},
    {"name": "opt", "parameterType": "categorical", "feasibleSpace": {"list": ["sgd", "adam"]}},
    {"name": "epochs", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "1"}},
]
SETTINGS = {
    # eta 3, r_l 3**7: 8 brackets, 6,433 slots in all
    "hyperband": {"resource_name": "epochs", "eta": "3", "r_l": "2187"},
    "pbt": {"suggestion_trial_dir": "/ckpt", "n_population": "20", "truncation_threshold": "0.2"},
}


def _objective(point: dict[str, str]) -> float:
    return (
        -(
            (math.log10(float(point["lr"])) + 2.5) ** 2
            + (float(point["momentum"]) - 0.9) ** 2
            + abs(int(point["layers"]) - 3) / 4
            + (point["opt"] == "sgd") * 0.3
        )
        + int(point["epochs"]) / 1000
    )


def _build(algorithm: str, data_dir: Path) -> Any:
    from kubetune import algorithmsettings
    from kubetune.api.common import AlgorithmSetting
    from kubetune.api.experiment import ParameterSpec
    from kubetune_suggestion_algorithm import algorithms

    parameters = [ParameterSpec.model_validate(p) for p in PARAMETERS]
    listed = [AlgorithmSetting(name=k, value=v) for k, v in SETTINGS[algorithm].items()]
    settings = algorithmsettings.parse(algorithm, listed, parameters)
    return algorithms.build(
        algorithm,
        {**settings, "random_state": 7},
        parameters,
        experiment="bench",
        uid="bench",
        maximize=True,
        data_dir=data_dir,
        study_name="unused",
    )


def run(algorithm: str, size: int, repeat: int) -> tuple[float, float, str]:
    from kubetune_suggestion_algorithm.outcomes import Outcome

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        warm = _build(algorithm, data_dir)
        written: list[Any] = []
        outcomes: dict[str, Outcome] = {}
        while len(written) < size + repeat:
            warm.catch_up(written, outcomes)
            new = warm.next_assignments(len(written), min(10, size + repeat - len(written)))
            if not new:
                raise SystemExit(f"{algorithm} stalled at {len(written)}")
            for a in new:
                point = {p.name: p.value for p in a.parameter_assignments}
                outcomes[a.name] = Outcome(_objective(point))
                if algorithm == "pbt":
                    (data_dir / "bench" / a.name / "checkpoint.bin").write_bytes(b"x" * 4096)
            written += new
        cold_times: list[float] = []
        warm_times: list[float] = []
        for step in range(repeat):
            start = size + step
            for times, instance in ((cold_times, None), (warm_times, warm)):
                began = time.perf_counter()
                algo = instance or _build(algorithm, data_dir)
                algo.catch_up(written[:start], outcomes)
                got = algo.next_assignments(start, 1)
                times.append(time.perf_counter() - began)
                assert got and got[0] == written[start], (algorithm, start)
        if algorithm == "hyperband":
            rung = warm.rung_of(size)
            slot = f"s={rung.bracket} i={rung.rung}"
        else:
            labels = written[size].labels or {}
            slot = f"gen {labels.get('pbt.suggestion.katib.kubeflow.org/generation')}"
    return statistics.median(cold_times), statistics.median(warm_times), slot


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,2500,5000")
    parser.add_argument("--algorithms", default="hyperband,pbt")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'algorithm':<12}{'trials':>7}{'slot':>12}{'new pod ms':>12}{'warm ms':>10}")
    for algorithm in args.algorithms.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            cold, warm, slot = run(algorithm, size, args.repeat)
            print(
                f"{algorithm:<12}{size:>7}{slot:>12}{cold * 1000:>12.1f}{warm * 1000:>10.1f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
