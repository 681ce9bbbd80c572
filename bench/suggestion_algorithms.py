"""Time to produce one assignment, and resident memory, after 100 / 1,000 / 5,000 finished trials.

For each algorithm (TPE, CMA-ES, Bayesian optimization) and history size, a fresh process (as a
restarted algorithm pod would be) opens a study in a journal file under a temp directory, fills
it with N finished trials (random points of a 4-parameter space: 2 doubles, 1 int, 1
categorical; a smooth objective), then times `Search.next_assignments` for one new assignment
(median of --repeat runs, each a new index), and reports the process's RSS after the runs.
Targets (issue 7): TPE under 100 ms and under 300 MiB at 1,000 trials; nothing above Katib's
60 s suggestion timeout at 5,000 trials.

    python bench/suggestion_algorithms.py [--sizes 100,1000,5000] [--algorithms tpe,cmaes,...]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARAMETERS = [
    {
        "name": "lr",
        "parameterType": "double",
        "feasibleSpace": {"min": "0.0001", "max": "0.1", "distribution": "logUniform"},
    },
    {"name": "momentum", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}},
    {"name": "layers", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "8"}},
    {"name": "opt", "parameterType": "categorical", "feasibleSpace": {"list": ["sgd", "adam"]}},
]


def one(algorithm: str, size: int, repeat: int) -> dict[str, float]:
    """Run in a child process: fill a study with `size` trials, time new assignments."""
    import optuna
    import psutil

    from kubetune import algorithmsettings
    from kubetune.api.experiment import ParameterSpec
    from kubetune_suggestion_algorithm import searchspaces, studying

    parameters = [ParameterSpec.model_validate(p) for p in PARAMETERS]
    settings = algorithmsettings.parse(algorithm, [], parameters)
    space = searchspaces.build(parameters)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        study = studying.open_study(Path(tmp), "bench", False, 7)
        trials = []
        for index in range(size):
            lr = math.exp(rng.uniform(math.log(1e-4), math.log(0.1)))
            momentum, layers, opt = rng.random(), rng.randint(1, 8), rng.choice(["sgd", "adam"])
            params: dict[str, object] = {
                "lr": lr,
                "momentum": momentum,
                "layers": layers,
                "opt": opt,
            }
            value = (
                (math.log10(lr) + 2.5) ** 2
                + (momentum - 0.9) ** 2
                + abs(layers - 3) / 4
                + (opt == "sgd") * 0.3
            )
            trials.append(
                optuna.trial.create_trial(
                    params=params,
                    distributions=searchspaces.distributions(space),
                    value=value,
                    user_attrs={studying.INDEX: index, studying.NAME: f"t{index}"},
                )
            )
        study.add_trials(trials)
        search = studying.Search(study, algorithm, settings, parameters, "bench")
        times = []
        for step in range(repeat):
            started = time.perf_counter()
            search.next_assignments(size + step, 1)
            times.append(time.perf_counter() - started)
        rss = psutil.Process().memory_info().rss / 2**20
    return {"median_s": statistics.median(times), "max_s": max(times), "rss_mib": rss}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--algorithms", default="tpe,cmaes,bayesianoptimization")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("ALGORITHM", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one(args.child[0], int(args.child[1]), args.repeat)))
        return 0
    print(f"{'algorithm':<22}{'trials':>7}{'median ms':>12}{'max ms':>10}{'RSS MiB':>10}")
    for algorithm in args.algorithms.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    algorithm,
                    str(size),
                    "--repeat",
                    str(args.repeat),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"{algorithm:<22}{size:>7}{figures['median_s'] * 1000:>12.1f}"
                f"{figures['max_s'] * 1000:>10.1f}{figures['rss_mib']:>10.0f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
