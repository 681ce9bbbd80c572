"""Build upstream Katib's Go binaries and take its manifests, from its pinned Go module.

kubetune is measured against, and taken over from, the real Katib: its controller, db-manager,
file metrics collector and goptuna suggestion are built from ``github.com/kubeflow/katib`` at a
pinned version with the module's own go.mod (``-mod=mod``; the module proxy serves its
dependencies), and its ``manifests/`` tree is copied out of the same module zip, which is
fetched through the module proxy only and checked against the pinned ``h1:`` sum. A stamp
(module, version, sum, Go version, binaries) makes later runs a no-op. All of it lives in
``<cache>/katib/<version>/`` (see ``gotool.cache_root``): ``bin/`` and ``manifests/``.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from localcluster import gotool
from localcluster.gotool import BuildError

MODULE = "github.com/kubeflow/katib"
VERSION = "v0.19.0"
SUM = "h1:uexj303nRkGtTFtTkY4McCt6J0TCtnerX3i3E7TRA5M="
# binary name -> main package inside the module
BINARIES = {
    "katib-controller": "./cmd/katib-controller/v1beta1",
    "katib-db-manager": "./cmd/db-manager/v1beta1",
    "file-metricscollector": "./cmd/metricscollector/v1beta1/file-metricscollector",
    "suggestion-goptuna": "./cmd/suggestion/goptuna/v1beta1",
}
# The standalone PostgreSQL install and what its kustomization references.
INSTALL = "manifests/v1beta1/installs/katib-standalone-postgres"
STAMP = ".katib-stamp.json"


def work_dir() -> Path:
    """``<cache>/katib/<version>/``: ``src/`` (the module), ``bin/``, ``manifests/``."""
    return gotool.cache_root("katib") / VERSION


def binary(name: str) -> Path:
    return work_dir() / "bin" / name


def install_dir() -> Path:
    """The ``katib-standalone-postgres`` kustomization in the cached manifests."""
    return work_dir() / INSTALL


def _expected(go_version: str) -> dict[str, object]:
    return {
        "module": MODULE,
        "version": VERSION,
        "sum": SUM,
        "go": go_version,
        "binaries": BINARIES,
    }


def _stamped_files() -> list[Path]:
    return [binary(n) for n in BINARIES] + [install_dir() / "kustomization.yaml"]


def is_built(go_version: str) -> bool:
    return gotool.stamp_matches(work_dir() / STAMP, _expected(go_version), _stamped_files())


def _progress(msg: str) -> None:
    gotool.progress("build-katib", msg)


def build(go: str | None = None, force: bool = False) -> Path:
    """Build (or reuse) the binaries and manifests; returns the work directory.

    One build at a time (an flock beside the work directory): a second caller waits and then
    finds it cached."""
    go = go or gotool.find_go()
    work = work_dir()
    work.parent.mkdir(parents=True, exist_ok=True)
    with gotool.one_at_a_time(
        work.parent / f".{VERSION}.lock", "build-katib", "another Katib build is running"
    ):
        return _build_locked(go, work, force)


def _build_locked(go: str, work: Path, force: bool) -> Path:
    go_version = gotool.go_version(go)
    if not force and is_built(go_version):
        _progress(f"katib {VERSION}: cached in {work}")
        return work
    started = time.monotonic()
    _progress(f"downloading {MODULE}@{VERSION} through the module proxy")
    info = gotool.download_pinned(go, MODULE, VERSION, SUM)
    src = work / "src"
    gotool.writable_copy(Path(info["Dir"]), src)
    manifests = work / "manifests"
    if manifests.exists():
        shutil.rmtree(manifests)
    shutil.copytree(src / "manifests", manifests)
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    env = gotool.go_env(proxy_only_=True)
    for name, package in BINARIES.items():
        _progress(f"go build {package} -> bin/{name}")
        gotool.go_build(go, src, str(bin_dir / name), [package], env=env)
    (work / STAMP).write_text(json.dumps(_expected(go_version)))
    _progress(f"katib {VERSION}: done in {time.monotonic() - started:.0f} s")
    return work


def main(force: bool = False) -> int:
    """``localcluster build-katib``."""
    try:
        work = build(force=force)
    except BuildError as exc:
        print(f"[localcluster build-katib] FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"[localcluster build-katib] binaries in {work / 'bin'}, manifests in {install_dir()}")
    return 0
