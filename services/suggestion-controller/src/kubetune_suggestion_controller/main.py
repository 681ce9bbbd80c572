"""`suggestion-controller`: runs every Suggestion's algorithm Deployment, keeps its conditions."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kubetune import config, flags
from kubetune.kube import EXPERIMENTS, SUGGESTIONS
from kubetune.runtime import Controller, owner_keys, running
from kubetune_suggestion_controller import reconciling

SERVICE = "suggestion-controller"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=SERVICE,
        description="Run the algorithm Deployment of every Suggestion and report its conditions.",
    )
    running.add_flags(p, SERVICE)
    flags.add_config_flag(p)
    flags.add_watch_namespace_flag(p)
    return p


def build(args: argparse.Namespace) -> Controller:
    """The reconciler and its controller, wired: Suggestions, their Experiments (same name and
    namespace) and the algorithm Deployments they own.

    Raises:
        OSError, config.ConfigError: the katib-config file cannot be read or is invalid.
    """
    reconciler = reconciling.Reconciler(config.load(args.config))
    namespace = args.watch_namespace or None
    controller = Controller(SERVICE, reconciler.reconcile, namespace=namespace)
    controller.watch(SUGGESTIONS, namespace=namespace)
    controller.watch(EXPERIMENTS, namespace=namespace)
    controller.watch(
        reconciling.DEPLOYMENTS,
        owner_keys("Suggestion", "kubeflow.org/v1beta1"),
        namespace=namespace,
        label_selector="katib.kubeflow.org/suggestion",
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
