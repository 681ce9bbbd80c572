"""Installed size of each service's Python environment (what its image adds to the base).

Each service is pip-installed with its dependencies (and `shared/`, pinned by
constraints.txt) into an empty `--target` directory, and the bytes on disk are counted, with
the largest distributions listed. Then the parts no kubetune service imports are deleted (PRUNE:
the kubernetes client's asyncio copy `kubernetes/aio` and the aiohttp stack only it uses, which
kubernetes 37 drags in) and the service's `--help` is run from what is left, to prove it still
starts; the pruned size is what an image that deletes the same paths ships. The interpreter and
the base image are not counted (python:3.11-slim is about 130 MB, distroless python3 about
55 MB: documented, not measured, as there is no Docker engine here). Target: the collector's
environment under 60 MB after pruning (its image is pulled for every trial).

    python bench/install_sizes.py                       # every imaged service
    python bench/install_sizes.py pns-collector         # just one

Needs network or a warm pip cache. Exit code 1 when the collector misses its target.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVICES = (
    "pns-collector",
    "experiment-controller",
    "suggestion-controller",
    "suggestion-algorithm",
    "trial-controller",
    "webhook",
)
COLLECTOR_TARGET_BYTES = 60 * 1000 * 1000
MB = 1000 * 1000
# Installed but never imported by kubetune (kubetune.kube uses the synchronous client only).
PRUNE = (
    "kubernetes/aio",
    "aiohttp",
    "aiohttp_retry",
    "aiohappyeyeballs",
    "aiosignal",
    "frozenlist",
    "multidict",
    "yarl",
    "propcache",
    "attr",
    "attrs",
)


def _size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def install(service: str, target: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--disable-pip-version-check",
            "--target",
            str(target),
            "--constraint",
            str(ROOT / "constraints.txt"),
            str(ROOT / "shared"),
            str(ROOT / "services" / service),
        ],
        check=True,
    )


def _starts(service: str, site: Path) -> bool:
    """The console script runs `--help` from `site` alone (-I -S: no other site-packages)."""
    code = (
        "import importlib.metadata as md, sys\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        f"(ep,) = [e for e in md.entry_points(group='console_scripts') if e.name == {service!r}]\n"
        f"sys.argv = [{service!r}, '--help']\n"
        "ep.load()()\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=False
    )
    return out.returncode == 0 and "usage" in out.stdout


def measure(service: str) -> tuple[int, int, bool, list[tuple[str, int]]]:
    """(bytes installed, bytes after PRUNE, starts after PRUNE, largest entries after PRUNE)."""
    with tempfile.TemporaryDirectory(prefix=f"size-{service}-") as tmp:
        target = Path(tmp) / "site"
        install(service, target)
        raw = _size(target)
        for rel in PRUNE:
            shutil.rmtree(target / rel, ignore_errors=True)
        parts = [(p.name, _size(p) if p.is_dir() else p.stat().st_size) for p in target.iterdir()]
        parts = [(n, s) for n, s in parts if not n.endswith((".dist-info", ".egg-info"))]
        parts.sort(key=lambda item: -item[1])
        return raw, _size(target), _starts(service, target), parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("services", nargs="*", help=f"default: all of {', '.join(SERVICES)}")
    parser.add_argument("--top", type=int, default=6, help="largest entries listed per service")
    args = parser.parse_args(argv)
    unknown = set(args.services) - set(SERVICES)
    if unknown:
        parser.error(f"unknown service(s) {sorted(unknown)}; choose from {', '.join(SERVICES)}")
    missed = False
    print(f"{'service':<24}{'installed MB':>13}{'pruned MB':>11}{'starts':>8}  largest (MB)")
    for service in args.services or SERVICES:
        raw, pruned, starts, parts = measure(service)
        top = ", ".join(f"{n} {s / MB:.1f}" for n, s in parts[: args.top])
        ok = "yes" if starts else "NO"
        print(f"{service:<24}{raw / MB:>13.1f}{pruned / MB:>11.1f}{ok:>8}  {top}", flush=True)
        if not starts:
            missed = True
            print(f"  {service} does not start from its pruned environment")
        if service == "pns-collector" and pruned > COLLECTOR_TARGET_BYTES:
            missed = True
            print(f"  pns-collector misses its target of {COLLECTOR_TARGET_BYTES / MB:.0f} MB")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
