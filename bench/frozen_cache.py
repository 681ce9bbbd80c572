"""What read-only cached objects cost: 10,000 Trials frozen as an informer caches them.

The informer freezes every object once, when it arrives (`kubetune.runtime.frozen`); readers
then share it. This prints, for `--trials` Trials (each with its rendered Job, conditions, an
observation and the usual metadata) and for the experiment-controller's slim form of them:

- freeze: the time to freeze them all (what one full relist adds), per Trial, beside the
  time to parse the same Trials from JSON (what the relist already pays);
- read: one pass reading every Trial's labels, conditions and observation, plain and frozen;
- memory: the bytes the Trials hold, plain and frozen (tracemalloc);
- copy: `thaw` of a frozen Trial against `copy.deepcopy` of a plain one (what a reconciler
  that needs a changed copy pays).

Times are CPU time, the best of `--repeat` runs.

    python bench/frozen_cache.py [--trials 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from kubetune import naming
from kubetune.kube import Obj
from kubetune.runtime.frozen import freeze, thaw
from kubetune_testkit import builders


def full_trial(index: int) -> Obj:
    """A finished Trial as the API server returns it."""
    name = f"exp-{index:06d}"
    body = builders.trial(name, builders.trial_job(), assignments={"lr": f"0.{index}"})
    body["metadata"].update(
        namespace="bench",
        uid=f"00000000-0000-0000-0000-{index:012d}",
        resourceVersion=str(100_000 + index),
        creationTimestamp="2026-01-01T00:00:00Z",
        ownerReferences=[
            {
                "apiVersion": "kubeflow.org/v1beta1",
                "kind": "Experiment",
                "name": "exp",
                "uid": "11111111-1111-1111-1111-111111111111",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )
    body["status"] = {
        "startTime": "2026-01-01T00:00:01Z",
        "completionTime": "2026-01-01T00:01:00Z",
        "conditions": [
            {
                "type": kind,
                "status": "False" if kind == "Running" else "True",
                "reason": f"Trial{kind}",
                "message": f"Trial is {kind.lower()}",
                "lastUpdateTime": "2026-01-01T00:01:00Z",
                "lastTransitionTime": "2026-01-01T00:01:00Z",
            }
            for kind in ("Created", "Running", "Succeeded")
        ],
        "observation": {"metrics": [{"name": "loss", "min": "0.1", "max": "0.9", "latest": "0.1"}]},
    }
    return body


def slim_trials(trials: list[Obj]) -> list[Obj] | None:
    """The experiment-controller's cached form, when that service is importable."""
    try:
        from kubetune_experiment_controller import summaries
    except ImportError:
        return None
    return [summaries.cached(t) for t in trials]


def best_of(repeat: int, work: Callable[[], object]) -> float:
    """The least CPU time of `repeat` runs, the collector paused (a shared, busy machine makes
    wall time and collection pauses noise)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            started = time.process_time()
            work()
            times.append(time.process_time() - started)
        finally:
            gc.enable()
    return min(times)


def read_pass(trials: list[Obj]) -> int:
    """What a planning pass reads of each Trial."""
    seen = 0
    for t in trials:
        meta = t.get("metadata") or {}
        if (meta.get("labels") or {}).get(naming.LABEL_EXPERIMENT):
            seen += 1
        for c in (t.get("status") or {}).get("conditions") or []:
            if c.get("status") == "True":
                seen += 1
        seen += len(((t.get("status") or {}).get("observation") or {}).get("metrics") or [])
    return seen


def held_bytes(make: Callable[[], Any]) -> tuple[int, Any]:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = make()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, kept


def report(label: str, trials: list[Obj], texts: list[str] | None, repeat: int) -> None:
    n = len(trials)
    freeze_s = best_of(repeat, lambda: [freeze(t) for t in trials])
    frozen = [freeze(t) for t in trials]
    print(f"{label}: {n} Trials")
    line = f"  freeze all: {freeze_s * 1000:.1f} ms ({freeze_s / n * 1e6:.1f} us a Trial)"
    if texts is not None:
        parse_s = best_of(repeat, lambda: [json.loads(s) for s in texts])
        line += f"; parsing them from JSON: {parse_s * 1000:.1f} ms"
    print(line)
    plain_read = best_of(repeat, lambda: read_pass(trials))
    frozen_read = best_of(repeat, lambda: read_pass(frozen))
    print(
        f"  read pass: plain {plain_read * 1000:.2f} ms, frozen {frozen_read * 1000:.2f} ms "
        f"({frozen_read / plain_read:.2f}x)"
    )
    plain_bytes, _ = held_bytes(lambda: copy.deepcopy(trials))
    frozen_bytes, _ = held_bytes(lambda: [freeze(t) for t in trials])
    print(
        f"  memory: plain {plain_bytes / 2**20:.1f} MiB, frozen {frozen_bytes / 2**20:.1f} MiB "
        f"({frozen_bytes / plain_bytes:.2f}x)"
    )
    sample = max(1, n // 10)
    deep = best_of(repeat, lambda: [copy.deepcopy(t) for t in trials[:sample]])
    thawed = best_of(repeat, lambda: [thaw(t) for t in frozen[:sample]])
    print(
        f"  one changeable copy: copy.deepcopy(plain) {deep / sample * 1e6:.1f} us, "
        f"thaw(frozen) {thawed / sample * 1e6:.1f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    trials = [full_trial(i) for i in range(args.trials)]
    texts = [json.dumps(t) for t in trials]
    trials = [json.loads(s) for s in texts]  # as parsed: no strings shared between Trials
    report(
        "whole Trials (trial-controller: a running Trial is cached whole)",
        trials,
        texts,
        args.repeat,
    )
    slim = slim_trials(trials)
    if slim is not None:
        report("experiment-controller's slim Trials (summaries.cached)", slim, None, args.repeat)


if __name__ == "__main__":
    main()
