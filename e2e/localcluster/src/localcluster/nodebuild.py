"""Build the real node's binaries (``localcluster build-node``) into ``<cache>/node``.

A real node is kubelet and kube-proxy (the same wrapper module as the control plane, see
``build``), containerd with its runc shim and ``ctr``, runc, four CNI plugins and CoreDNS,
each from its pinned Go module fetched through the module proxy and checked against the
pinned ``h1:`` sum, plus the pod sandbox's pause binary compiled here (no registry can be
reached, so its image is made locally). Every build is stamped (module, version, sum, Go,
packages, tags), so a later run is a no-op.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from localcluster import build, gotool
from localcluster.gotool import BuildError

STAMP = ".node-stamp.json"
CONTAINERD_TAGS = "no_btrfs,no_devmapper,no_zfs"


@dataclass(frozen=True)
class GoBinaries:
    """Binaries built from one pinned module (``main_go``: a main package of our own)."""

    name: str
    module: str
    version: str
    sum: str
    packages: tuple[str, ...]
    binaries: tuple[str, ...]
    tags: str = ""
    cgo: bool = False
    ldflags: tuple[str, ...] = ()
    main_go: str = ""


CONTAINERD = GoBinaries(
    name="containerd",
    module="github.com/containerd/containerd/v2",
    version="v2.4.2",
    sum="h1:p6Qg+xbEz8lvwdhHDx0U469xENvp4LgGBx+E7djXkGw=",
    packages=("cmd/containerd", "cmd/containerd-shim-runc-v2", "cmd/ctr"),
    binaries=("containerd", "containerd-shim-runc-v2", "ctr"),
    tags=CONTAINERD_TAGS,
    ldflags=("-X github.com/containerd/containerd/v2/version.Version=v2.4.2",),
)
RUNC = GoBinaries(
    name="runc",
    module="github.com/opencontainers/runc",
    version="v1.5.3",
    sum="h1:y3GUIW7J0Gxd+tCFfWR6L1YDnhHiNR1BGRx1J50+VnA=",
    packages=("",),
    binaries=("runc",),
    tags="seccomp",
    cgo=True,
    # cgo links libseccomp (Debian libseccomp-dev, pkg-config: .ci/install-apt in `tox -e node`).
    ldflags=("-X main.version=1.5.3",),
)
CNI_PLUGINS = GoBinaries(
    name="cni-plugins",
    module="github.com/containernetworking/plugins",
    version="v1.10.0",
    sum="h1:4lwzpgsn5NdIneXrag/EEfKzhNSriJc1zTxZxfdfPLQ=",
    packages=(
        "plugins/main/bridge",
        "plugins/ipam/host-local",
        "plugins/main/loopback",
        "plugins/meta/portmap",
    ),
    binaries=("bridge", "host-local", "loopback", "portmap"),
)
# CoreDNS with only the plugins the cluster's Corefile uses: its full plugin set (cloud
# backends, etcd, ...) costs minutes of compile on two cores for code a test never runs.
COREDNS_PLUGINS = ("cache", "errors", "health", "kubernetes", "loadbalance", "log", "ready")
COREDNS = GoBinaries(
    name="coredns",
    module="github.com/coredns/coredns",
    version="v1.15.0",
    sum="h1:OBT+OEyHVdUiVxPhrNlC5XZVq3RkSxzQXfZQ76gm5ck=",
    packages=(".",),
    binaries=("coredns",),
    main_go=(
        "package main\n\nimport (\n"
        + "".join(f'\t_ "github.com/coredns/coredns/plugin/{p}"\n' for p in COREDNS_PLUGINS)
        + '\n\t"github.com/coredns/coredns/coremain"\n)\n\nfunc main() { coremain.Run() }\n'
    ),
)
GO_BUILDS = (CONTAINERD, RUNC, CNI_PLUGINS, COREDNS)

# The pod sandbox's process: sleeps until told to stop, and reaps the children it adopts as
# PID 1 of a pod that shares its PID namespace.
PAUSE_C = r"""
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }

int main(void) {
    signal(SIGINT, stop);
    signal(SIGTERM, stop);
    signal(SIGCHLD, reap);
    for (;;) pause();
}
"""


@dataclass(frozen=True)
class NodeBinaries:
    """Where every node binary is (built or not)."""

    paths: dict[str, Path]

    def __getitem__(self, name: str) -> Path:
        return self.paths[name]

    def missing(self) -> list[str]:
        return sorted(n for n, p in self.paths.items() if not p.exists())

    @property
    def cni_bin_dir(self) -> Path:
        return self.paths["bridge"].parent


def cache_root() -> Path:
    """``<cache>/node``: one directory per pinned module, ``pause-<hash>`` for pause."""
    return gotool.cache_root("node")


def work_dir(spec: GoBinaries) -> Path:
    return cache_root() / f"{spec.name}-{spec.version}"


def pause_dir() -> Path:
    return cache_root() / f"pause-{hashlib.sha256(PAUSE_C.encode()).hexdigest()[:12]}"


def binaries() -> NodeBinaries:
    k8s = build.binaries()
    paths = {c: k8s.path(c) for c in build.NODE_COMMANDS}
    for spec in GO_BUILDS:
        paths.update({b: work_dir(spec) / "bin" / b for b in spec.binaries})
    paths["pause"] = pause_dir() / "pause"
    return NodeBinaries(paths)


def _progress(msg: str) -> None:
    gotool.progress("build-node", msg)


def _expected(spec: GoBinaries, go_version: str) -> dict[str, object]:
    return {
        "module": spec.module,
        "version": spec.version,
        "sum": spec.sum,
        "go": go_version,
        "packages": list(spec.packages),
        "tags": spec.tags,
        "cgo": spec.cgo,
        "ldflags": list(spec.ldflags),
        "main": spec.main_go,
    }


def build_go(spec: GoBinaries, go: str, force: bool = False) -> Path:
    """Build (or reuse) one module's binaries in a wrapper module; returns the bin dir."""
    work = work_dir(spec)
    bin_dir = work / "bin"
    go_version = gotool.go_version(go)
    expected = _expected(spec, go_version)
    stamp = bin_dir / STAMP
    if not force and gotool.stamp_matches(stamp, expected, [bin_dir / b for b in spec.binaries]):
        _progress(f"{spec.name} {spec.version}: cached in {bin_dir}")
        return bin_dir
    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    _progress(f"{spec.module}@{spec.version}: go mod download (module proxy, pinned sum)")
    info = gotool.download_pinned(go, spec.module, spec.version, spec.sum)
    go_line = gotool.go_line(Path(info["GoMod"]).read_text())
    (work / "go.mod").write_text(
        f"module example.local/{spec.name}-bins\n\n{go_line}\n\n"
        f"require {spec.module} {spec.version}\n"
    )
    (work / "go.sum").unlink(missing_ok=True)
    if spec.main_go:
        (work / "main.go").write_text(spec.main_go)
        pkgs = ["."]
    else:
        pkgs = [f"{spec.module}/{p}" if p else spec.module for p in spec.packages]
        (work / "tools.go").write_text(gotool.tools_go(pkgs))
    env = gotool.go_env(cgo=spec.cgo, proxy_only_=True)
    _progress(f"{spec.name}: go mod tidy")
    gotool.run([go, "mod", "tidy"], work, env)
    bin_dir.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    _progress(f"{spec.name}: go build (minutes on a cold cache)")
    out = str(bin_dir / spec.binaries[0]) if spec.main_go else str(bin_dir) + "/"
    gotool.go_build(
        go,
        work,
        out,
        pkgs,
        ldflags=" ".join(["-s", "-w", *spec.ldflags]),
        tags=spec.tags,
        env=env,
    )
    stamp.write_text(json.dumps(expected))
    _progress(f"{spec.name}: done in {time.monotonic() - started:.0f} s")
    return bin_dir


def build_pause(force: bool = False) -> Path:
    """Compile the pause binary, static, with the C compiler (``cc``)."""
    target = pause_dir() / "pause"
    if target.exists() and not force:
        _progress(f"pause: cached in {target}")
        return target
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BuildError("a C compiler is needed for the pause binary: apt-get install gcc")
    target.parent.mkdir(parents=True, exist_ok=True)
    src = target.parent / "pause.c"
    src.write_text(PAUSE_C)
    tmp = target.with_suffix(".tmp")
    proc = subprocess.run(
        [cc, "-static", "-Os", "-s", "-o", str(tmp), str(src)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise BuildError(
            f"compiling pause failed (static glibc comes with libc6-dev): {proc.stderr}"
        )
    tmp.replace(target)
    _progress(f"pause: built {target}")
    return target


def build_all(force: bool = False) -> NodeBinaries:
    """Build (or reuse) every node binary, one build at a time per machine."""
    go = gotool.find_go()
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with gotool.one_at_a_time(root / ".build.lock", "build-node", "another node build is running"):
        build_pause(force=force)
        for spec in GO_BUILDS:
            build_go(spec, go, force=force)
        build.build_kubernetes(go, force=force, commands=build.NODE_COMMANDS)
    return binaries()


def main(force: bool = False) -> int:
    """``localcluster build-node``."""
    try:
        bins = build_all(force=force)
    except BuildError as exc:
        print(f"[localcluster build-node] FAILED: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"[localcluster build-node] binaries: {' '.join(str(p) for p in bins.paths.values())}")
    return 0
