"""Trials a TPE search needs to reach the best of a finished one: cold, and warm-started.

Per seed: an "old" TPE search (seed 1000+s) runs --old trials on a smooth objective of four
parameters; its best value is the target. Then two new TPE searches with the same seed s run
until one of their own trials reaches the target (at most --cap): cold, and warm-started with
the old search's results (`warmstarting.import_known`, the same call the algorithm makes
before its first assignment). Known results count for nothing: only the new search's own
trials are counted. Both are driven as the cluster drives the algorithm: one assignment at a
time (`next_assignments`), its Trial's value told back (`catch_up`). Prints both counts per
seed and their medians (a search that never reaches the target counts as --cap).

    python bench/warm_start.py [--seeds 7] [--old 40] [--cap 200]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys

from kubetune import algorithmsettings
from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import ParameterSpec
from kubetune.api.suggestion import TrialAssignment
from kubetune.api.warmstart import WarmStartSource
from kubetune.knownresults import KnownResult
from kubetune_suggestion_algorithm import searchspaces, studying, warmstarting
from kubetune_suggestion_algorithm.outcomes import Outcome

PARAMETERS = [
    ParameterSpec.model_validate(p)
    for p in [
        {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.0001", "max": "0.1"}},
        {"name": "momentum", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}},
        {"name": "layers", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "8"}},
        {"name": "opt", "parameterType": "categorical", "feasibleSpace": {"list": ["sgd", "adam"]}},
    ]
]
METRIC = "loss"


def loss(point: dict[str, str]) -> float:
    """Minimum 0 at lr 10^-2.5, momentum 0.9, 3 layers, adam."""
    return (
        (math.log10(float(point["lr"])) + 2.5) ** 2
        + (float(point["momentum"]) - 0.9) ** 2
        + abs(int(point["layers"]) - 3) / 4
        + (point["opt"] == "sgd") * 0.3
    )


def _search(seed: int) -> studying.Search:
    settings = [AlgorithmSetting(name="random_state", value=str(seed))]
    parsed = algorithmsettings.parse("tpe", settings, PARAMETERS)
    study = studying.open_study(None, f"bench.{seed}", False, seed)
    return studying.Search(study, "tpe", parsed, PARAMETERS, "exp")


def _point(assignment: TrialAssignment) -> dict[str, str]:
    return {p.name: p.value for p in assignment.parameter_assignments or []}


def run(search: studying.Search, trials: int, target: float | None) -> list[float]:
    """Up to `trials` trials, one at a time; stops at the first value <= `target`."""
    assignments: list[TrialAssignment] = []
    outcomes: dict[str, Outcome] = {}
    values: list[float] = []
    for index in range(trials):
        (new,) = search.next_assignments(index, 1)
        assignments.append(new)
        value = loss(_point(new))
        values.append(value)
        outcomes[new.name] = Outcome(value)
        search.catch_up(assignments, outcomes)
        if target is not None and value <= target:
            break
    return values


def old_results(seed: int, trials: int) -> tuple[float, list[KnownResult]]:
    search = _search(1000 + seed)
    run(search, trials, None)
    finished = [t for t in search.study.get_trials() if t.value is not None]
    results = [
        KnownResult(searchspaces.external(search.space, t.params), {METRIC: t.value}, f"t{i}")
        for i, t in enumerate(finished)
    ]
    return min(t.value for t in finished if t.value is not None), results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=7)
    parser.add_argument("--old", type=int, default=40, help="trials of the finished search")
    parser.add_argument("--cap", type=int, default=200, help="most trials a new search runs")
    args = parser.parse_args(argv)
    cold_counts, warm_counts = [], []
    print(f"{'seed':>4} {'target':>8} {'cold':>5} {'warm':>5}")
    for seed in range(args.seeds):
        target, results = old_results(seed, args.old)
        cold = run(_search(seed), args.cap, target)
        warm_search = _search(seed)
        source = WarmStartSource(kind="Experiment", name="old")
        imported = warmstarting.import_known(warm_search, [(source, results)], [METRIC])
        assert imported.status.imported == len(results), imported
        warm = run(warm_search, args.cap, target)
        count_cold = len(cold) if min(cold) <= target else args.cap
        count_warm = len(warm) if min(warm) <= target else args.cap
        cold_counts.append(count_cold)
        warm_counts.append(count_warm)
        print(f"{seed:>4} {target:>8.4f} {count_cold:>5} {count_warm:>5}")
    print(
        f"median trials to reach the old best ({args.old} TPE trials, {args.seeds} seeds, "
        f"cap {args.cap}): cold {statistics.median(cold_counts):g}, "
        f"warm-started {statistics.median(warm_counts):g}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
