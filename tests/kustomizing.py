"""Helpers of the manifest tests: where the kustomize trees are, and rendering them.

Rendering uses `kubectl kustomize` of the local control plane's kubectl (kustomize v5), never
the system kubectl, which is too old.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster import build

ROOT = Path(__file__).resolve().parents[1]
KUSTOMIZE = ROOT / "kustomize"
BASE = KUSTOMIZE / "base"
OVERLAYS = ("standalone", "kind", "local", "real")
SERVICES = ROOT / "services"
IMAGE_MAP = ROOT / "e2e" / "localcluster" / "images" / "kubetune.yaml"
IMAGE_REPO = "ghcr.io/kubetune/"

Obj = dict[str, Any]


def kubectl() -> str:
    """The kubectl built with the local cluster (a failure when it is not built yet: the tox
    env builds it before the tests, so a missing one is a broken setup, not a skip)."""
    path = build.binaries().kubectl
    if path.exists():
        return str(path)
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail(f"no kubectl: run `localcluster build` ({path})", pytrace=False)
    return found


def bases() -> list[Path]:
    """Every directory under kustomize/base that is a kustomization (one per piece)."""
    return sorted(p.parent for p in BASE.glob("*/kustomization.yaml"))


def overlays() -> list[Path]:
    return [KUSTOMIZE / "overlays" / name for name in OVERLAYS]


@functools.cache
def _kustomize(path: Path) -> tuple[int, str, str]:
    """One `kubectl kustomize` per tree and session (the files do not change under a test)."""
    out = subprocess.run(
        [kubectl(), "kustomize", str(path)], capture_output=True, text=True, check=False
    )
    return out.returncode, out.stdout, out.stderr


def render_text(path: Path) -> str:
    """`kubectl kustomize <path>`; fails the test with kustomize's own error message."""
    code, stdout, stderr = _kustomize(path)
    if code != 0:
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        pytest.fail(f"kubectl kustomize {shown} failed:\n{stderr}")
    return stdout


def render(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(render_text(path)) if d]


def of_kind(objs: list[Obj], *kinds: str) -> list[Obj]:
    return [o for o in objs if o.get("kind") in kinds]


def pod_spec(workload: Obj) -> Obj:
    spec: Obj = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: Obj) -> list[Obj]:
    spec = pod_spec(workload)
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def service_dirs() -> list[Path]:
    """Directories of the services (each has a pyproject.toml)."""
    return sorted(p.parent for p in SERVICES.glob("*/pyproject.toml"))


def console_scripts(service_dir: Path) -> dict[str, str]:
    """`[project.scripts]` of a service's pyproject.toml."""
    data = tomllib.loads((service_dir / "pyproject.toml").read_text())
    scripts: dict[str, str] = data.get("project", {}).get("scripts", {})
    return scripts


def image_service(image: str) -> str | None:
    """`ghcr.io/kubetune/<service>:tag` -> `<service>`; None for any other image."""
    if not image.startswith(IMAGE_REPO):
        return None
    return image[len(IMAGE_REPO) :].split("@")[0].split(":")[0]
