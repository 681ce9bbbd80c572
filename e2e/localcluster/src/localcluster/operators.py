"""Build the real third-party operators (training-operator, Argo Workflows) into a cache.

End-to-end tests run kubetune against the operators users run, not stand-ins. Their
binaries come from the same pinned Go modules as their CRDs (``thirdparty``), fetched
through the Go module proxy only and checked against the pinned ``h1:`` sums, then built
in a wrapper module as ``localcluster build`` does for Kubernetes: the release's own
``replace`` lines are copied into the wrapper (a dependency's replace lines do not apply
to the module that requires it). A stamp (module, version, sum, Go version, packages)
makes later runs a no-op. They live in ``<cache>/operators`` (see ``gotool.cache_root``).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from localcluster import gotool, thirdparty
from localcluster.gotool import BuildError

STAMP = ".operator-stamp.json"
_REPLACE_RE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+\S+)?\s+=>\s+(\S+)\s+(v\S+)\s*$")


@dataclass(frozen=True)
class Operator:
    """One operator release: which packages to build and how to stamp them."""

    name: str
    module: thirdparty.Module
    packages: tuple[str, ...]
    ldflags: tuple[str, ...] = ()
    # Files the module zip lost (git symlinks are dropped from module zips): path -> the
    # file the symlink pointed to. When set, a writable copy of the module is used.
    restore: dict[str, str] = field(default_factory=dict)

    @property
    def binaries(self) -> tuple[str, ...]:
        return tuple(Path(p).name for p in self.packages)


TRAINING_OPERATOR = Operator(
    name="training-operator",
    module=thirdparty.TRAINING_OPERATOR,
    packages=("cmd/training-operator.v1",),
)
_ARGO_VERSION_PKG = "github.com/argoproj/argo-workflows/v3"
ARGO_WORKFLOWS = Operator(
    name="argo-workflows",
    module=thirdparty.ARGO_WORKFLOWS,
    packages=("cmd/workflow-controller", "cmd/argoexec"),
    ldflags=(
        f"-X {_ARGO_VERSION_PKG}.version={thirdparty.ARGO_WORKFLOWS.version}",
        f"-X {_ARGO_VERSION_PKG}.gitTag={thirdparty.ARGO_WORKFLOWS.version}",
        f"-X {_ARGO_VERSION_PKG}.gitTreeState=clean",
    ),
    restore={
        "workflow/executor/osspecific/signal_linux.go": (
            "workflow/executor/osspecific/signal_darwin.go"
        )
    },
)
OPERATORS = {op.name: op for op in (TRAINING_OPERATOR, ARGO_WORKFLOWS)}


def cache_root() -> Path:
    """``<cache>/operators``: one directory per operator release."""
    return gotool.cache_root("operators")


def work_dir(op: Operator) -> Path:
    """``<root>/<name>-<version>/`` holds the wrapper module; ``bin/`` the binaries."""
    return cache_root() / f"{op.name}-{op.module.version}"


def binary(op: Operator, name: str | None = None) -> Path:
    """Path of one built binary (the first package's by default)."""
    return work_dir(op) / "bin" / (name or op.binaries[0])


def _progress(msg: str) -> None:
    gotool.progress("build-operators", msg)


def _run(cmd: list[str], cwd: Path) -> str:
    return gotool.run(cmd, cwd, gotool.go_env(proxy_only_=True))


def _expected(op: Operator, go_version: str) -> dict[str, object]:
    return {
        "module": op.module.path,
        "version": op.module.version,
        "sum": op.module.sum,
        "go": go_version,
        "packages": list(op.packages),
        "ldflags": list(op.ldflags),
        "restore": op.restore,
    }


def is_built(op: Operator, go_version: str | None = None) -> bool:
    """The binaries exist under a stamp of this exact pin (and Go version, when given)."""
    bin_dir = work_dir(op) / "bin"
    stamp = bin_dir / STAMP
    if not stamp.exists() or not all((bin_dir / b).exists() for b in op.binaries):
        return False
    try:
        data = dict(json.loads(stamp.read_text()))
    except ValueError:
        return False
    expected = _expected(op, go_version or str(data.get("go")))
    return data == expected


def replace_lines(gomod: str) -> list[str]:
    """The release's module-to-module ``replace`` lines (local-path replaces are skipped)."""
    out: list[str] = []
    in_block = False
    for line in gomod.splitlines():
        s = line.strip()
        if s.startswith("replace ("):
            in_block = True
            continue
        if in_block and s == ")":
            in_block = False
            continue
        if not (in_block or s.startswith("replace ")):
            continue
        m = _REPLACE_RE.match(s)
        if m and not m.group(2).startswith((".", "/")):
            out.append(s.removeprefix("replace ").strip())
    return out


def wrapper_gomod(op: Operator, release_gomod: str, local_copy: bool) -> str:
    """go.mod of the wrapper: require the release, its replace lines, and the local copy."""
    go_line = gotool.go_line(release_gomod)
    replaces = replace_lines(release_gomod)
    if local_copy:
        replaces.append(f"{op.module.path} => ./src")
    lines = [
        f"module example.local/{op.name}-bins",
        "",
        go_line,
        "",
        f"require {op.module.path} {op.module.version}",
        "",
    ]
    if replaces:
        lines += ["replace (", *(f"\t{r}" for r in replaces), ")", ""]
    return "\n".join(lines)


def _copy_module(op: Operator, module_dir: Path, dest: Path) -> None:
    """A writable copy of the module with the files its zip lost restored."""
    gotool.writable_copy(module_dir, dest)
    for missing, original in op.restore.items():
        src, dst = dest / original, dest / missing
        if dst.exists():
            continue  # a later release ships it as a file: nothing to restore
        if not src.exists():
            raise BuildError(
                f"{op.module.key}: cannot restore {missing}: {original} is not in the module"
            )
        shutil.copyfile(src, dst)


def build_operator(op: Operator, go: str, force: bool = False) -> Path:
    """Build (or reuse) one operator; returns its bin directory.

    One build at a time per operator (a lock file beside its work directory): CI starts the
    build in the background early, and the e2e env's own `build-operators` then waits for it
    and finds it cached instead of compiling the same module into the same directory."""
    work = work_dir(op)
    work.parent.mkdir(parents=True, exist_ok=True)
    lock = work.parent / f".{work.name}.lock"
    with gotool.one_at_a_time(
        lock, "build-operators", f"{op.name}: another build of it is running"
    ):
        return _build_locked(op, go, work, force)


def _build_locked(op: Operator, go: str, work: Path, force: bool) -> Path:
    bin_dir = work / "bin"
    go_version = gotool.go_version(go)
    expected = _expected(op, go_version)
    if not force and is_built(op, go_version):
        _progress(f"{op.name} {op.module.version}: cached in {bin_dir}")
        return bin_dir
    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    _progress(f"{op.module.key}: go mod download (module proxy, pinned sum)")
    info = thirdparty.download(go, op.module)
    release_gomod = Path(info["GoMod"]).read_text()
    if op.restore:
        _progress(f"{op.name}: module copy with {', '.join(op.restore)} restored")
        _copy_module(op, Path(info["Dir"]), work / "src")
    (work / "go.mod").write_text(wrapper_gomod(op, release_gomod, bool(op.restore)))
    (work / "go.sum").unlink(missing_ok=True)
    pkgs = [f"{op.module.path}/{p}" for p in op.packages]
    (work / "tools.go").write_text(gotool.tools_go(pkgs))
    _progress(f"{op.name}: go mod tidy")
    _run([go, "mod", "tidy"], work)
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / STAMP).unlink(missing_ok=True)
    _progress(f"{op.name}: go build {' '.join(op.packages)} (minutes on a cold cache)")
    gotool.go_build(
        go,
        work,
        str(bin_dir) + "/",
        pkgs,
        ldflags=" ".join(["-s", "-w", *op.ldflags]),
        jobs=None,
        env=gotool.go_env(proxy_only_=True),
    )
    (bin_dir / STAMP).write_text(json.dumps(expected))
    _progress(f"{op.name}: done in {time.monotonic() - started:.0f} s")
    return bin_dir


def build_all(names: list[str] | None = None, force: bool = False) -> list[Path]:
    """Build the named operators (all by default)."""
    unknown = [n for n in names or [] if n not in OPERATORS]
    if unknown:
        raise BuildError(
            f"unknown operator(s) {', '.join(unknown)}: choose from {', '.join(OPERATORS)}"
        )
    go = gotool.find_go()
    return [build_operator(OPERATORS[n], go, force=force) for n in names or list(OPERATORS)]


def main(names: list[str] | None = None, force: bool = False) -> int:
    """``localcluster build-operators``."""
    try:
        dirs = build_all(names, force=force)
    except BuildError as exc:
        print(f"[localcluster build-operators] FAILED: {exc}", file=sys.stderr)
        return 1
    for d in dirs:
        print(f"[localcluster build-operators] binaries in {d}")
    return 0
