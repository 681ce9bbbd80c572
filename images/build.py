"""Build kubetune's service images locally: the Debian base, then one image per service.

`python3 images/build.py [--tag dev] [SERVICE ...]` (no registry is used, nothing is pushed):

1. Docker: uses the daemon `docker` reaches; if none runs and this is root, starts `dockerd`
   with the vfs storage driver and its data under ~/.cache/kubetune/docker (layers stay
   cached across runs; it keeps running, its pid in ~/.cache/kubetune/docker/dockerd.pid).
2. Base: `kubetune/base:bookworm`, made by `debootstrap --variant=minbase bookworm` and
   `docker import`; the root filesystem tarball is cached in ~/.cache/kubetune/images/.
3. Services: `images/Dockerfile --target <service>` on a context made here (the Dockerfile,
   assemble.py, constraints.txt, the service's requirements, the sources of `shared` and the
   service), tagged `kubetune/<service>:<tag>`. Prints each image's size.

Without docker (`--oci-dir DIR`; CI and the real node's e2e use it): on a Debian bookworm host
with Debian's python3.11 (what the build stage is), images/ocibuild.py runs the same build
context's steps here and writes DIR/<service>.tar, an OCI archive of
`docker.io/kubetune/<service>:<tag>` (what `kubetune/<service>:<tag>` means to a kubelet), for
`localcluster load`; cached by input hash in ~/.cache/kubetune/images/oci/. This path also
builds `examples`, the example trainer (examples/training) that trials on a real node run.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("KUBETUNE_CACHE", Path.home() / ".cache" / "kubetune"))
DOCKER_DATA = CACHE / "docker"
BASE_CACHE = CACHE / "images"
SUITE = "bookworm"
MIRROR = os.environ.get("KUBETUNE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_IMAGE = f"kubetune/base:{SUITE}"
REPOSITORY = "kubetune"
OCI_REGISTRY = "docker.io"  # what a bare `kubetune/<service>` names, to containerd too
BUILD_LABEL = "io.kubetune.images=build"  # on the base, so on every build-stage layer
SERVICE_LABEL = "io.kubetune.images=service"  # on the images (see images/Dockerfile)
_NAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Service:
    """How one service's image differs: its package directory and assemble.py flags."""

    name: str
    flags: tuple[str, ...] = ()
    # Not a package (the example trainer): these requirements, and no local sources.
    requirements: tuple[str, ...] | None = None

    @property
    def source(self) -> Path:
        return ROOT / "services" / self.name


SERVICES = {
    s.name: s
    for s in (
        Service("experiment-controller", ("--zip",)),
        Service("suggestion-controller", ("--zip",)),
        Service("trial-controller", ("--zip",)),
        Service("webhook", ("--zip",)),
        Service("db-manager", ("--zip",)),
        Service(
            "suggestion-algorithm",
            ("--zip", "--keep-sqlite", "--writable-dir", "/opt/katib/data"),
        ),
        # In every trial pod: no sources either, to stay smallest.
        Service("pns-collector", ("--zip", "--sourceless")),
        # plotly stays a directory (it ships plotly.js, which the UI serves); sqlite3 stays
        # because Optuna (the importance) imports its storages, sqlite's among them.
        Service("ui", ("--zip", "--keep-sqlite")),
    )
}
# Built by the docker-free path only (`--oci-dir`): examples/Dockerfile is the docker recipe.
# The trainer keeps its sources in place (it runs digits.py by path) and has a shell: the
# collector's wrapper runs trial commands with `sh -c` (the host's static busybox).
TRAINERS = {
    s.name: s
    for s in (
        Service(
            "examples",
            ("--busybox", "/bin/busybox", "--add", "training=/opt/kubetune/examples/training"),
            # kubeflow-katib: trials on the real node push with Katib's SDK (report_metrics).
            requirements=("numpy", "scikit-learn", "kubeflow-katib"),
        ),
    )
}


class BuildError(RuntimeError):
    """A step failed; the message says what to do."""


def _run(cmd: Sequence[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), text=True, capture_output=True, timeout=timeout)


def need_tool(tool: str, package: str, why: str) -> str:
    """The tool's path, else a `BuildError` naming the Debian package that has it."""
    path = shutil.which(tool)
    if path is None:
        raise BuildError(
            f"{tool} is not installed: install the {package} package "
            f"(apt-get install {package}; {why}); nothing was built"
        )
    return path


def docker_env() -> dict[str, str]:
    """Legacy builder: no BuildKit/buildx here, and the Dockerfile needs neither."""
    return {**os.environ, "DOCKER_BUILDKIT": "0"}


def _daemon_answers() -> bool:
    return _run(["docker", "info", "--format", "{{.ServerVersion}}"], timeout=30).returncode == 0


def ensure_docker(log: Path) -> None:
    """A docker daemon to talk to: the running one, else a vfs dockerd started here."""
    need_tool("docker", "docker.io", "the client and dockerd")
    if _daemon_answers():
        return
    if os.environ.get("DOCKER_HOST"):
        raise BuildError(f"no docker daemon answers at DOCKER_HOST={os.environ['DOCKER_HOST']}")
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise BuildError(
            "no docker daemon runs and dockerd is not installed: install the docker.io "
            "package (apt-get install docker.io), or start a daemon and set DOCKER_HOST"
        )
    if os.geteuid() != 0:
        raise BuildError("no docker daemon runs; starting dockerd needs root: start one yourself")
    DOCKER_DATA.mkdir(parents=True, exist_ok=True)
    print(f"starting dockerd (vfs, data in {DOCKER_DATA}, log {log})", file=sys.stderr)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [dockerd, "--storage-driver=vfs", f"--data-root={DOCKER_DATA}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives this command: later builds reuse it
        )
    (DOCKER_DATA / "dockerd.pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + 60
    while not _daemon_answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise BuildError(f"dockerd did not start (exit {proc.poll()}); see {log}")
        time.sleep(0.5)


def _image_exists(image: str) -> bool:
    return _run(["docker", "image", "inspect", image]).returncode == 0


def ensure_base(rebuild: bool = False) -> str:
    """`kubetune/base:bookworm`: imported from the cached tarball, made by debootstrap once."""
    label = _run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", BASE_IMAGE])
    if label.returncode == 0 and BUILD_LABEL.replace("=", '":"') in label.stdout and not rebuild:
        return BASE_IMAGE
    BASE_CACHE.mkdir(parents=True, exist_ok=True)
    tarball = BASE_CACHE / f"debian-{SUITE}-minbase.tar"
    if not tarball.exists() or rebuild:
        need_tool("debootstrap", "debootstrap", "it makes the Debian base image")
        if os.geteuid() != 0:
            raise BuildError("debootstrap needs root to make the base image")
        with tempfile.TemporaryDirectory(dir=BASE_CACHE, prefix="rootfs-") as tmp:
            print(f"debootstrap --variant=minbase {SUITE} ({MIRROR})", file=sys.stderr)
            done = _run(["debootstrap", "--variant=minbase", SUITE, tmp, MIRROR])
            if done.returncode != 0:
                raise BuildError(f"debootstrap failed:\n{done.stdout[-3000:]}{done.stderr}")
            partial = tarball.with_suffix(".partial")
            packed = _run(["tar", "--numeric-owner", "-C", tmp, "-cf", str(partial), "."])
            if packed.returncode != 0:
                raise BuildError(f"packing the base failed: {packed.stderr}")
            partial.replace(tarball)
    with tarball.open("rb") as f:
        done = subprocess.run(
            ["docker", "import", "--change", f"LABEL {BUILD_LABEL}", "-", BASE_IMAGE],
            stdin=f,
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise BuildError(f"docker import of {tarball} failed: {done.stderr}")
    return BASE_IMAGE


def requirements(project: Path) -> list[str]:
    """Third-party requirements of a package (versions come from constraints.txt)."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    local = {"kubetune", meta["name"]}
    reqs: list[str] = meta.get("dependencies", [])
    return [r for r in reqs if _name(r) not in local]


def _name(requirement: str) -> str:
    match = _NAME.match(requirement)
    return match.group() if match else requirement


def _source_filter(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    parts = Path(info.name).parts
    skip = {"tests", "__pycache__", ".pytest_cache", ".mypy_cache", ".hypothesis", "build"}
    if (
        skip & set(parts)
        or info.name.endswith((".pyc", ".egg-info"))
        or any(p.endswith(".egg-info") for p in parts)
    ):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0  # the same sources give the same layer
    return info


def _ca_bundle() -> bytes:
    """The CA bundle the host's pip trusts when set (a TLS-inspecting proxy), else nothing."""
    for var in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        path = os.environ.get(var)
        if path and Path(path).is_file():
            return Path(path).read_bytes()
    return b""


def dockerfile(target: str) -> str:
    """images/Dockerfile without the other services' final stages.

    The legacy builder (no BuildKit here) builds every stage before the target; with vfs each
    of their steps copies the whole image, minutes for the algorithm's.
    """
    text = (ROOT / "images" / "Dockerfile").read_text()
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if line.startswith("FROM runtime AS "):
            skipping = line.split()[-1] != target
        if not skipping:
            kept.append(line)
    if not any(line.startswith(f"FROM runtime AS {target}") for line in kept):
        raise BuildError(f"images/Dockerfile has no stage `FROM runtime AS {target}`")
    return "".join(kept)


def context(service: Service) -> bytes:
    """The build context of one service, as a tar stream for `docker build -`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add_bytes(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))

        add_bytes("Dockerfile", dockerfile(service.name).encode())
        # `COPY . /ctx/` takes the rest: a Dockerfile edit must not rebuild the build stage.
        add_bytes(".dockerignore", b"Dockerfile\n.dockerignore\n")
        add_bytes("assemble.py", (ROOT / "images" / "assemble.py").read_bytes())
        add_bytes("assemble-flags", " ".join(service.flags).encode())
        add_bytes("constraints.txt", (ROOT / "constraints.txt").read_bytes())
        if service.requirements is None:
            reqs = requirements(ROOT / "shared") + requirements(service.source)
        else:
            reqs = list(service.requirements)
        add_bytes("requirements.txt", "".join(f"{r}\n" for r in reqs).encode())
        add_bytes("ca.pem", _ca_bundle())
        if service.requirements is None:
            tar.add(ROOT / "shared", "src/shared", filter=_source_filter)
            tar.add(service.source, f"src/{service.name}", filter=_source_filter)
        else:
            training = ROOT / service.name / "training"
            tar.add(training, "training", filter=_source_filter)
    return buf.getvalue()


def image_size(image: str) -> int:
    out = _run(["docker", "image", "inspect", "--format", "{{.Size}}", image])
    return int(out.stdout.strip()) if out.returncode == 0 else 0


def build_service(service: Service, tag: str, log: Path, *, base: str) -> str:
    """Build the service's build stage (tagged, so its layers stay as the cache and older
    ones can be pruned), then its image."""
    image = f"{REPOSITORY}/{service.name}:{tag}"
    data = context(service)
    with log.open("w") as out:
        for target, name in (("build", f"{image}-build"), (service.name, image)):
            cmd = ["docker", "build", "--target", target, "--tag", name]
            cmd += ["--build-arg", f"BASE={base}", "-"]
            done = subprocess.run(
                cmd, input=data, stdout=out, stderr=subprocess.STDOUT, env=docker_env()
            )
            if done.returncode != 0:
                tail = log.read_text(errors="replace")[-4000:]
                raise BuildError(f"building {name} failed (log {log}):\n{tail}")
    prune_stale_build_layers()
    return image


def prune_stale_build_layers() -> None:
    """Remove earlier builds' images and layers, now untagged (with vfs each is a full copy)."""
    for label in (BUILD_LABEL, SERVICE_LABEL):
        _run(["docker", "image", "prune", "--force", "--filter", f"label={label}"], 600)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="images/build.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument(
        "services", nargs="*", metavar="SERVICE", help=f"default: all of {', '.join(SERVICES)}"
    )
    p.add_argument(
        "--tag", default=os.environ.get("IMAGE_TAG", "dev"), help="image tag (default: dev)"
    )
    p.add_argument("--rebuild-base", action="store_true", help="debootstrap the base again")
    p.add_argument(
        "--oci-dir",
        type=Path,
        help="no docker: build on this host (Debian bookworm, its python3.11) and write "
        "DIR/<service>.tar, OCI archives for `localcluster load` (also: examples)",
    )
    args = p.parse_args(argv)
    known = {**SERVICES, **TRAINERS} if args.oci_dir else SERVICES
    unknown = [s for s in args.services if s not in known]
    if unknown:
        p.error(f"unknown service {', '.join(unknown)}: choose from {', '.join(known)}")
    logs = BASE_CACHE / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    if args.oci_dir:
        return build_oci(args.oci_dir, args.services or list(known), args.tag, logs)
    try:
        ensure_docker(logs / "dockerd.log")
        started = time.monotonic()
        base = ensure_base(args.rebuild_base)
        print(f"{base}: {time.monotonic() - started:.0f} s", file=sys.stderr)
        for name in args.services or list(SERVICES):
            started = time.monotonic()
            image = build_service(SERVICES[name], args.tag, logs / f"{name}.log", base=base)
            size = image_size(image) / 1e6
            print(f"{image}\t{size:.1f} MB\t{time.monotonic() - started:.0f} s", flush=True)
    except BuildError as e:
        print(f"images/build.py: {e}", file=sys.stderr)
        return 1
    return 0


def oci_image_name(service: str, tag: str) -> str:
    return f"{OCI_REGISTRY}/{REPOSITORY}/{service}:{tag}"


def build_oci(out_dir: Path, names: list[str], tag: str, logs: Path) -> int:
    """The docker-free path: one OCI archive per service in `out_dir`."""
    # Here, not at the top: the docker path runs without localcluster (ocibuild's writer), and
    # tests load this script by file, where its directory is not on sys.path.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ocibuild import OCIBuildError, build_archive

    everything = {**SERVICES, **TRAINERS}
    for name in names:
        started = time.monotonic()
        try:
            archive, _ = build_archive(
                context(everything[name]),
                name,
                oci_image_name(name, tag),
                out_dir / f"{name}.tar",
                BASE_CACHE / "oci",
                logs / f"{name}-oci.log",
            )
        except (BuildError, OCIBuildError) as e:
            print(f"images/build.py: {e}", file=sys.stderr)
            return 1
        size = archive.stat().st_size / 1e6
        print(f"{oci_image_name(name, tag)}\t{size:.1f} MB\t{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
