"""Assemble one service image's root filesystem from the build stage (stdlib only).

Runs inside the build stage of `images/Dockerfile` with Debian's python3. The final stage copies
the tree this writes onto an empty image, so the image holds exactly: the Python interpreter,
the standard library minus what no service uses, the service's virtualenv minus the installers
and what nothing imports, the shared libraries all of those load (found with `ldd`), and an
/etc/passwd naming the non-root user. No shell, package manager, compiler or cache.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.metadata
import importlib.util
import os
import py_compile
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

PYTHON = "python3.11"
STDLIB = Path("/usr/lib") / PYTHON
UID = 65532

# Standard-library parts no service imports: GUI, IDE, REPL line editing, terminal UIs, dbm,
# installers, 2to3, pydoc's topics, CPython's own test helpers.
STDLIB_DROP = (
    "idlelib",
    "tkinter",
    "turtle.py",
    "turtledemo",
    "lib2to3",
    "ensurepip",
    "venv",
    "pydoc_data",
    "curses",
    "dbm",
    "config-3.11-x86_64-linux-gnu",
    "__phello__",
    "test",
    "distutils",
)
DYNLOAD_DROP_PREFIXES = (
    "_tkinter",
    "readline",
    "_curses",
    "_dbm",
    "_gdbm",
    "nis",
    "_test",
    "_ctypes_test",
    "_xx",
    "xx",
)
# Only the services that import Optuna (the algorithm; the UI, for the importance) keep
# sqlite: Optuna's storages import it.
SQLITE = ("sqlite3", "_sqlite3")

# Installers are not run in the image.
INSTALLERS = ("pip", "setuptools", "wheel")
# Distributions the `kubernetes` package pulls in only for `kubernetes.aio`, its asyncio client
# (the largest part of the package); kubetune uses the synchronous client (kubetune.kube).
ASYNC_CLIENT = (
    "aiohttp",
    "aiohttp-retry",
    "aiosignal",
    "aiohappyeyeballs",
    "frozenlist",
    "multidict",
    "yarl",
    "propcache",
    "attrs",
)


def drop_distribution(site: Path, name: str) -> None:
    """Remove every file a distribution installed (its RECORD), then its empty directories."""
    found = [
        d
        for d in importlib.metadata.distributions(path=[str(site)])
        if (d.metadata["Name"] or "").lower().replace("_", "-") == name
    ]
    for dist in found:
        for file in dist.files or []:
            path = Path(str(dist.locate_file(file)))
            if path.is_file() or path.is_symlink():
                path.unlink()
        for directory in sorted({p for p in site.rglob("*") if p.is_dir()}, reverse=True):
            if not any(directory.iterdir()):
                directory.rmdir()


def copy_stdlib(root: Path, keep_sqlite: bool) -> None:
    target = root / STDLIB.relative_to("/")
    drop = set(STDLIB_DROP) | (set() if keep_sqlite else {"sqlite3"})

    def ignore(directory: str, names: list[str]) -> set[str]:
        ignored = {n for n in names if n == "__pycache__"}
        if Path(directory) == STDLIB:
            ignored |= drop & set(names)
        if Path(directory) == STDLIB / "lib-dynload":
            prefixes = DYNLOAD_DROP_PREFIXES + (() if keep_sqlite else ("_sqlite3",))
            ignored |= {n for n in names if n.startswith(prefixes)}
        return ignored

    shutil.copytree(STDLIB, target, ignore=ignore, symlinks=True)


def copy_venv(venv: Path, root: Path, prune_async_client: bool, in_image: Path) -> Path:
    """The virtualenv at `in_image` in the tree; made elsewhere (the host's docker-free build
    keeps one per service), its scripts' `#!` lines are moved there too."""
    target = root / in_image.relative_to("/")
    shutil.copytree(venv, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    if venv != in_image:
        relocate_scripts(target / "bin", venv, in_image)
    site = target / "lib" / PYTHON / "site-packages"
    for name in INSTALLERS:
        drop_distribution(site, name)
    for leftover in ("_distutils_hack", "distutils-precedence.pth", "pkg_resources"):
        path = site / leftover
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for script in ("activate", "activate.csh", "activate.fish", "Activate.ps1"):
        (target / "bin" / script).unlink(missing_ok=True)
    if prune_async_client:
        shutil.rmtree(site / "kubernetes" / "aio", ignore_errors=True)
        for name in ASYNC_CLIENT:
            drop_distribution(site, name)
    prune_development_files(site)
    for record in site.glob("*.dist-info/RECORD"):
        record.unlink()  # only uninstalling reads it
    return site


def relocate_scripts(bin_dir: Path, venv: Path, in_image: Path) -> None:
    """Point the console scripts' `#!` at the interpreter's place in the image."""
    old, new = f"#!{venv}/bin/".encode(), f"#!{in_image}/bin/".encode()
    for script in bin_dir.iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        if data.startswith(old):
            script.write_bytes(new + data[len(old) :])


def add_busybox(root: Path, busybox: Path) -> None:
    """A static busybox as /usr/bin/sh and its other applets: only for the example trainer,
    whose trial commands the collector's wrapper runs with `sh -c` (and mkdir, mv, head)."""
    listed = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True)
    bin_dir = root / "usr" / "bin"
    shutil.copy2(busybox, bin_dir / "busybox")
    for applet in listed.stdout.split():
        link = bin_dir / applet
        if applet != "busybox" and not link.exists() and not link.is_symlink():
            link.symlink_to("busybox")


# Inside a package: its own test suite (scipy's, numpy's and scikit-learn's are a third of
# their size) and what only a compiler or type checker reads.
TEST_DIRS = ("tests", "test")
DEV_SUFFIXES = (".pyx", ".pxd", ".pxi", ".h", ".hpp", ".c", ".cpp", ".pyi")


def prune_development_files(site: Path) -> None:
    for package in site.iterdir():
        if not package.is_dir() or package.name.endswith(".dist-info"):
            continue
        for path in sorted(package.rglob("*"), reverse=True):
            if path.is_dir() and path.name in TEST_DIRS:
                shutil.rmtree(path)
            elif path.is_file() and path.suffix in DEV_SUFFIXES:
                path.unlink()


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _copy_with_links(path: str, root: Path) -> None:
    """Copy a library the loader names, and the symlink it was named by, into `root`."""
    real = Path(os.path.realpath(path))
    dest = root / real.relative_to("/")
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(real, dest)
    named = Path(os.path.realpath(Path(path).parent)) / Path(path).name
    link = root / named.relative_to("/")
    if named != real and not link.exists() and not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(real, named.parent))


def copy_libraries(root: Path) -> list[str]:
    """Every shared library an ELF file in `root` needs, as the loader resolves it here."""
    needed: set[str] = set()
    elves = [p for p in root.rglob("*") if not p.is_symlink() and p.is_file() and _is_elf(p)]
    # Libraries a wheel bundles (scipy.libs/...) find each other through their loader's RPATH.
    bundled = {p.name for p in elves}
    for path in elves:
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if "=>" in parts:
                where = parts[parts.index("=>") + 1]
                if where == "not" and parts[0] in bundled:
                    continue
                if where == "not":
                    raise SystemExit(f"{path} needs {parts[0]}, which is not installed")
            elif parts and parts[0].startswith("/"):
                where = parts[0]
            else:
                continue
            # Libraries a wheel bundles (numpy.libs, ...) are in the tree already.
            if not where.startswith(str(root)):
                needed.add(where)
    # glibc loads libgcc_s itself when a thread is cancelled or unwinds.
    needed |= {str(p) for p in Path("/usr/lib/x86_64-linux-gnu").glob("libgcc_s.so.1")}
    for lib in sorted(needed):
        _copy_with_links(lib, root)
    return sorted(needed)


def write_users(root: Path) -> None:
    etc = root / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/sbin/nologin\n"
        f"kubetune:x:{UID}:{UID}:kubetune:/home/kubetune:/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\nkubetune:x:{UID}:\n")
    tmp = root / "tmp"
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o1777)


def compile_bytecode(root: Path, directories: list[Path], sourceless: bool) -> None:
    """Bytecode next to (or instead of) the sources: a read-only root never gets a cache.

    Hash-based and unchecked, so the interpreter neither stats sources nor tries to rewrite.
    `sourceless` keeps only `x.pyc` in place of `x.py` (tracebacks then give file and line
    without the source text), the collector's way to stay small.
    """
    for directory in directories:
        ok = compileall.compile_dir(
            directory,
            quiet=2,
            legacy=sourceless,
            ddir="/" + str(directory.relative_to(root)),
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            workers=0,
        )
        if not ok:
            raise SystemExit(f"byte-compiling {directory} failed")
        if sourceless:
            for source in directory.rglob("*.py"):
                if source.with_suffix(".pyc").exists():
                    source.unlink()


def _zip_members(site: Path, entry: Path) -> list[tuple[Path, str]] | None:
    """(file, name in the zip) of a package or module made only of Python, else None.

    zipimport reads `x.pyc` beside `x.py` (never __pycache__), so a source's cached bytecode
    goes in under that name; the source goes in too unless the tree is sourceless.
    """
    files = sorted(p for p in entry.rglob("*") if p.is_file()) if entry.is_dir() else [entry]
    if entry.is_dir() and not {"__init__.py", "__init__.pyc"} & {p.name for p in files}:
        return None  # namespace packages stay on disk
    members: list[tuple[Path, str]] = []
    for path in files:
        name = str(path.relative_to(site))
        if path.parent.name == "__pycache__":
            continue  # added with its source
        if path.suffix == ".py":
            members.append((path, name))
            cached = Path(importlib.util.cache_from_source(str(path)))
            if not cached.is_file():
                return None
            members.append((cached, name + "c"))
        elif path.suffix == ".pyc" or path.name == "py.typed":
            members.append((path, name))
        else:
            return None  # extension modules and data files are loaded or opened by path
    return members


def zip_pure_packages(root: Path, site: Path) -> list[str]:
    """Move the pure-Python packages into one deflated zip on `sys.path`.

    zipimport loads them from there (the `kubernetes` client shrinks from ~50 MB of source and
    bytecode to ~10 MB). Packages with anything else in them (extension modules, data files such
    as certifi's bundle) stay on disk.
    """
    archive = site.parent / "site-packages.zip"
    moved: list[str] = []
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for entry in sorted(site.iterdir()):
            if entry.name.endswith((".dist-info", ".pth")) or entry.name == "__pycache__":
                continue
            if entry.is_file() and entry.suffix not in (".py", ".pyc"):
                continue
            members = _zip_members(site, entry)
            if members is None:
                continue
            for path, name in members:
                z.write(path, name)
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
                Path(importlib.util.cache_from_source(str(entry))).unlink(missing_ok=True)
            moved.append(entry.name)
    (site / "zz-site-packages-zip.pth").write_text(f"/{archive.relative_to(root)}\n")
    return moved


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("root", type=Path, help="directory to fill (must not exist)")
    p.add_argument("--venv", type=Path, default=Path("/opt/kubetune"))
    p.add_argument(
        "--image-venv",
        type=Path,
        help="where the virtualenv is in the image (default: where --venv is)",
    )
    p.add_argument(
        "--busybox", type=Path, help="a static busybox to add as sh (the example trainer only)"
    )
    p.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="SOURCE=PATH",
        help="copy a file or directory into the image at PATH (the example trainer's scripts)",
    )
    p.add_argument("--keep-sqlite", action="store_true", help="keep sqlite3 (Optuna)")
    p.add_argument("--sourceless", action="store_true", help="only .pyc, no .py")
    p.add_argument("--zip", action="store_true", help="pure-Python packages in one zip")
    p.add_argument(
        "--keep-async-client",
        action="store_true",
        help="keep kubernetes.aio and aiohttp (no service uses them)",
    )
    p.add_argument(
        "--writable-dir",
        action="append",
        default=[],
        help="directory owned by the service user (a volume's mount point, e.g. /opt/katib/data)",
    )
    args = p.parse_args(argv)
    root: Path = args.root
    root.mkdir(parents=True)
    # Debian's merged /usr: the loader and libraries are named through /lib and /lib64.
    for name in ("bin", "lib", "lib64"):
        (root / "usr" / name).mkdir(parents=True, exist_ok=True)
        (root / name).symlink_to("usr/" + name)
    shutil.copy2(Path("/usr/bin") / PYTHON, root / "usr/bin" / PYTHON)
    (root / "usr/bin/python3").symlink_to(PYTHON)
    copy_stdlib(root, args.keep_sqlite)
    site = copy_venv(args.venv, root, not args.keep_async_client, args.image_venv or args.venv)
    if args.busybox:
        add_busybox(root, args.busybox)
    for spec in args.add:
        source, _, inner = spec.partition("=")
        if not inner.startswith("/"):
            p.error(f"--add {spec}: write SOURCE=PATH with an absolute PATH in the image")
        dest = root / inner.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if Path(source).is_dir():
            shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, dest)
    libraries = copy_libraries(root)
    write_users(root)
    # The standard library as bytecode only; the service's packages keep their sources
    # (tracebacks show the lines) unless the image is to be smallest.
    compile_bytecode(root, [root / STDLIB.relative_to("/")], sourceless=True)
    compile_bytecode(root, [site], sourceless=args.sourceless)
    if args.zip:
        zipped = zip_pure_packages(root, site)
        print(f"zipped: {' '.join(zipped)}", file=sys.stderr)
    for path in root.rglob("*"):
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(stat.S_IMODE(mode) & ~0o022)  # nothing writable by others
    (root / "tmp").chmod(0o1777)
    for directory in args.writable_dir:
        path = root / Path(directory).relative_to("/")
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, UID, UID)
    print(f"{root}: {len(libraries)} shared libraries: {' '.join(libraries)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
