"""enas: the controller's cost per request up to 100 trials, its memory and its state file.

The algorithm is driven as the cluster drives it: requests of --batch new architectures, each
after the previous batch's Trials "finished" (a made-up accuracy). Every request after the first
trains the controller `controller_train_steps` times (upstream's default 50) and samples the
batch, and saves the state to the data directory (as with FromVolume). Printed: per request the
time (median and max over requests, wall clock and CPU), the time of one training step, the peak
memory of this process (RSS) and of NumPy's allocations (tracemalloc), and the state file's
size, for the nasConfig of Katib's enas-cpu.yaml (106 operations) at --layers layers.

    python bench/enas_controller.py [--trials 100] [--batch 3] [--layers 8]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from kubetune import algorithmsettings
from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm import algorithms
from kubetune_suggestion_algorithm.outcomes import Outcome
from kubetune_testkit.examples import examples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--layers", type=int, default=8, help="numLayers of the graph")
    parser.add_argument("--train-steps", default="50", help="controller_train_steps")
    args = parser.parse_args(argv)

    doc = next(d for name, d in examples("Experiment") if name.startswith("katib-enas-cpu:"))
    doc["spec"]["nasConfig"]["graphConfig"]["numLayers"] = args.layers
    experiment = Experiment.model_validate(doc)
    settings = [AlgorithmSetting(name="controller_train_steps", value=args.train_steps)]
    tracemalloc.start()
    with tempfile.TemporaryDirectory() as directory:
        search = algorithms.build(
            "enas",
            algorithmsettings.parse("enas", settings),
            [],
            experiment="enas",
            uid="bench",
            maximize=True,
            data_dir=Path(directory),
            study_name="bench",
            nas_config=experiment.spec.nas_config,
        )
        handed: list[Outcome] = []
        assignments: list[TrialAssignment] = []
        times = []
        cpu = []
        while len(assignments) < args.trials:
            count = min(args.batch, args.trials - len(assignments))
            started, started_cpu = time.perf_counter(), time.process_time()
            new = search.next_assignments(len(assignments), count)
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
            assignments += new
            handed += [Outcome(0.5 + 0.4 * (i % 7) / 7) for i in range(count)]
            search.catch_up(
                assignments, {a.name: o for a, o in zip(assignments, handed, strict=True)}
            )
        state = next(Path(directory).glob("*.npz"))
        size = state.stat().st_size
    _, traced_peak = tracemalloc.get_traced_memory()
    trained = times[1:] or times
    trained_cpu = cpu[1:] or cpu
    steps = int(args.train_steps)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"enas, {args.layers} layers, 106 operations, {args.trials} trials in requests of "
        f"{args.batch}, {steps} training steps per request"
    )
    print(
        f"request (train + sample + save): median {statistics.median(trained) * 1000:.0f} ms, "
        f"max {max(trained) * 1000:.0f} ms; first (no training) {times[0] * 1000:.0f} ms"
    )
    print(
        f"one training step: {statistics.median(trained) / steps * 1000:.1f} ms "
        f"({statistics.median(trained_cpu) / steps * 1000:.1f} ms of CPU: on a busy machine "
        "the wall time is mostly waiting for a core)"
    )
    print(f"memory: peak RSS {rss:.0f} MiB, peak traced allocations {traced_peak / 2**20:.1f} MiB")
    print(f"state file: {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
