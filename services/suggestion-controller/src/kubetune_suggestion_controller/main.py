"""`suggestion-controller`: reconciles Suggestions, watches Experiments, Deployments."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kubetune import config, flags
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, Kube, connect
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


def build(kube: Kube, args: argparse.Namespace) -> list[Controller]:
    """The controller, its reconciler and its watches (wired here, never at import)."""
    reconciler = reconciling.Reconciler(kube=kube, config=config.load(args.config))
    controller = Controller("suggestion", reconciler.reconcile)
    namespace = args.watch_namespace or None
    controller.watch(SUGGESTIONS, namespace=namespace)
    controller.watch(EXPERIMENTS, namespace=namespace)  # same name and namespace as its Suggestion
    controller.watch(
        reconciling.DEPLOYMENTS,
        owner_keys("Suggestion", "kubeflow.org/v1beta1"),
        namespace=namespace,
        label_selector="katib.kubeflow.org/suggestion",
    )
    return [controller]


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        controllers = build(Kube(connect(args.kubeconfig)), args)
    except (OSError, config.ConfigError) as e:
        print(f"{SERVICE}: {e}", file=sys.stderr)
        return 2
    return running.run(controllers, args)


if __name__ == "__main__":
    sys.exit(main())
