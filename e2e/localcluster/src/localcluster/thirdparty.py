"""The third-party operators' CRDs (TFJob, PyTorchJob, Argo Workflow) for tests, from Go modules.

Tests install the real schemas users have, and must not read files from outside the
repository; the operators publish their CRDs inside their own Go modules, so we take them from
the module zips that ``go mod download`` fetches through the Go module proxy (checksummed by
the Go toolchain, and here also against pinned ``h1:`` sums), and keep them in a
version-stamped cache beside the Kubernetes binaries.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from localcluster import gotool
from localcluster.gotool import BuildError


@dataclass(frozen=True)
class Module:
    """One pinned Go module and the CRD files (paths inside the module) we take from it."""

    path: str
    version: str
    sum: str
    files: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.path}@{self.version}"


TRAINING_OPERATOR = Module(
    path="github.com/kubeflow/training-operator",
    version="v1.9.2",
    sum="h1:w5McwkEb7J5QFRo8b8zR9DrgyLHNU2u03Srr9eyLJtc=",
    files=(
        "manifests/base/crds/kubeflow.org_tfjobs.yaml",
        "manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
        # For running the real operator in e2e tests (localcluster.operators builds it).
        "manifests/base/webhook/manifests.yaml",
        "manifests/base/rbac/role.yaml",
    ),
)
ARGO_WORKFLOWS = Module(
    path="github.com/argoproj/argo-workflows/v3",
    version="v3.7.9",
    sum="h1:h3KPCzhFX04EuzFaLe7w7INB0JMA95S42N55hDZ49lE=",
    files=(
        "manifests/base/crds/minimal/argoproj.io_workflows.yaml",
        # For running the real controller in e2e tests (localcluster.operators builds it).
        "manifests/base/crds/minimal/argoproj.io_workflowtemplates.yaml",
        "manifests/base/crds/minimal/argoproj.io_clusterworkflowtemplates.yaml",
        "manifests/base/crds/minimal/argoproj.io_cronworkflows.yaml",
        "manifests/base/crds/minimal/argoproj.io_workflowtaskresults.yaml",
        "manifests/base/crds/minimal/argoproj.io_workflowtasksets.yaml",
        "manifests/base/crds/minimal/argoproj.io_workflowartifactgctasks.yaml",
        "manifests/base/crds/minimal/argoproj.io_workfloweventbindings.yaml",
        "manifests/cluster-install-no-crds/workflow-controller-rbac/"
        "workflow-controller-clusterrole.yaml",
        "manifests/quick-start/base/executor/emissary/executor-role.yaml",
    ),
)
MODULES = (TRAINING_OPERATOR, ARGO_WORKFLOWS)
STAMP = ".thirdparty-stamp.json"


def cache_root() -> Path:
    """``<cache>/thirdparty-crds``: one directory per pinned module."""
    return gotool.cache_root("thirdparty-crds")


def module_dir(module: Module) -> Path:
    """Where one module's CRDs are cached: ``<root>/<module path>@<version>/``."""
    return cache_root() / module.key


def _progress(msg: str) -> None:
    # stderr: stdout of `localcluster thirdparty-crds` is the list of paths, for scripts.
    gotool.progress("build", msg, stderr=True)


def _by_filename() -> dict[str, Module]:
    return {Path(f).name: m for m in MODULES for f in m.files}


def _expected_stamp(module: Module) -> dict[str, object]:
    return {"module": module.path, "version": module.version, "sum": module.sum}


def is_cached(module: Module) -> bool:
    """True when the module's CRDs are in the cache under a stamp of this exact pin."""
    target = module_dir(module)
    stamp = target / STAMP
    if not stamp.exists() or not all((target / Path(f).name).exists() for f in module.files):
        return False
    try:
        return bool(json.loads(stamp.read_text()) == _expected_stamp(module))
    except ValueError:
        return False


def download(go: str, module: Module) -> dict[str, str]:
    """The module's zip through the module proxy only, checked against the pinned sum."""
    return gotool.download_pinned(go, module.path, module.version, module.sum)


def fetch(go: str, module: Module, force: bool = False) -> Path:
    """Copy the module's CRD files out of its zip into the cache; a no-op when stamped."""
    target = module_dir(module)
    if not force and is_cached(module):
        _progress(f"{module.key}: CRDs cached in {target}")
        return target
    _progress(f"{module.key}: go mod download (module proxy)")
    info = download(go, module)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Fill a sibling directory, then rename: concurrent sessions never see half a cache.
    staging = Path(tempfile.mkdtemp(prefix=".fetching-", dir=target.parent))
    staging.chmod(0o755)
    try:
        with zipfile.ZipFile(info["Zip"]) as zf:
            for inner in module.files:
                try:
                    data = zf.read(f"{module.key}/{inner}")
                except KeyError:
                    raise BuildError(
                        f"{module.key}: {inner} is not in the module zip {info['Zip']}"
                    ) from None
                (staging / Path(inner).name).write_bytes(data)
        (staging / STAMP).write_text(json.dumps(_expected_stamp(module)))
        if target.exists():
            shutil.rmtree(target)
        try:
            staging.rename(target)
        except OSError:
            if not is_cached(module):  # lost a race only if the winner left a good cache
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _progress(f"{module.key}: CRDs in {target}")
    return target


def fetch_all(go: str, force: bool = False) -> list[Path]:
    """Fetch (or reuse) every pinned module's CRDs; the build step of ``localcluster build``."""
    return [fetch(go, m, force=force) for m in MODULES]


def crd_path(filename: str) -> Path:
    """Path of a cached third-party CRD file (e.g. ``argoproj.io_workflows.yaml``).

    Fetches its module first when the cache lacks it; raises ``gotool.BuildError`` naming the
    fix when Go is missing or the module proxy cannot serve the pinned version.
    """
    module = _by_filename().get(filename)
    if module is None:
        raise ValueError(
            f"unknown third-party CRD file {filename!r}: known are "
            f"{', '.join(sorted(_by_filename()))} (add its module to localcluster/thirdparty.py)"
        )
    if not is_cached(module):
        fetch(gotool.find_go(), module)
    return module_dir(module) / filename
