"""Build the control-plane binaries from Go modules into a per-version cache.

``k8s.io/kubernetes`` cannot be ``go install``-ed (its staging modules are required at
the fake version v0.0.0 and only resolved by replace lines in its own go.mod), so we
generate a wrapper module whose replace lines are derived from that release's go.mod.
etcd gets its own wrapper so minimal version selection cannot drag k8s's deps around.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

K8S_VERSION = "v1.35.4"
ETCD_VERSION = "v3.6.5"
K8S_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
BUILD_TAGS = "selinux,notest,grpcnotrace"
MIN_GO = (1, 24)
# Where the official tarball installs Go, often without being put on PATH.
FALLBACK_GO_PATHS = ["/usr/local/go/bin/go"]

_STAGING_RE = re.compile(
    r"^\s*(?:replace\s+)?k8s\.io/([\w.-]+)\s+=>\s+\./staging/src/k8s\.io/\1\s*$"
)


class BuildError(RuntimeError):
    """A build step failed; the message carries the tool's own error output."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the built binaries for one pinned release."""

    bin_dir: Path
    version: str

    def path(self, name: str) -> Path:
        return self.bin_dir / name

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"


def cache_root() -> Path:
    """Return the binary cache root (overridable so CI can point at a persistent disk)."""
    env = os.environ.get("KUBETUNE_K8S_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kubetune" / "k8s"


def binaries(version: str = K8S_VERSION) -> Binaries:
    return Binaries(bin_dir=cache_root() / version / "bin", version=version)


def _progress(msg: str) -> None:
    print(f"[localcluster build] {msg}", flush=True)


def find_go() -> str:
    """Locate a Go >= 1.24 toolchain or fail with one clear message."""
    go = shutil.which("go") or next((p for p in FALLBACK_GO_PATHS if Path(p).exists()), None)
    hint = (
        "Go 1.24+ is required to build the local control plane: install Go 1.24 or newer "
        "(https://go.dev/dl/) and make sure `go` is on PATH."
    )
    if go is None:
        raise BuildError(hint)
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
    m = re.match(r"go(\d+)\.(\d+)", out.stdout.strip())
    if out.returncode != 0 or m is None or (int(m[1]), int(m[2])) < MIN_GO:
        raise BuildError(f"{hint} Found: {out.stdout.strip() or out.stderr.strip()}")
    return go


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(GOFLAGS="-mod=mod", CGO_ENABLED="0", GOTOOLCHAIN="local")
    return env


def _run(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=_go_env(), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BuildError(
            f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}{proc.stdout}"
        )
    return proc.stdout


def _download(go: str, module: str, version: str, cwd: Path) -> dict[str, str]:
    out = _run([go, "mod", "download", "-json", f"{module}@{version}"], cwd)
    info: dict[str, str] = json.loads(out)
    if info.get("Error"):
        raise BuildError(f"go mod download {module}@{version}: {info['Error']}")
    return info


def staging_modules(gomod_text: str) -> list[str]:
    """Names of the staging modules a k8s release's go.mod maps to ./staging/src."""
    names = []
    for line in gomod_text.splitlines():
        m = _STAGING_RE.match(line)
        if m:
            names.append(m.group(1))
    return sorted(set(names))


def wrapper_gomod(version: str, release_gomod: str) -> str:
    """go.mod for the wrapper: require the release, pin each staging module to v0.N.M."""
    staging_version = "v0." + version.removeprefix("v1.")
    names = staging_modules(release_gomod)
    if not names:
        raise BuildError(f"no staging replace lines found in k8s.io/kubernetes@{version} go.mod")
    go_line = next((ln for ln in release_gomod.splitlines() if ln.startswith("go ")), "go 1.24")
    godebug = [ln for ln in release_gomod.splitlines() if ln.startswith("godebug ")]
    lines = [
        "module example.local/k8sbins",
        "",
        go_line,
        *godebug,
        "",
        f"require k8s.io/kubernetes {version}",
        "",
        "replace (",
    ]
    lines += [f"\tk8s.io/{n} => k8s.io/{n} {staging_version}" for n in names]
    lines += [")", ""]
    return "\n".join(lines)


def _tools_go(packages: list[str]) -> str:
    imports = "\n".join(f'\t_ "{p}"' for p in packages)
    return f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"


def _stamp_matches(stamp: Path, expected: dict[str, str], files: list[Path]) -> bool:
    if not stamp.exists() or not all(f.exists() for f in files):
        return False
    try:
        return bool(json.loads(stamp.read_text()) == expected)
    except ValueError:
        return False


def _ldflags(version: str, commit: str) -> str:
    major, minor = version.removeprefix("v").split(".")[:2]
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitCommit": commit,
        "gitTreeState": "clean",
        "buildDate": date,
    }
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.{k}={v}" for k, v in values.items()]
    return " ".join(flags)


def _origin_hash(info_path: str) -> str:
    try:
        data = json.loads(Path(info_path).read_text())
    except (OSError, ValueError):
        return ""
    return str(data.get("Origin", {}).get("Hash", ""))


def build_kubernetes(go: str, version: str = K8S_VERSION, force: bool = False) -> Binaries:
    bins = binaries(version)
    work = bins.bin_dir.parent
    go_version = _run([go, "env", "GOVERSION"], Path.cwd()).strip()
    expected = {
        "version": version,
        "go": go_version,
        "tags": BUILD_TAGS,
        "commands": ",".join(K8S_COMMANDS),
    }
    stamp = bins.bin_dir / ".k8s-stamp.json"
    if not force and _stamp_matches(stamp, expected, [bins.path(c) for c in K8S_COMMANDS]):
        _progress(f"kubernetes {version}: cached in {bins.bin_dir}")
        return bins
    work.mkdir(parents=True, exist_ok=True)
    _progress(f"kubernetes {version}: reading the release go.mod")
    info = _download(go, "k8s.io/kubernetes", version, work)
    gomod = wrapper_gomod(version, Path(info["GoMod"]).read_text())
    n = len(staging_modules(Path(info["GoMod"]).read_text()))
    _progress(f"kubernetes {version}: wrapper module with {n} staging replace lines in {work}")
    (work / "go.mod").write_text(gomod)
    (work / "go.sum").unlink(missing_ok=True)
    pkgs = [f"k8s.io/kubernetes/cmd/{c}" for c in K8S_COMMANDS]
    (work / "tools.go").write_text(_tools_go(pkgs))
    _progress(f"kubernetes {version}: go mod tidy (downloads modules)")
    _run([go, "mod", "tidy"], work)
    bins.bin_dir.mkdir(parents=True, exist_ok=True)
    _progress(f"kubernetes {version}: go build {' '.join(K8S_COMMANDS)} (long on a cold cache)")
    _run(
        [
            go,
            "build",
            "-p",
            "2",
            "-trimpath",
            "-buildvcs=false",
            f"-tags={BUILD_TAGS}",
            "-ldflags",
            _ldflags(version, _origin_hash(info.get("Info", ""))),
            "-o",
            str(bins.bin_dir) + "/",
            *pkgs,
        ],
        work,
    )
    stamp.write_text(json.dumps(expected))
    _progress(f"kubernetes {version}: done")
    return bins


def build_etcd(
    go: str, k8s_version: str = K8S_VERSION, version: str = ETCD_VERSION, force: bool = False
) -> Path:
    bin_dir = binaries(k8s_version).bin_dir
    target = bin_dir / "etcd"
    work = cache_root() / f"etcd-{version}"
    go_version = _run([go, "env", "GOVERSION"], Path.cwd()).strip()
    expected = {"version": version, "go": go_version}
    stamp = bin_dir / ".etcd-stamp.json"
    if not force and _stamp_matches(stamp, expected, [target]):
        _progress(f"etcd {version}: cached in {target}")
        return target
    work.mkdir(parents=True, exist_ok=True)
    _progress(f"etcd {version}: wrapper module in {work}")
    info = _download(go, "go.etcd.io/etcd/server/v3", version, work)
    go_line = next(
        (ln for ln in Path(info["GoMod"]).read_text().splitlines() if ln.startswith("go ")),
        "go 1.24",
    )
    (work / "go.mod").write_text(
        f"module example.local/etcdbin\n\n{go_line}\n\n"
        f"require go.etcd.io/etcd/server/v3 {version}\n"
    )
    (work / "go.sum").unlink(missing_ok=True)
    (work / "tools.go").write_text(_tools_go(["go.etcd.io/etcd/server/v3"]))
    _progress(f"etcd {version}: go mod tidy")
    _run([go, "mod", "tidy"], work)
    bin_dir.mkdir(parents=True, exist_ok=True)
    _progress(f"etcd {version}: go build")
    _run(
        [
            go,
            "build",
            "-p",
            "2",
            "-trimpath",
            "-buildvcs=false",
            "-ldflags",
            "-s -w",
            "-o",
            str(target),
            "go.etcd.io/etcd/server/v3",
        ],
        work,
    )
    stamp.write_text(json.dumps(expected))
    _progress(f"etcd {version}: done")
    return target


def build_all(force: bool = False) -> Binaries:
    """Build (or reuse) etcd, the Kubernetes binaries and the operators' CRDs for tests.

    Raises BuildError with go's output.
    """
    from localcluster import thirdparty  # it imports this module: no cycle at import time

    go = find_go()
    _progress(f"using {go} ({_run([go, 'env', 'GOVERSION'], Path.cwd()).strip()})")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    # One build at a time: CI runs several tox envs at once, each starting with this build;
    # the others wait and then find everything cached instead of compiling it again.
    with open(root / ".build.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _progress("another build is running; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        thirdparty.fetch_all(go, force=force)
        build_etcd(go, force=force)
        return build_kubernetes(go, force=force)


def have_binaries(version: str = K8S_VERSION) -> bool:
    bins = binaries(version)
    return all(bins.path(n).exists() for n in (*K8S_COMMANDS, "etcd"))


def main(force: bool = False) -> int:
    try:
        bins = build_all(force=force)
    except BuildError as exc:
        print(f"[localcluster build] FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"[localcluster build] binaries in {bins.bin_dir}")
    return 0
