"""Install upstream Katib from its own ``katib-standalone-postgres`` manifests on a local cluster.

The manifests (``localcluster build-katib``) are rendered with the cluster's kubectl
(``kubectl kustomize``) and applied with only what the node agent's shared host network needs:

- Katib's images run the built binaries (``image_map_entries``, given to ``up --image-map``);
  the controller's and db-manager's ``command: ./<binary>`` resolve through a ``workingDir``
  holding the binaries (a world-readable copy when the cache is not: they run as uid 1000);
- every fixed port a pod would bind on the host gets a free one: db-manager through its
  ``--listen-address`` flag and ``KATIB_DB_MANAGER_SERVICE_PORT`` (kubetune's db-manager or its
  forwarder may hold 6789), the controller's webhook, metrics and health ports through
  katib-config's ``init.controller``, PostgreSQL through ``PGPORT`` and db-manager's
  ``KATIB_POSTGRESQL_DB_PORT``; each Service's ports follow (no kube-proxy: a client dials the
  endpoint at the target port);
- ``postgres:14.5-alpine`` runs Debian's PostgreSQL (``localcluster.katibpostgres``), its PVC
  bound to a hostPath PersistentVolume in a temporary directory;
- katib-config's ``random`` runs ``suggestion-goptuna`` (goptuna implements random search; the
  Python hyperopt image is not built), and the UI Deployment is left out (not built);
- the goptuna image runs the module's suggestion service under a main that sets SO_REUSEPORT
  on 0.0.0.0:6789 (``katib.SHARED_PORT_MAIN``): Katib dials every suggestion at 6789, and
  kubetune's db-manager forwarder may hold that port on a loopback address of its own.

The controller provisions its own webhook certificate (cert-generator): ``install`` waits
until the webhooks' ``caBundle`` is set and every Deployment is Available. Not needed on a
real node, where each pod has its own network and the images exist.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from localcluster import build, gotool, katib, katibpostgres
from localcluster import cluster as lc
from localcluster.kubectlrun import Kubectl, pods_report

Obj = dict[str, Any]
NAMESPACE = "kubeflow"
IMAGE_PREFIX = "ghcr.io/kubeflow/katib/"
POSTGRES_IMAGE = "postgres:14.5-alpine"
GOPTUNA_IMAGE = f"{IMAGE_PREFIX}suggestion-goptuna:{katib.VERSION}"
# image (any tag) -> built binary
IMAGE_BINARIES = {
    "katib-controller": "katib-controller",
    "katib-db-manager": "katib-db-manager",
    "file-metrics-collector": "file-metricscollector",
    "suggestion-goptuna": katib.SHARED_PORT_GOPTUNA,
}
DEPLOYMENTS = ("katib-controller", "katib-db-manager", "katib-postgres")
WEBHOOKS = ("validatingwebhookconfiguration", "mutatingwebhookconfiguration")
LEFT_OUT = {("Deployment", "katib-ui")}


class InstallError(RuntimeError):
    """Katib could not be installed or did not become ready; the message says where to look."""


@dataclass(frozen=True)
class Ports:
    """The host ports Katib's pods bind (pods share the host network)."""

    webhook: int
    metrics: int
    healthz: int
    db_manager: int
    postgres: int

    @classmethod
    def free(cls) -> Ports:
        return cls(*(lc.free_port("0.0.0.0") for _ in range(5)))


@dataclass
class Installed:
    """What ``install`` set up: the ports, and the PostgreSQL data directory to remove later."""

    ports: Ports
    data_dir: Path
    objects: list[Obj] = field(default_factory=list)

    def cleanup(self) -> None:
        """Remove the database files (after the cluster is down)."""
        shutil.rmtree(self.data_dir, ignore_errors=True)


def _world_readable(path: Path) -> bool:
    """Every directory up to `path` lets other users through (uid 1000 must exec from it)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def runtime_bin_dir() -> Path:
    """Where the pods run the binaries from: the cache, or a world-readable copy of it."""
    cached = katib.work_dir() / "bin"
    if _world_readable(cached):
        return cached
    run = Path(tempfile.gettempdir()) / f"kubetune-katib-{katib.VERSION}-{os.getuid()}"
    run.mkdir(mode=0o755, exist_ok=True)
    os.chmod(run, 0o755)
    for name in set(IMAGE_BINARIES.values()):
        src, dst = cached / name, run / name
        if (
            not dst.exists()
            or dst.stat().st_size != src.stat().st_size
            or (dst.stat().st_mtime < src.stat().st_mtime)
        ):
            # A new file renamed over the old: a running pod may be executing the old one.
            tmp = run / f".{name}.{os.getpid()}"
            shutil.copy2(src, tmp)
            os.chmod(tmp, 0o755)
            os.replace(tmp, dst)
    return run


def image_map_entries(bin_dir: Path | None = None) -> list[Obj]:
    """Node-agent image-map entries: Katib's images run the built binaries, its postgres image
    Debian's PostgreSQL (``katib.build`` first)."""
    bins = bin_dir or runtime_bin_dir()
    entries: list[Obj] = [
        {"match": f"{IMAGE_PREFIX}{image}*", "entrypoint": [str(bins / binary)]}
        for image, binary in IMAGE_BINARIES.items()
    ]
    entries.append(
        {
            "match": POSTGRES_IMAGE,
            # The file itself (stdlib only): the container's environment has no PYTHONPATH.
            "entrypoint": [sys.executable, "-I", katibpostgres.__file__],
        }
    )
    return entries


def image_map_yaml(bin_dir: Path | None = None) -> str:
    """A whole image-map file with only Katib's entries."""
    return yaml.safe_dump({"images": image_map_entries(bin_dir)}, sort_keys=False)


def render(kubectl: str) -> list[Obj]:
    """The standalone-postgres install as upstream renders it (``kubectl kustomize``)."""
    proc = subprocess.run(
        [kubectl, "kustomize", str(katib.install_dir())],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise InstallError(f"kubectl kustomize {katib.install_dir()} failed:\n{proc.stderr}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def _container(obj: Obj) -> Obj:
    return dict(obj["spec"]["template"]["spec"]["containers"][0])


def _set_env(container: Obj, **values: str) -> None:
    env = [e for e in container.get("env") or [] if e["name"] not in values]
    container["env"] = env + [{"name": k, "value": v} for k, v in values.items()]


def _retarget(container: Obj, ports: dict[int, int]) -> None:
    for p in container.get("ports") or []:
        p["containerPort"] = ports.get(p["containerPort"], p["containerPort"])
    for probe in ("livenessProbe", "readinessProbe"):
        for handler in (container.get(probe) or {}).values():
            if isinstance(handler, dict) and handler.get("port") in ports:
                handler["port"] = ports[handler["port"]]


def _katib_config(text: str, ports: Ports) -> str:
    config = yaml.safe_load(text)
    controller = config.setdefault("init", {}).setdefault("controller", {})
    controller.update(
        webhookPort=ports.webhook,
        metricsAddr=f":{ports.metrics}",
        healthzAddr=f":{ports.healthz}",
    )
    for suggestion in config["runtime"]["suggestions"]:
        if suggestion["algorithmName"] == "random":
            suggestion["image"] = GOPTUNA_IMAGE
    return str(yaml.safe_dump(config, sort_keys=False))


def adjust(objs: list[Obj], ports: Ports, bin_dir: Path, data_dir: Path) -> list[Obj]:
    """Upstream's objects with the node agent's adjustments (see the module docstring)."""
    upstream = {8443: ports.webhook, 8080: ports.metrics, 18080: ports.healthz}
    db_port = {6789: ports.db_manager}
    pg_port = {5432: ports.postgres}
    out: list[Obj] = []
    for obj in objs:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if (kind, name) in LEFT_OUT:
            continue
        if kind == "ConfigMap" and name == "katib-config":
            obj["data"]["katib-config.yaml"] = _katib_config(
                obj["data"]["katib-config.yaml"], ports
            )
        elif kind == "Deployment" and name in DEPLOYMENTS:
            c = _container(obj)
            obj["spec"]["template"]["spec"]["containers"][0] = c
            if name == "katib-controller":
                c["workingDir"] = str(bin_dir)
                _retarget(c, upstream)
                _set_env(c, KATIB_DB_MANAGER_SERVICE_PORT=str(ports.db_manager))
            elif name == "katib-db-manager":
                c["workingDir"] = str(bin_dir)
                c["args"] = [f"--listen-address=0.0.0.0:{ports.db_manager}"]
                _retarget(c, db_port)
                _set_env(c, KATIB_POSTGRESQL_DB_PORT=str(ports.postgres))
            else:
                _retarget(c, pg_port)
                _set_env(c, PGPORT=str(ports.postgres))
        elif kind == "Service" and name in DEPLOYMENTS:
            mapping = {"katib-controller": upstream, "katib-db-manager": db_port}.get(name, pg_port)
            for p in obj["spec"]["ports"]:
                target = p.get("targetPort", p["port"])
                p["targetPort"] = mapping.get(target, target)
                if name != "katib-controller":
                    p["port"] = p["targetPort"]
        out.append(obj)
    out.append(_postgres_volume(data_dir))
    return out


def _postgres_volume(data_dir: Path) -> Obj:
    """A hostPath PersistentVolume bound to the install's ``katib-postgres`` claim."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "katib-postgres-localcluster"},
        "spec": {
            "capacity": {"storage": "3Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": str(data_dir), "type": "Directory"},
            "claimRef": {"namespace": NAMESPACE, "name": "katib-postgres"},
        },
    }


def install(
    kubectl: str, kubeconfig: str, *, ports: Ports | None = None, timeout: float = 420
) -> Installed:
    """Apply Katib (built first when needed) and wait until it serves."""
    katib.build()
    ports = ports or Ports.free()
    data_dir = Path(tempfile.mkdtemp(prefix="kubetune-katib-postgres-"))
    os.chmod(data_dir, 0o755)
    objs = adjust(render(kubectl), ports, runtime_bin_dir(), data_dir)
    k = Kubectl(kubectl, kubeconfig)
    # The webhook configurations last, once every Deployment has its pod: the kubeflow
    # namespace is labelled for Katib's pod mutator (failurePolicy Fail), so a Katib pod
    # created after them calls a webhook nothing serves yet and is refused again and again.
    # Applied at once, a loaded machine's ReplicaSet controller came after them (CI).
    hooks = [o for o in objs if o.get("kind", "").lower() in WEBHOOKS]
    rest = [o for o in objs if o.get("kind", "").lower() not in WEBHOOKS]
    out = k.run(
        "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(rest)
    )
    if out.returncode != 0:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise InstallError(f"kubectl apply of Katib failed:\n{out.stderr}")
    installed = Installed(ports, data_dir, objs)
    try:
        deadline = time.monotonic() + timeout
        _wait_for_pods(k, deadline)
        out = k.run(
            "apply", "--server-side", "--force-conflicts", "-f", "-",
            stdin=yaml.safe_dump_all(hooks),
        )  # fmt: skip
        if out.returncode != 0:
            raise InstallError(f"kubectl apply of Katib's webhooks failed:\n{out.stderr}")
        wait_ready(k, deadline)
    except InstallError as exc:
        # Whoever reads a CI log later sees what the pods did, not only that they did not.
        found = pods_report(k, NAMESPACE, log_lines=30)
        installed.cleanup()
        raise InstallError(f"{exc} (install timeout {timeout:.0f} s)\n{found}") from exc
    except BaseException:
        installed.cleanup()
        raise
    return installed


def _wait_for_pods(k: Kubectl, deadline: float) -> None:
    """Until each of Katib's Deployments has a pod (created, not yet running), or the
    ``time.monotonic()`` deadline."""
    while True:
        out = k.run("get", "pods", "-n", NAMESPACE, "-o", "json")
        pods = json.loads(out.stdout).get("items", []) if out.returncode == 0 else []
        names = [p["metadata"]["name"] for p in pods]
        missing = [d for d in DEPLOYMENTS if not any(n.startswith(f"{d}-") for n in names)]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise InstallError(f"no pod of {', '.join(missing)} in time")
        time.sleep(0.5)


def wait_ready(k: Kubectl, deadline: float) -> None:
    """Every Deployment Available and both webhooks carrying the controller's CA, by the
    ``time.monotonic()`` deadline."""
    for kind in WEBHOOKS:
        while True:
            out = k.run("get", kind, "katib.kubeflow.org", "-o", "json")
            hooks = json.loads(out.stdout).get("webhooks") or [] if out.returncode == 0 else []
            if hooks and all(h["clientConfig"].get("caBundle") for h in hooks):
                break
            if time.monotonic() > deadline:
                raise InstallError(
                    f"the {kind} katib.kubeflow.org has no caBundle in time: "
                    "the controller's cert-generator did not run; see "
                    f"`kubectl logs -n {NAMESPACE} deploy/katib-controller`"
                )
            time.sleep(0.5)
    # The node agent refreshes Secret volumes once a minute, and the rotator's check for the
    # mounted files backs off exponentially (1 s doubling, jittered): Available comes 1-4 minutes
    # after the caBundle.
    # (Restarting the pod instead deadlocks, as upstream would: the kubeflow namespace is
    # labelled for injection, so the new pod's creation calls the webhook it serves.)
    left = max(1, int(deadline - time.monotonic()))
    out = k.run(
        "wait", "-n", NAMESPACE, "--for=condition=Available", f"--timeout={left}s",
        *(f"deployment/{d}" for d in DEPLOYMENTS), timeout=left + 30,
    )  # fmt: skip
    if out.returncode != 0:
        raise InstallError(f"Katib's Deployments are not Available:\n{out.stderr}")


@contextlib.contextmanager
def running(
    state_dir: Path,
    extra_image_map: list[Obj] | None = None,
    *,
    timeout: float = 420,
    audit: bool = False,
) -> Iterator[tuple[lc.State, Installed]]:
    """A local cluster of its own with Katib installed, stopped and removed on exit.

    ``extra_image_map`` adds node-agent entries (kubetune's images, for a take-over);
    ``audit`` starts the API server with its audit log (``up --audit``)."""
    katib.build()
    state_dir.mkdir(parents=True, exist_ok=True)
    image_map = state_dir.parent / f"{state_dir.name}-image-map.yaml"
    entries = image_map_entries() + list(extra_image_map or [])
    image_map.write_text(yaml.safe_dump({"images": entries}, sort_keys=False))
    installed: Installed | None = None
    try:
        state = lc.up(
            state_dir,
            image_map=image_map,
            with_nodeagent=True,
            bind_to_parent=True,
            quiet=True,
            audit=audit,
        )
        installed = install(state.kubectl, state.kubeconfig, timeout=timeout)
        yield state, installed
    finally:
        lc.down(state_dir, quiet=True)
        image_map.unlink(missing_ok=True)
        if installed is not None:
            installed.cleanup()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--write-image-map",
        type=Path,
        default=None,
        metavar="FILE",
        help="only build and write the image map `localcluster up --image-map FILE` needs",
    )
    parser.add_argument("--timeout", type=float, default=420)


def main(args: argparse.Namespace) -> int:
    """``localcluster install-katib``: write the image map, or install on the running cluster."""
    try:
        katib.build()
        if args.write_image_map:
            args.write_image_map.write_text(image_map_yaml())
            print(f"[localcluster install-katib] wrote {args.write_image_map}")
            return 0
        state = lc.State.load(args.state_dir or lc.default_state_dir())
        if state is None:
            print(
                "[localcluster install-katib] no cluster runs: `localcluster up`", file=sys.stderr
            )
            return 3
        installed = install(
            state.kubectl or str(build.binaries().kubectl), state.kubeconfig, timeout=args.timeout
        )
    except (InstallError, gotool.BuildError) as exc:
        print(f"[localcluster install-katib] FAILED: {exc}", file=sys.stderr)
        return 1
    print(
        f"[localcluster install-katib] Katib {katib.VERSION} ready in namespace {NAMESPACE}; "
        f"db-manager port {installed.ports.db_manager}, PostgreSQL data {installed.data_dir}"
    )
    return 0
