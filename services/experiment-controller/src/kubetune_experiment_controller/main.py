"""`experiment-controller`: drives every Experiment through its Suggestion and Trials.

Watches Experiments (own key), and Suggestions and Trials mapped to their controlling
Experiment. The Trial informer is label-selected (`katib.kubeflow.org/experiment`) and keeps only
`summaries.cached` of each Trial, so 10,000 Trials cost a few MiB; a Trial update enqueues its
Experiment only when it changes what a plan reads (`summaries.plan_input_changed`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kubetune import config, flags, metrichistory, naming
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, TRIALS
from kubetune.runtime import Controller, owner_keys, running
from kubetune.runtime.watching import RESYNC_PERIOD
from kubetune_experiment_controller import planning, reconciling, summaries

SERVICE = "experiment-controller"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=SERVICE,
        description="kubetune experiment-controller: drives Experiments (Katib v1beta1).",
    )
    running.add_flags(p, SERVICE)
    flags.add_config_flag(p)
    flags.add_watch_namespace_flag(p)
    p.add_argument(
        "--max-listed-trials",
        action=flags.EnvDefault,
        env="KUBETUNE_MAX_LISTED_TRIALS",
        type=int,
        default=planning.DEFAULT_MAX_LISTED,
        help="names kept per trial list in Experiment status (newest); counts stay exact",
    )
    flags.add_resync_period_flag(
        p, default=RESYNC_PERIOD, what="full resyncs of the caches (default 10 hours)"
    )
    return p


def build(args: argparse.Namespace) -> Controller:
    """The reconciler and its controller, wired (also used by the tests).

    Raises:
        OSError, config.ConfigError: the katib-config file cannot be read or is invalid.
    """
    reconciler = reconciling.Reconciler(
        config.load(args.config), max_listed=int(args.max_listed_trials)
    )
    namespace = args.watch_namespace or None
    controller = Controller(
        SERVICE,
        reconciler.reconcile,
        resync_period=float(args.resync_period),
        namespace=namespace,
    )
    by_owner = owner_keys("Experiment", "kubeflow.org/v1beta1")
    controller.watch(EXPERIMENTS, namespace=namespace)
    controller.watch(SUGGESTIONS, by_owner, namespace=namespace)
    controller.watch(
        TRIALS,
        by_owner,
        namespace=namespace,
        label_selector=naming.LABEL_EXPERIMENT,
        transform=summaries.cached,
        # Dropped while parsing: 64 KiB a Trial would otherwise pass through memory whole
        # pages at a time (the summary never reads it).
        object_hook=metrichistory.drop_history,
        # Only changes a plan reads wake the Experiment: not a running Trial's interim reports.
        predicate=summaries.plan_input_changed,
    )
    return controller


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        controller = build(args)
    except (OSError, config.ConfigError) as e:
        print(f"{SERVICE}: {e}", file=sys.stderr)
        return 2
    return running.run([controller], args)


if __name__ == "__main__":
    sys.exit(main())
