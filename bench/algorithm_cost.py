"""CPU of the suggestion-algorithm per trial: its process's start plus one assignment per trial.

A child process does what an algorithm pod does for one Experiment, minus the cluster: it
imports the service (`kubetune_suggestion_algorithm.main`, as the pod's entry point does),
builds the algorithm with a data directory (as FromVolume), then hands out `--trials`
assignments one at a time, telling each result before the next (as a parallelism-1 Experiment
would). It reports its own user + system CPU (the interpreter's start included) at three
points: after the imports, after building the algorithm, at the end. The space is the
vs_katib bench's: one double parameter.

`--before DIR` (another checkout) runs that checkout's code too, alternating, so both see the
same load. Prints medians in CPU-ms, per trial, and the load average.

    python bench/algorithm_cost.py [--trials 40] [--runs 9] [--algorithms random,grid]
        [--before /work/wt/before]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, resource, sys, tempfile
from pathlib import Path

def cpu():
    used = resource.getrusage(resource.RUSAGE_SELF)
    return (used.ru_utime + used.ru_stime) * 1000

import kubetune_suggestion_algorithm.main
from kubetune_suggestion_algorithm import algorithms
from kubetune.algorithmsettings import parse
from kubetune.api.experiment import ParameterSpec
try:
    from kubetune_suggestion_algorithm.outcomes import Outcome
except ImportError:  # a checkout from before outcomes.py
    from kubetune_suggestion_algorithm.studying import Outcome
imported = cpu()
algorithm, trials = sys.argv[1], int(sys.argv[2])
space = {"min": "0.01", "max": "0.99"}
if algorithm == "grid":
    space["step"] = "0.0001"
parameters = [ParameterSpec.model_validate(
    {"name": "lr", "parameterType": "double", "feasibleSpace": space})]
search = algorithms.build(
    algorithm, parse(algorithm, [], parameters), parameters, experiment="bench",
    uid="0c3e6b1a-bench", maximize=False, data_dir=Path(tempfile.mkdtemp()),
    study_name="ns.bench.uid")
built = cpu()
written, outcomes = [], {}
for index in range(trials):
    search.catch_up(written, outcomes)
    new = search.next_assignments(index, 1)
    written += new
    value = float(new[0].parameter_assignments[0].value)
    outcomes[new[0].name] = Outcome((value - 0.3) ** 2)
search.catch_up(written, outcomes)
print(json.dumps({"imports": imported, "build": built - imported, "assignments": cpu() - built}))
"""


def one(root: Path, algorithm: str, trials: int) -> dict[str, float]:
    """One child of the checkout at `root` (its sources on the path, nothing installed)."""
    sources = [root / "shared" / "src", root / "services" / "suggestion-algorithm" / "src"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(s) for s in sources)}
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, algorithm, str(trials)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=cwd,
        ).stdout
    figures: dict[str, float] = json.loads(out)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--algorithms", default="random,grid")
    parser.add_argument("--before", type=Path, help="an older checkout's root")
    args = parser.parse_args()
    roots = {"this checkout": Path(__file__).resolve().parent.parent}
    if args.before is not None:
        roots["before"] = args.before.resolve()
    load = os.getloadavg()[0]
    for algorithm in args.algorithms.split(","):
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in roots}
        for _ in range(args.runs):
            for name, root in roots.items():
                runs[name].append(one(root, algorithm, args.trials))
        for name, figures in runs.items():
            median = {k: statistics.median(f[k] for f in figures) for k in figures[0]}
            total = sum(median.values())
            print(
                f"{algorithm:8} {name:14} imports {median['imports']:6.0f} ms"
                f"  build {median['build']:5.0f} ms"
                f"  {args.trials} assignments {median['assignments']:6.0f} ms"
                f"  per trial {total / args.trials:6.1f} CPU-ms"
            )
    print(f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}, {args.runs} runs each (medians)")


if __name__ == "__main__":
    main()
