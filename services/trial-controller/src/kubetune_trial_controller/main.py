"""`trial-controller`: runs every Trial as its job (any allowed kind) and keeps its conditions.

Flags have env-var fallbacks; the shared ones (kubeconfig, logs, config, watch namespace,
probes, leader election) come from `kubetune.flags`, workers from `kubetune.runtime.running`.
The allow-list is `--trial-resources`, else the katib-config's
`init.controller.trialResources`, else kubetune's default list.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from kubetune import config, flags, metrichistory, naming
from kubetune.kube import EVENTS, PODS, TRIALS
from kubetune.runtime import Controller, changed_beyond, owner_keys, running
from kubetune_trial_controller import caching, kinds, podverdict, reconciling, refusals

log = logging.getLogger(__name__)
SERVICE = "trial-controller"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=SERVICE,
        description="Create each Trial's job from spec.runSpec and keep the Trial's conditions.",
    )
    running.add_flags(p, SERVICE)
    flags.add_config_flag(p)
    flags.add_watch_namespace_flag(p)
    env = flags.EnvDefault
    p.add_argument(
        "--trial-resources",
        action=env,
        env="KUBETUNE_TRIAL_RESOURCES",
        default=None,
        help="job kinds Trials may create, Kind.version.group separated by commas "
        "(overrides the katib-config)",
    )
    p.add_argument(
        "--metrics-timeout",
        action=env,
        env="KUBETUNE_METRICS_TIMEOUT",
        type=float,
        default=600.0,
        help="seconds to wait for the collector's observation after the job succeeded, "
        "then MetricsUnavailable (0 = wait for ever, as upstream)",
    )
    return p


def allowed_kinds(args: argparse.Namespace) -> frozenset[kinds.JobKind]:
    """The allow-list from the flag, else the config file, else the defaults.

    Raises:
        kinds.KindError, config.ConfigError: a bad entry or config file.
    """
    if args.trial_resources:
        return kinds.parse_allow_list(kinds.split_flag(str(args.trial_resources)))
    cfg = config.load(args.config)
    return kinds.parse_allow_list(cfg.init.controller.trial_resources)


def build(args: argparse.Namespace) -> Controller:
    """The reconciler and its controller, wired: Trials and the Events of refused pods (one
    server-filtered watch per reason) are watched at start, job kinds when first needed."""
    allowed = allowed_kinds(args)
    pods = reconciling.BATCH_JOB in allowed
    reconciler = reconciling.TrialReconciler(
        allowed, metrics_timeout=float(args.metrics_timeout), pods=pods
    )
    namespace = args.watch_namespace or None
    controller = Controller(SERVICE, reconciler.reconcile, namespace=namespace)
    # The metric history (up to 64 KiB a Trial) is the collector's; this controller never
    # reads it, so it is dropped while each Trial is parsed and never reaches the cache; a
    # finished Trial is cached slim (`caching`).
    controller.watch(
        TRIALS, namespace=namespace, object_hook=metrichistory.drop_history, transform=caching.slim
    )
    if pods:
        # A batch/v1 Job's success is read from its pods a second before the Job controller
        # writes it (`podverdict`); only pods carrying the trial label, kept slim. Of a pod's
        # six or so updates, the ones that change nothing the slim copy keeps (its scheduling,
        # its containers' states, finalizers) wake no pass.
        controller.watch(
            PODS,
            owner_keys("Job", "batch/v1"),
            namespace=namespace,
            label_selector=naming.LABEL_TRIAL,
            transform=podverdict.slim,
            predicate=changed_beyond(),
        )
    refused = refusals.event_keys(k.kind for k in allowed)
    for reason in refusals.REASONS:
        controller.watch(EVENTS, refused, namespace=namespace, field_selector=f"reason={reason}")
    return controller


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        controller = build(args)
    except (OSError, config.ConfigError, kinds.KindError) as e:
        print(f"{SERVICE}: {e}", file=sys.stderr)
        return 2
    return running.run([controller], args)


if __name__ == "__main__":
    sys.exit(main())
