"""`webhook serve` as its own process on loopback, and its real configurations pointed at it.

The configurations are those of kustomize/base/webhook with the changes a test needs: the
clientConfig is `url: https://127.0.0.1:<port>/...` with the caBundle of a CA made by
`webhook certs`, and every webhook's namespaceSelector is narrowed to one namespace, so other
users of a shared cluster are never affected. Needs the webhook package installed.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubetune import errors
from kubetune.kube import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Kube,
    Resource,
)
from kubetune_testkit import builders
from kubetune_testkit.kubectl import apply
from kubetune_testkit.paths import BASE
from kubetune_testkit.processes import console_script, free_port
from kubetune_testkit.waiting import wait_for

WEBHOOK_BASE = BASE / "webhook"
FILES = {
    MUTATING_WEBHOOK_CONFIGURATIONS: "mutatingwebhookconfiguration.yaml",
    VALIDATING_WEBHOOK_CONFIGURATIONS: "validatingwebhookconfiguration.yaml",
}


@dataclass(frozen=True)
class Webhook:
    """A running webhook: where it serves, the CA that signed its certificate, its log."""

    url: str
    ca_pem: bytes
    log: Path


def clean_env(**settings: str) -> dict[str, str]:
    """This process's environment without any KUBETUNE_WEBHOOK_* setting or POD_NAMESPACE, plus
    `settings`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("KUBETUNE_WEBHOOK") and k != "POD_NAMESPACE"
    }
    return {**env, **settings}


@contextlib.contextmanager
def serving(
    kubeconfig: str,
    directory: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    address_space: int | None = None,
) -> Iterator[Webhook]:
    """`webhook serve` with a fresh CA and certificate (`webhook certs`), until the block ends;
    fails when it does not start, and when it does not exit 0 on SIGTERM. `address_space`
    caps its virtual memory (bytes), for tests where a regression would allocate without end."""
    from kubetune_webhook import certificates

    files = certificates.issue(directory, ["localhost"], ["127.0.0.1"])
    port = free_port()
    log = directory / "webhook.log"
    argv = [console_script("webhook"), "serve", "--address=127.0.0.1", f"--port={port}"]
    argv += [f"--cert-file={files.cert}", f"--key-file={files.key}", f"--kubeconfig={kubeconfig}"]
    preexec = None if address_space is None else _cap(address_space)
    with running([*argv, *extra], log, env=env, preexec_fn=preexec):
        yield Webhook(f"https://127.0.0.1:{port}", files.ca_cert.read_bytes(), log)


@contextlib.contextmanager
def running(
    argv: list[str],
    log: Path,
    *,
    env: dict[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    timeout: float | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A `webhook serve` process logging to `log`, once it serves admission, until the block
    ends; fails when it does not start, and when it does not exit 0 on SIGTERM."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env or clean_env(),
            preexec_fn=preexec_fn,
        )
    try:
        wait_for(
            f"webhook start ({log})",
            lambda: "serving admission" in log.read_text() or proc.poll() is not None,
            timeout=timeout,
            interval=0.3,
        )
        assert proc.poll() is None, log.read_text()
        yield proc
    finally:
        proc.terminate()
        try:
            code = proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0, f"webhook exited {code}\n{log.read_text()[-4000:]}"


def _cap(limit: int) -> Callable[[], None]:
    import resource as rlimits  # `resource` names the webhooks' resources in this module

    def cap() -> None:
        rlimits.setrlimit(rlimits.RLIMIT_AS, (limit, limit))

    return cap


def point_at(hook: dict[str, Any], webhook: Webhook, namespace: str) -> dict[str, Any]:
    """`hook` calling `webhook` by URL, for objects of `namespace` only."""
    path = hook["clientConfig"]["service"]["path"]
    hook["clientConfig"] = {
        "url": webhook.url + path,
        "caBundle": base64.b64encode(webhook.ca_pem).decode(),
    }
    selector = hook.setdefault("namespaceSelector", {})
    selector.setdefault("matchLabels", {})["kubernetes.io/metadata.name"] = namespace
    return hook


def base_configuration(resource: Resource) -> dict[str, Any]:
    """The kustomize base's mutating or validating configuration."""
    return dict(yaml.safe_load((WEBHOOK_BASE / FILES[resource]).read_text()))


def configurations(
    webhook: Webhook, namespace: str, name: str
) -> list[tuple[Resource, dict[str, Any]]]:
    """The kustomize configurations, named `name`, pointed at `webhook`, scoped to `namespace`."""
    out = []
    for resource in FILES:
        config = copy.deepcopy(base_configuration(resource))
        config["metadata"] = {"name": name, "labels": {"kubetune.test/webhook": "true"}}
        for hook in config["webhooks"]:
            point_at(hook, webhook, namespace)
        out.append((resource, config))
    return out


@contextlib.contextmanager
def registered(kube: Kube, configs: list[tuple[Resource, dict[str, Any]]]) -> Iterator[None]:
    """The configurations created until the block ends (then deleted)."""
    try:
        for resource, body in configs:
            kube.create(resource, body)
        yield
    finally:
        for resource, body in configs:
            with contextlib.suppress(errors.NotFound):
                kube.delete(resource, body["metadata"]["name"])


def wait_effective(cluster: Any, namespace: str) -> None:
    """The configuration reaches the admission plugin asynchronously: wait until a server-side
    dry run of an invalid Experiment in `namespace` is refused by the webhook."""
    probe = builders.experiment("probe", namespace, maxTrialCount=0)
    wait_for(
        "the webhook configuration to take effect",
        lambda: "must be greater than 0" in apply(cluster, probe, "--dry-run=server").stderr,
        interval=0.3,
    )
