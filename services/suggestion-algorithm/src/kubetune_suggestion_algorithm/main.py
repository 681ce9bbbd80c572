"""`suggestion-algorithm`: the process in the algorithm Deployment of one Suggestion.

A one-key controller of `kubetune.runtime` (`reconciling`): its Suggestion, its Experiment and
the Experiment's Trials are watched, and every change (and a periodic resync) wakes one
`syncing.Syncer.sync` pass. /healthz and /readyz are served on `--probe-port` (the Service's
6789). SIGTERM ends the process with 0 after the pass in progress.

`suggestion-algorithm bridge ...` is the same process beside a Katib gRPC algorithm image
(`bridge`): the image computes, this process keeps the Suggestion's status. Its probes are off by
default (port 0), since the image owns 6789.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kubetune import flags, knownresults
from kubetune.flags import EnvDefault
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, TRIALS
from kubetune.runtime import Backoff, Controller, Key, WorkQueue, fields_changed, running
from kubetune_suggestion_algorithm import reconciling, syncing

log = logging.getLogger("kubetune_suggestion_algorithm")
SERVICE = "suggestion-algorithm"
EXPERIMENT_READ = fields_changed("metadata.uid", "metadata.name", "spec")
TRIAL_READ = fields_changed("spec", "status.conditions", "status.observation")


def parser(bridged: bool = False) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{SERVICE} bridge" if bridged else SERVICE,
        description="Fill a Suggestion's status with assignments from a Katib gRPC algorithm "
        "image in the same pod."
        if bridged
        else "Fill a Suggestion's status with assignments from a search algorithm "
        f"('{SERVICE} bridge --help': beside a Katib gRPC image).",
    )
    # One process per Suggestion by construction: no leader election.
    running.add_flags(p, SERVICE, probe_port=0 if bridged else 6789, leader_election=False)
    if bridged:
        from kubetune_suggestion_algorithm import bridge  # gRPC only where it is used

        bridge.add_flags(p)
    else:
        p.add_argument(
            "--early-stopping-endpoint",
            action=EnvDefault,
            env="KUBETUNE_BRIDGE_EARLY_STOPPING_ENDPOINT",
            default="",
            help="a Katib EarlyStopping image in this pod (katib-config earlyStoppings[]) "
            "computes the early-stopping rules instead of kubetune",
        )
    p.add_argument(
        "--suggestion",
        action=EnvDefault,
        env="KUBETUNE_SUGGESTION",
        required=True,
        help="Suggestion name (= Experiment name)",
    )
    p.add_argument(
        "--namespace",
        action=EnvDefault,
        env="KUBETUNE_NAMESPACE",
        required=True,
        help="namespace of the Suggestion (as kubectl's -n: the named object's namespace)",
    )
    p.add_argument(
        "--algorithm",
        action=EnvDefault,
        env="KUBETUNE_ALGORITHM",
        default="",
        help="algorithm this process was started for (the Suggestion's spec wins)",
    )
    p.add_argument(
        "--data-dir",
        action=EnvDefault,
        env="KUBETUNE_DATA_DIR",
        default="/opt/katib/data",
        help="directory of the algorithm state ('' = in memory)",
    )
    p.add_argument(
        "--max-suggestion-bytes",
        action=EnvDefault,
        env="KUBETUNE_MAX_SUGGESTION_BYTES",
        type=int,
        default=syncing.DEFAULT_MAX_BYTES,
        help="keep the Suggestion object below this size: more new assignments wait until "
        "their Trials exist (etcd refuses objects above ~1.5 MiB)",
    )
    p.add_argument(
        "--kept-trial-names",
        action=EnvDefault,
        env="KUBETUNE_KEPT_TRIAL_NAMES",
        type=int,
        default=syncing.DEFAULT_KEEP_NAMED,
        help="name-only entries (assignments whose Trial exists) kept at the head of "
        "status.suggestions; older ones are dropped, suggestionCount still counts them",
    )
    p.add_argument(
        "--warm-start-dir",
        action=EnvDefault,
        env="KUBETUNE_WARM_START_DIR",
        default=knownresults.MOUNT_ROOT,
        help="where the warm-start ConfigMaps are mounted, one directory per ConfigMap holding "
        f"{knownresults.KEY} (spec.warmStart.configMaps)",
    )
    flags.add_resync_period_flag(
        p, default=30.0, what="passes when nothing changes", deprecated_env="KUBETUNE_RESYNC"
    )
    flags.add_deprecated_alias(p, "--resync", "--resync-period")
    return p


def data_dir(path: str) -> Path | None:
    """The state directory; an unwritable one falls back to a temporary directory (logged)."""
    if not path:
        return None
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".write-test"
        probe.write_text("")
        probe.unlink()
        return directory
    except OSError as e:
        fallback = Path(tempfile.mkdtemp(prefix="kubetune-suggestion-"))
        log.warning("data dir %s is not writable (%s); state goes to %s", path, e, fallback)
        return fallback


def build(args: argparse.Namespace, bridged: bool = False) -> Controller:
    """The reconciler and its one-key controller, wired: every change of the Suggestion, its
    Experiment or the Experiment's Trials wakes the pass of the one Suggestion."""
    reconciler = reconciling.Reconciler(
        args.algorithm,
        data_dir(args.data_dir),
        max_bytes=int(args.max_suggestion_bytes),
        keep_named=int(args.kept_trial_names),
        resync=float(args.resync_period),
        bridge=_bridge(args, bridged) if bridged or args.early_stopping_endpoint else None,
        warm_start_dir=Path(args.warm_start_dir),
    )
    key = Key(args.namespace, args.suggestion)

    def the_key(obj: object) -> list[Key]:
        return [key]

    controller = Controller(
        SERVICE,
        reconciler.reconcile,
        namespace=args.namespace,
        queue=WorkQueue(Backoff(base=0.5, cap=30.0)),  # a failed pass: 0.5 s, doubling to 30 s
    )
    controller.watch(SUGGESTIONS, the_key, namespace=args.namespace)
    # A pass reads the Experiment's spec only (its status changes with every Trial) and of a
    # Trial its name (creations and deletions always pass), spec, conditions and observation.
    controller.watch(EXPERIMENTS, the_key, namespace=args.namespace, predicate=EXPERIMENT_READ)
    controller.watch(
        TRIALS,
        the_key,
        namespace=args.namespace,
        label_selector=syncing.trial_selector(args.suggestion),
        predicate=TRIAL_READ,
    )
    return controller


def _bridge(args: argparse.Namespace, bridged: bool) -> syncing.Bridging:
    from kubetune_suggestion_algorithm import bridge  # gRPC only where it is used

    if not bridged:  # kubetune's algorithm, a Katib early-stopping image beside it
        return bridge.Bridge("", args.early_stopping_endpoint)
    return bridge.from_args(args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    bridged = argv[:1] == ["bridge"]
    args = parser(bridged).parse_args(argv[1:] if bridged else argv)
    controller = build(args, bridged)
    # Pods sharing one network (the local cluster) all want 6789: its readiness is a file.
    return running.run([controller], args, probes_required=False)


if __name__ == "__main__":
    sys.exit(main())
