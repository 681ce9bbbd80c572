"""Deploy kubetune's `local` overlay on the test cluster and wait until it serves.

Shared by the end-to-end tests and the demo: apply the overlay server-side, wait for every
Deployment to become Available, and label a namespace for trial-pod injection.

Per cluster: every pod of the local cluster is a host process on the host's network, so the
overlay's fixed host ports (webhook 28443, probes 28081-28084 and 28086, db-manager 26789, UI
28480) and its hostPath prefix
(/tmp/katib/suggestions/) would be shared by two clusters on one machine: the second API server
would call the first cluster's webhook and the second webhook would die with EADDRINUSE. So the
overlay is rendered with free ports chosen for the cluster the first time it is deployed there
and the hostPath under the cluster's own state directory (`localcluster down` removes it); the
choice is kept in that directory, so deploying again changes nothing.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from kubetune_testkit.paths import REPO
from kubetune_testkit.processes import free_port

ROOT = REPO
OVERLAY = ROOT / "kustomize" / "overlays" / "local"
REAL_OVERLAY = ROOT / "kustomize" / "overlays" / "real"
"""What a real cluster runs: kubetune's own images, no host ports, the webhook behind its
Service."""
KUBETUNE_NAMESPACE = "kubeflow"
INJECTION_LABEL = "katib.kubeflow.org/metrics-collector-injection=enabled"


# What the overlay's files say; replaced per cluster by `render_overlay`.
DEFAULT_PORTS = {
    "webhook": 28443,
    "webhook-probes": 28084,
    "experiment-controller": 28081,
    "trial-controller": 28082,
    "suggestion-controller": 28083,
    "db-manager": 26789,
    "db-manager-probes": 28086,
    "ui": 28480,
}
DEFAULT_HOST_DIR = "/tmp/katib/suggestions/"
# Where the example image keeps the trainer; pods on the local cluster run host processes, so
# the shipped trial templates run this checkout's copy instead.
EXAMPLES_IN_IMAGE = "/opt/kubetune/examples/"
SETTINGS_FILE = "kubetune-local-overlay.json"


class Kubectl(Protocol):
    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> Any: ...


@dataclass(frozen=True)
class LocalSettings:
    """The host ports and the hostPath prefix of one cluster's deployment of the overlay."""

    ports: dict[str, int]
    host_dir: str


def state_dir_of(cluster: Kubectl) -> Path | None:
    """The local cluster's state directory; None for a cluster localcluster did not start."""
    state = getattr(cluster, "state", None)
    directory = getattr(state, "state_dir", None)
    return Path(directory) if directory else None


def _free_ports(count: int) -> list[int]:
    """`count` distinct ports free now (`processes.free_port`'s, outside the ephemeral range)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def local_settings(state_dir: Path | None) -> LocalSettings:
    """The cluster's settings: read from its state dir, else chosen now and saved there.

    Without a state dir (an existing cluster) the overlay's own values are used."""
    if state_dir is None:
        return LocalSettings(dict(DEFAULT_PORTS), DEFAULT_HOST_DIR)
    path = state_dir / SETTINGS_FILE
    saved = json.loads(path.read_text()) if path.exists() else {}
    ports = {k: int(v) for k, v in saved.get("ports", {}).items() if k in DEFAULT_PORTS}
    missing = [name for name in DEFAULT_PORTS if name not in ports]
    if not missing:
        return LocalSettings(ports, saved["host_dir"])
    # A new cluster, or one deployed before a service with a port of its own was added.
    ports.update(zip(missing, _free_ports(len(missing)), strict=True))
    host_dir = saved.get("host_dir") or f"{state_dir.resolve() / 'suggestions'}/"
    settings = LocalSettings(ports, host_dir)
    path.write_text(json.dumps(asdict(settings)))
    return settings


def local_port(cluster: Kubectl, name: str) -> int:
    """The host port a service of the local overlay listens on in this cluster (its
    `DEFAULT_PORTS` name), e.g. `db-manager` or `ui`."""
    return local_settings(state_dir_of(cluster)).ports[name]


def render_overlay(cluster: Kubectl, settings: LocalSettings) -> str:
    """`kubectl kustomize` of the overlay with the cluster's ports and hostPath prefix, and
    the example trainer of this checkout in the shipped trial templates."""
    out = cluster.kubectl("kustomize", str(OVERLAY), check=False)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {OVERLAY} failed:\n{out.stderr}")
    text = str(out.stdout)
    for name, default in DEFAULT_PORTS.items():
        text = re.sub(rf"(?<![0-9]){default}(?![0-9])", str(settings.ports[name]), text)
    text = text.replace(EXAMPLES_IN_IMAGE, f"{ROOT / 'examples'}/")
    return text.replace(DEFAULT_HOST_DIR, settings.host_dir)


def apply_overlay(cluster: Kubectl) -> LocalSettings:
    """Apply the overlay rendered for this cluster (server-side); returns what was chosen."""
    settings = local_settings(state_dir_of(cluster))
    manifest = render_overlay(cluster, settings)
    out = cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=manifest, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl apply of {OVERLAY} failed:\n{out.stderr}")
    return settings


def apply_real_overlay(cluster: Kubectl) -> None:
    """Apply REAL_OVERLAY as it stands (server-side); the images must be on the node."""
    out = cluster.kubectl("apply", "--server-side", "-k", str(REAL_OVERLAY), check=False)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl apply -k {REAL_OVERLAY} failed:\n{out.stderr}")


def wait_available(cluster: Kubectl, timeout: float = 240.0) -> None:
    """Every Deployment of kubetune Available, else an error naming the ones that are not."""
    deadline = time.monotonic() + timeout
    pending: list[str] = []
    while time.monotonic() < deadline:
        items = json.loads(
            cluster.kubectl("get", "deployments", "-n", KUBETUNE_NAMESPACE, "-o", "json").stdout
        )["items"]
        pending = [
            d["metadata"]["name"]
            for d in items
            if not any(
                c["type"] == "Available" and c["status"] == "True"
                for c in (d.get("status") or {}).get("conditions") or []
            )
        ]
        if items and not pending:
            return
        time.sleep(1)
    raise RuntimeError(f"Deployments not Available after {timeout:.0f}s: {', '.join(pending)}")


def enable_injection(cluster: Kubectl, namespace: str) -> None:
    cluster.kubectl("label", "namespace", namespace, INJECTION_LABEL, "--overwrite")


IMAGE_MAP_TEMPLATE = ROOT / "e2e" / "localcluster" / "images" / "kubetune.yaml"
VENV_BIN_PLACEHOLDER = "@VENV_BIN@"


def venv_bin() -> str:
    """The bin directory of the environment the tests (and so the services) run in."""
    return str(Path(sys.prefix) / "bin")


COLLECTOR_START_PLACEHOLDER = '"@COLLECTOR_START@"'


def bare_sys_path(bin_dir: str) -> list[str]:
    """What `site` would put on sys.path for the venv of `bin_dir`: its site-packages and the
    directories its .pth files name (editable installs), for an interpreter started with -S."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site_packages = Path(bin_dir).parent / "lib" / version / "site-packages"
    entries = [str(site_packages)]
    for pth in sorted(site_packages.glob("*.pth")):
        for line in pth.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "import ")) and Path(line).is_dir():
                entries.append(line)
    return entries


def collector_start(bin_dir: str) -> str:
    """The `python -I -S -c` code that starts the collector as its image's entrypoint does:
    the garbage collector off while the modules load (they make no cycles to collect; its
    passes cost 4 % of the start), `main.run` turns it on."""
    return (
        f"import gc; gc.disable(); import sys; sys.path += {bare_sys_path(bin_dir)!r}; "
        "from kubetune_pns_collector.main import run; run()"
    )


def render_image_map(template: Path = IMAGE_MAP_TEMPLATE, bin_dir: str | None = None) -> str:
    """The node agent's image map with the venv bin directory (and the collector's bare start
    from that venv) filled in."""
    bin_dir = bin_dir or venv_bin()
    text = template.read_text().replace(
        COLLECTOR_START_PLACEHOLDER, json.dumps(collector_start(bin_dir))
    )
    return text.replace(VENV_BIN_PLACEHOLDER, bin_dir)
