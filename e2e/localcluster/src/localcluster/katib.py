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

import hashlib
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
# Katib's goptuna service, served by a main of ours that sets SO_REUSEPORT on 0.0.0.0:6789:
# upstream's main binds that address without it, so on a host network where kubetune's
# db-manager forwarder holds 6789 on a loopback address of its own (with SO_REUSEPORT) it
# cannot start. The suggestion service itself is the module's, unchanged.
SHARED_PORT_GOPTUNA = "suggestion-goptuna-shared-port"
SHARED_PORT_PACKAGE = "./cmd/localcluster/suggestion-goptuna-shared-port"
SHARED_PORT_MAIN = """\
// Katib's goptuna suggestion service on 0.0.0.0:6789 with SO_REUSEPORT (written by localcluster).
package main

import (
	"context"
	"net"
	"syscall"

	health "github.com/kubeflow/katib/pkg/apis/manager/health"
	api "github.com/kubeflow/katib/pkg/apis/manager/v1beta1"
	goptuna "github.com/kubeflow/katib/pkg/suggestion/v1beta1/goptuna"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
)

type serving struct{}

func (serving) Check(
	context.Context, *health.HealthCheckRequest,
) (*health.HealthCheckResponse, error) {
	return &health.HealthCheckResponse{Status: health.HealthCheckResponse_SERVING}, nil
}

func reusePort(_, _ string, conn syscall.RawConn) error {
	var err error
	if ctlErr := conn.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); ctlErr != nil {
		return ctlErr
	}
	return err
}

func main() {
	config := net.ListenConfig{Control: reusePort}
	listener, err := config.Listen(context.Background(), "tcp", "0.0.0.0:6789")
	if err != nil {
		klog.Fatalf("listen on 0.0.0.0:6789: %v", err)
	}
	server := grpc.NewServer()
	api.RegisterSuggestionServer(server, goptuna.NewSuggestionService())
	health.RegisterHealthServer(server, serving{})
	klog.Infof("goptuna suggestion service on %s (SO_REUSEPORT)", listener.Addr())
	if err := server.Serve(listener); err != nil {
		klog.Fatalf("serve: %v", err)
	}
}
"""
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
        SHARED_PORT_GOPTUNA: hashlib.sha256(SHARED_PORT_MAIN.encode()).hexdigest(),
    }


def _stamped_files() -> list[Path]:
    names = [*BINARIES, SHARED_PORT_GOPTUNA]
    return [binary(n) for n in names] + [install_dir() / "kustomization.yaml"]


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
    main = src / SHARED_PORT_PACKAGE / "main.go"
    main.parent.mkdir(parents=True)
    main.write_text(SHARED_PORT_MAIN)
    for name, package in [*BINARIES.items(), (SHARED_PORT_GOPTUNA, SHARED_PORT_PACKAGE)]:
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
