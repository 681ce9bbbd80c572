"""Build the control-plane binaries from Go modules into a per-version cache.

``k8s.io/kubernetes`` cannot be ``go install``-ed (its staging modules are required at
the fake version v0.0.0 and only resolved by replace lines in its own go.mod), so we
generate a wrapper module whose replace lines are derived from that release's go.mod.
etcd gets its own wrapper so minimal version selection cannot drag k8s's deps around.
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from localcluster import gotool, thirdparty
from localcluster.gotool import BuildError

K8S_VERSION = "v1.35.4"
ETCD_VERSION = "v3.6.5"
# The release's h1: sum, checked against what the module proxy serves.
K8S_SUM = {"v1.35.4": "h1:o/8dBC/pHVpYoGV4OAIytAlNPZbdYVTXJHoYvXC4qzM="}
K8S_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
NODE_COMMANDS = ("kubelet", "kube-proxy")
BUILD_TAGS = "selinux,notest,grpcnotrace"

_STAGING_RE = re.compile(
    r"^\s*(?:replace\s+)?k8s\.io/([\w.-]+)\s+=>\s+\./staging/src/k8s\.io/\1\s*$"
)


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
    """``<cache>/k8s``: the control-plane binaries, one directory per release."""
    return gotool.cache_root("k8s")


def binaries(version: str = K8S_VERSION) -> Binaries:
    return Binaries(bin_dir=cache_root() / version / "bin", version=version)


def _progress(msg: str) -> None:
    gotool.progress("build", msg)


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
    go_line = gotool.go_line(release_gomod)
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


def build_kubernetes(
    go: str,
    version: str = K8S_VERSION,
    force: bool = False,
    commands: tuple[str, ...] = K8S_COMMANDS,
) -> Binaries:
    """Build (or reuse) ``commands`` of one release into its bin directory.

    The control plane (the default) and the node's kubelet and kube-proxy are two builds of
    the same wrapper module, each in its own work directory and under its own stamp, so
    building the node never invalidates the control plane that every test env needs.
    """
    bins = binaries(version)
    node = commands != K8S_COMMANDS
    work = bins.bin_dir.parent.with_name(f"{version}-node") if node else bins.bin_dir.parent
    expected = {
        "version": version,
        "go": gotool.go_version(go),
        "tags": BUILD_TAGS,
        "commands": ",".join(commands),
    }
    stamp = bins.bin_dir / (".k8s-node-stamp.json" if node else ".k8s-stamp.json")
    what = f"kubernetes {version} ({', '.join(commands)})"
    if not force and gotool.stamp_matches(stamp, expected, [bins.path(c) for c in commands]):
        _progress(f"{what}: cached in {bins.bin_dir}")
        return bins
    work.mkdir(parents=True, exist_ok=True)
    _progress(f"{what}: reading the release go.mod")
    info = gotool.download_pinned(go, "k8s.io/kubernetes", version, K8S_SUM[version])
    gomod = wrapper_gomod(version, Path(info["GoMod"]).read_text())
    n = len(staging_modules(Path(info["GoMod"]).read_text()))
    _progress(f"{what}: wrapper module with {n} staging replace lines in {work}")
    (work / "go.mod").write_text(gomod)
    (work / "go.sum").unlink(missing_ok=True)
    pkgs = [f"k8s.io/kubernetes/cmd/{c}" for c in commands]
    (work / "tools.go").write_text(gotool.tools_go(pkgs))
    _progress(f"{what}: go mod tidy (downloads modules)")
    gotool.run([go, "mod", "tidy"], work)
    bins.bin_dir.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    _progress(f"{what}: go build (long on a cold cache)")
    gotool.go_build(
        go,
        work,
        str(bins.bin_dir) + "/",
        pkgs,
        ldflags=_ldflags(version, _origin_hash(info.get("Info", ""))),
        tags=BUILD_TAGS,
    )
    stamp.write_text(json.dumps(expected))
    _progress(f"{what}: done")
    return bins


def build_etcd(
    go: str, k8s_version: str = K8S_VERSION, version: str = ETCD_VERSION, force: bool = False
) -> Path:
    bin_dir = binaries(k8s_version).bin_dir
    target = bin_dir / "etcd"
    work = cache_root() / f"etcd-{version}"
    go_version = gotool.go_version(go)
    expected = {"version": version, "go": go_version}
    stamp = bin_dir / ".etcd-stamp.json"
    if not force and gotool.stamp_matches(stamp, expected, [target]):
        _progress(f"etcd {version}: cached in {target}")
        return target
    work.mkdir(parents=True, exist_ok=True)
    _progress(f"etcd {version}: wrapper module in {work}")
    info = gotool.download(go, "go.etcd.io/etcd/server/v3", version, work)
    go_line = gotool.go_line(Path(info["GoMod"]).read_text())
    (work / "go.mod").write_text(
        f"module example.local/etcdbin\n\n{go_line}\n\n"
        f"require go.etcd.io/etcd/server/v3 {version}\n"
    )
    (work / "go.sum").unlink(missing_ok=True)
    (work / "tools.go").write_text(gotool.tools_go(["go.etcd.io/etcd/server/v3"]))
    _progress(f"etcd {version}: go mod tidy")
    gotool.run([go, "mod", "tidy"], work)
    bin_dir.mkdir(parents=True, exist_ok=True)
    _progress(f"etcd {version}: go build")
    gotool.go_build(go, work, str(target), ["go.etcd.io/etcd/server/v3"])
    stamp.write_text(json.dumps(expected))
    _progress(f"etcd {version}: done")
    return target


def build_all(force: bool = False) -> Binaries:
    """Build (or reuse) etcd, the Kubernetes binaries and the operators' CRDs for tests.

    Raises BuildError with go's output.
    """
    go = gotool.find_go()
    _progress(f"using {go} ({gotool.go_version(go)})")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    # One build at a time: CI runs several tox envs at once, each starting with this build;
    # the others wait and then find everything cached instead of compiling it again.
    with gotool.one_at_a_time(root / ".build.lock", "build", "another build is running"):
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
