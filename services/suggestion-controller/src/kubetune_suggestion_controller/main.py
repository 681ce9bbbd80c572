"""`suggestion-controller`: reconciles Suggestions, watches Experiments, Deployments."""

from __future__ import annotations

import argparse
import sys

from kubetune import config
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, Kube, connect
from kubetune.runtime import Controller, owner_keys, running
from kubetune_suggestion_controller import reconciling


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="suggestion-controller",
        description="Run the algorithm Deployment of every Suggestion and report its conditions.",
    )
    running.add_flags(p, "suggestion-controller")
    p.add_argument(
        "--config",
        action=running.EnvDefault,
        env="KUBETUNE_CONFIG",
        default=None,
        help="katib-config file (default: kubetune's built-in configuration)",
    )
    p.add_argument(
        "--watch-namespace",
        action=running.EnvDefault,
        env="KUBETUNE_WATCH_NAMESPACE",
        default=None,
        help="reconcile Suggestions of this namespace only (default: all namespaces)",
    )
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


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return running.run(build(Kube(connect(args.kubeconfig)), args), args)


if __name__ == "__main__":
    sys.exit(main())
