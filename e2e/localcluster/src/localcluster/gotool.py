"""The Go toolchain every ``localcluster`` build uses: finding Go, its environment, the cache.

The control plane, the operators, the node's binaries and the third-party CRDs all come from
pinned Go modules fetched through the Go module proxy and built into one cache root
(``KUBETUNE_CACHE``, default ``~/.cache/kubetune``), each kind in its own directory there and
each build stamped (module, version, sum, Go version, what was built) so a later run is a
no-op. This module holds what they share, so none of them reaches into another's helpers.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

CACHE_ENV = "KUBETUNE_CACHE"
MIN_GO = (1, 24)
# Where the official tarball installs Go, often without being put on PATH.
FALLBACK_GO_PATHS = ["/usr/local/go/bin/go"]
DEFAULT_PROXY = "https://proxy.golang.org"


class BuildError(RuntimeError):
    """A build step failed; the message carries the tool's own error output."""


def cache_root(kind: str = "") -> Path:
    """``$KUBETUNE_CACHE/<kind>`` (CI points it at a persistent disk); default under XDG."""
    env = os.environ.get(CACHE_ENV)
    if env:
        root = Path(env)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = Path(xdg) / "kubetune"
    return root / kind if kind else root


def progress(tag: str, msg: str, *, stderr: bool = False) -> None:
    """One progress line, ``[localcluster <tag>] msg`` (stderr when stdout is for scripts)."""
    print(f"[localcluster {tag}] {msg}", file=sys.stderr if stderr else sys.stdout, flush=True)


def find_go() -> str:
    """Locate a Go >= 1.24 toolchain or fail with one clear message."""
    go = shutil.which("go") or next((p for p in FALLBACK_GO_PATHS if Path(p).exists()), None)
    hint = (
        "Go 1.24+ is required to build the local cluster's binaries: install Go 1.24 or newer "
        "(https://go.dev/dl/) and make sure `go` is on PATH."
    )
    if go is None:
        raise BuildError(hint)
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
    m = re.match(r"go(\d+)\.(\d+)", out.stdout.strip())
    if out.returncode != 0 or m is None or (int(m[1]), int(m[2])) < MIN_GO:
        raise BuildError(f"{hint} Found: {out.stdout.strip() or out.stderr.strip()}")
    return go


def proxy_only(goproxy: str | None) -> str:
    """GOPROXY without ``direct`` or ``off``: a miss must fail, never clone from a VCS host."""
    entries = [p for p in (goproxy or "").replace("|", ",").split(",") if p.strip()]
    kept = [p.strip() for p in entries if p.strip() not in ("direct", "off")]
    return ",".join(kept) or DEFAULT_PROXY


def go_env(*, cgo: bool = False, proxy_only_: bool = False) -> dict[str, str]:
    """The environment of every go command: module mode, this Go only, no cgo unless asked.

    ``proxy_only_`` also drops VCS fallback and private patterns that would bypass the proxy.
    """
    env = dict(os.environ)
    env.update(GOFLAGS="-mod=mod", CGO_ENABLED="1" if cgo else "0", GOTOOLCHAIN="local")
    if proxy_only_:
        env.update(GOPROXY=proxy_only(env.get("GOPROXY")), GONOPROXY="", GOPRIVATE="", GOWORK="off")
    return env


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run one go command; a failure raises BuildError with the tool's output."""
    proc = subprocess.run(
        cmd, cwd=cwd, env=env or go_env(), capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise BuildError(
            f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}{proc.stdout}"
        )
    return proc.stdout


def go_build(
    go: str,
    work: Path,
    out: str,
    packages: list[str],
    *,
    ldflags: str = "-s -w",
    tags: str = "",
    jobs: int | None = 2,
    env: dict[str, str] | None = None,
) -> str:
    """`go build` as every cached build here runs it: reproducible paths, no VCS stamp, stripped;
    `jobs` bounds the parallel compiles (two cores), `out` a file or a directory ending in /."""
    cmd = [go, "build", *(["-p", str(jobs)] if jobs else []), "-trimpath", "-buildvcs=false"]
    cmd += [f"-tags={tags}"] if tags else []
    return run([*cmd, "-ldflags", ldflags, "-o", out, *packages], work, env)


@contextlib.contextmanager
def one_at_a_time(lock_file: Path, tag: str, what: str) -> Iterator[None]:
    """Hold the build lock `lock_file` (an flock, so a killed build never leaves it taken): CI
    starts several builds of the same cache at once, and the later ones wait, then find it
    built instead of compiling it again."""
    with open(lock_file, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(tag, f"{what}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def writable_copy(module_dir: Path, dest: Path) -> None:
    """A writable copy of a module from the read-only module cache (to patch or build in)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(module_dir, dest)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)


def go_version(go: str) -> str:
    return run([go, "env", "GOVERSION"], Path.cwd()).strip()


def download(go: str, module: str, version: str, cwd: Path) -> dict[str, str]:
    """``go mod download -json module@version`` (the default proxy settings)."""
    out = run([go, "mod", "download", "-json", f"{module}@{version}"], cwd)
    info: dict[str, str] = json.loads(out)
    if info.get("Error"):
        raise BuildError(f"go mod download {module}@{version}: {info['Error']}")
    return info


def download_pinned(go: str, module: str, version: str, pinned_sum: str) -> dict[str, str]:
    """Download through the module proxy only and check the ``h1:`` sum against the pin."""
    key = f"{module}@{version}"
    env = go_env(proxy_only_=True)
    with tempfile.TemporaryDirectory(prefix="kubetune-gomod-") as cwd:
        proc = subprocess.run(
            [go, "mod", "download", "-json", key],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    try:
        info: dict[str, str] = json.loads(proc.stdout)
    except ValueError:
        info = {}
    if proc.returncode != 0 or info.get("Error") or not info.get("Zip"):
        raise BuildError(
            f"go mod download {key} (GOPROXY={env['GOPROXY']}) failed: "
            f"{info.get('Error') or proc.stderr.strip() or proc.stdout.strip()}"
        )
    if info.get("Sum") != pinned_sum:
        raise BuildError(
            f"{key}: the module proxy served sum {info.get('Sum')}, pinned {pinned_sum}; "
            "refusing it (fix the pin in localcluster after checking why)"
        )
    return info


def tools_go(packages: list[str]) -> str:
    """A ``tools.go`` that imports the packages to build, so ``go mod tidy`` keeps their deps."""
    imports = "\n".join(f'\t_ "{p}"' for p in packages)
    return f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"


def go_line(gomod: str) -> str:
    """The ``go`` directive of a go.mod (``go 1.24`` when it has none)."""
    return next((ln for ln in gomod.splitlines() if ln.startswith("go ")), "go 1.24")


def stamp_matches(stamp: Path, expected: Mapping[str, object], files: list[Path]) -> bool:
    """The stamp records exactly ``expected`` and every built file exists."""
    if not stamp.exists() or not all(f.exists() for f in files):
        return False
    try:
        return bool(json.loads(stamp.read_text()) == dict(expected))
    except ValueError:
        return False
