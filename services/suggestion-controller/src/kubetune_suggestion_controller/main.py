"""`suggestion-controller`: runs every Suggestion's algorithm Deployment, keeps its conditions."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kubetune import config, flags, naming
from kubetune.kube import (
    EXPERIMENTS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    ROLE_BINDINGS,
    SERVICE_ACCOUNTS,
    SERVICES,
    SUGGESTIONS,
    Obj,
)
from kubetune.runtime import Controller, Key, changed_beyond, fields_changed, owner_keys, running
from kubetune_suggestion_controller import composing, reconciling

SERVICE = "suggestion-controller"
SUGGESTION_READ = changed_beyond(
    "metadata.resourceVersion",
    "metadata.managedFields",
    "metadata.generation",
    "spec.requests",
    "status.suggestions",
    "status.suggestionCount",
)
EXPERIMENT_READ = fields_changed("spec", "status.conditions")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=SERVICE,
        description="Run the algorithm Deployment of every Suggestion and report its conditions.",
    )
    running.add_flags(p, SERVICE)
    flags.add_config_flag(p)
    flags.add_watch_namespace_flag(p)
    flags.add_pod_namespace_flag(p)  # where the hostPath cleanup Pods run
    return p


def build(args: argparse.Namespace) -> Controller:
    """The reconciler and its controller, wired: Suggestions, their Experiments (same name and
    namespace) and the algorithm Deployments they own.

    Raises:
        OSError, config.ConfigError: the katib-config file cannot be read or is invalid.
    """
    reconciler = reconciling.Reconciler(config.load(args.config), args.pod_namespace)
    namespace = args.watch_namespace or None
    controller = Controller(SERVICE, reconciler.reconcile, namespace=namespace)
    # A pass reads neither the assignments nor the requests (the algorithm's and the
    # experiment-controller's writes, one or more per Trial) ...
    controller.watch(SUGGESTIONS, namespace=namespace, predicate=SUGGESTION_READ)
    # ... nor an Experiment's status beyond its conditions (its counts change with every Trial).
    controller.watch(EXPERIMENTS, namespace=namespace, predicate=EXPERIMENT_READ)
    controller.watch(
        reconciling.DEPLOYMENTS,
        owner_keys("Suggestion", "kubeflow.org/v1beta1"),
        namespace=namespace,
        label_selector="katib.kubeflow.org/suggestion",
    )
    watch_for_reads(controller, namespace)
    return controller


def _no_pass(obj: Obj) -> list[Key]:
    return []


def watch_for_reads(controller: Controller, namespace: str | None) -> None:
    """Caches of the other objects every pass reads (the Service, PVC and PV it owns, the
    namespace's algorithm ServiceAccount and RoleBinding), so a pass reads them without a GET.

    Their events start no pass (the Deployment's and the Suggestion's do, as before); an object
    not in a cache (not made yet, or another owner's without the labels) is still read by GET.
    """
    owned = naming.LABEL_SUGGESTION
    for res in (SERVICES, PERSISTENT_VOLUME_CLAIMS):
        controller.watch(res, _no_pass, namespace=namespace, label_selector=owned)
    controller.watch(PERSISTENT_VOLUMES, _no_pass, label_selector=owned)
    by_name = f"metadata.name={composing.ALGORITHM_SA}"
    for res in (SERVICE_ACCOUNTS, ROLE_BINDINGS):
        controller.watch(res, _no_pass, namespace=namespace, field_selector=by_name)


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
