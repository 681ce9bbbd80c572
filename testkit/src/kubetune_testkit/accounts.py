"""Rights in the test cluster: a ServiceAccount's token and kubeconfig, role bindings, the
repository's ClusterRoles."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from kubetune import errors
from kubetune.kube import CLUSTER_ROLES, ROLE_BINDINGS, Kube
from kubetune_testkit.objects import create_if_absent


def service_account_token(
    cluster: Any, account: str, namespace: str, duration: str = "1h", *bound: str
) -> str:
    """A token of `account` from the TokenRequest API (`kubectl create token`)."""
    args = ["create", "token", account, "-n", namespace, f"--duration={duration}", *bound]
    return str(cluster.kubectl(*args).stdout.strip())


def token_kubeconfig(kubeconfig: str, token: str, dest: Path) -> str:
    """A copy of `kubeconfig` whose every context uses `token` (and nothing else) as its user."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    config["users"] = [{"name": "token", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "token"
    dest.write_text(yaml.safe_dump(config))
    return str(dest)


def bind_role(
    kube: Kube,
    namespace: str,
    name: str,
    role: tuple[str, str],
    accounts: tuple[str, ...] = ("default",),
) -> None:
    """A RoleBinding `name` in `namespace` of `role` (kind, name) to these ServiceAccounts."""
    kind, role_name = role
    kube.create(
        ROLE_BINDINGS,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name},
            "subjects": [
                {"kind": "ServiceAccount", "name": account, "namespace": namespace}
                for account in accounts
            ],
        },
        namespace,
    )


@contextlib.contextmanager
def cluster_role(kube: Kube, path: Path) -> Iterator[None]:
    """The ClusterRole of a manifest of this repository, created unless present and removed at
    the end only if created here (another package's session may share it)."""
    role = yaml.safe_load(path.read_text())
    name = role["metadata"]["name"]
    made = create_if_absent(kube, CLUSTER_ROLES, role)
    try:
        yield
    finally:
        if made:
            with contextlib.suppress(errors.NotFound):
                kube.delete(CLUSTER_ROLES, name)
