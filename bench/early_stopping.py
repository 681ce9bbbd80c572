"""Benchmark early stopping in the collector: a report -> the rule's decision -> the training
process stopped.

Each run starts one training process under the webhook's real sh wrapper (StdOut: tee to the
metrics log), printing a bad `loss` at random intervals; it notes the wall-clock time just
before writing the third one, the report on which the rule (from step 3) decides. The
collector runs in-process on its real path (watchfiles -> FileTail -> TextParser ->
EarlyStopper -> mark + SIGTERM) with a rule `loss;0.5;greater;3`; a thread blocked in
waitpid sees the training process (the wrapper's child, then the wrapper) end.
Latency = that end minus the bad report's write.
Target: p50 < 500 ms.

Run: `.tox/pns-collector/bin/python bench/early_stopping.py --runs 20` (any env with the
pns-collector package installed). Prints figures; exit code 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kubetune import wrapperscript
from kubetune.api.common import ObjectiveSpec, ObjectiveType
from kubetune_pns_collector import collecting, parsing, stopping, summaries

TARGET_S = 0.500
TRAIN = """
import sys, time
pause, stamp = float(sys.argv[1]), sys.argv[2]
for i in range(2):
    print(f"epoch {i}: loss={0.9 - i / 1000:.4f}", flush=True)
    time.sleep(pause)
t = time.time()
open(stamp, "w").write(repr(t))
print("epoch 2: loss=0.8000", flush=True)
time.sleep(60)
"""


def one_run(log_dir: Path, pause: float) -> tuple[float, float]:
    """(latency from the bad report to the training process's end, run's total seconds)."""
    stamp = log_dir / "stamp"
    metrics = log_dir / "metrics.log"
    script = wrapperscript.sh_wrap(
        f"{sys.executable} -c '{TRAIN}' {pause} {stamp}", str(log_dir), metrics_file=str(metrics)
    )
    started = time.monotonic()
    wrapper = subprocess.Popen(
        ["sh", "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    ended: list[float] = []

    def reap() -> None:
        wrapper.wait()
        ended.append(time.time())

    reaper = threading.Thread(target=reap)
    reaper.start()
    objective = ObjectiveSpec(type=ObjectiveType.MINIMIZE, objective_metric_name="loss")
    summary = summaries.RunningSummary(objective)
    source = collecting.TextSource(metrics, parsing.TextParser(sorted(summary.names)))
    stopper = stopping.EarlyStopper(
        [stopping.parse_rule("loss;0.5;greater;3")], "loss", ObjectiveType.MINIMIZE
    )
    settings = collecting.Settings(log_dir=log_dir, register_timeout=10, timeout=90)
    outcome = collecting.Collector(settings, source, summary, None, stopper).run()
    reaper.join(10)
    assert outcome.early_stopped and ended, outcome
    return ended[0] - float(stamp.read_text()), time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    latencies = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="kubetune-es-bench-") as d:
            latency, _ = one_run(Path(d), rng.uniform(0.05, 0.4))
            latencies.append(latency)
    latencies.sort()
    p50 = statistics.median(latencies)
    p90 = latencies[min(len(latencies) - 1, int(0.9 * len(latencies)))]
    print(
        f"report -> early-stop decision -> training process stopped over {args.runs} runs: "
        f"p50 {p50 * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms "
        f"(target p50 < {TARGET_S * 1000:.0f} ms)"
    )
    return 0 if p50 < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
