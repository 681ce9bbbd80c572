"""Build one image without docker: the build context's recipe run on this host, written as an
OCI archive (`images/build.py --oci-dir DIR`).

The host must be what the Dockerfile's build stage is: Debian bookworm with Debian's
python3.11 (`/usr/bin/python3.11`, package python3-venv). Then the steps are the same ones,
from the same build context `images/build.py` gives `docker build`: a virtualenv with the
wheels at the versions of constraints.txt, the local packages, `pip check`, and assemble.py
filling the root filesystem (the virtualenv is made in a scratch directory and put at
/opt/kubetune in the image, its scripts' `#!` lines moved with it). The image's process (user,
environment, entrypoint, command, ports) is read from the context's Dockerfile, the `runtime`
stage then the service's, so both paths give the same image. `localcluster.ociimage` writes
the archive.

An archive is cached in ~/.cache/kubetune/images/oci/ under the hash of everything it is made
from (the context, the tag, the interpreter, this file, assemble.py's flags and the writer), so
an unchanged service costs one hash and a hard link.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from localcluster import ociimage
from localcluster.gotool import one_at_a_time

PYTHON = Path("/usr/bin/python3.11")
IMAGE_VENV = "/opt/kubetune"


class OCIBuildError(RuntimeError):
    """A step failed; the message says what to do."""


@dataclass
class Process:
    """What the Dockerfile's final stages set for the container's process."""

    user: str = ""
    env: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    expose: list[str] = field(default_factory=list)


def _logical_lines(text: str) -> list[str]:
    """Dockerfile instructions: comments dropped, `\\`-continued lines joined."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _exec_form(value: str, where: str) -> list[str]:
    try:
        words = json.loads(value)
    except json.JSONDecodeError as e:
        raise OCIBuildError(f"{where}: write it in exec form, a JSON list ({e})") from e
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise OCIBuildError(f"{where}: write it in exec form, a JSON list of strings")
    return words


def process_of(dockerfile: str, target: str) -> Process:
    """The process the `runtime` stage and then stage `target` define (later lines win)."""
    proc = Process()
    stage = ""
    found = False
    for line in _logical_lines(dockerfile):
        keyword, _, value = line.partition(" ")
        keyword, value = keyword.upper(), value.strip()
        if keyword == "FROM":
            stage = value.split()[-1] if " AS " in value.upper() else ""
            found = found or stage == target
            continue
        if stage not in ("runtime", target):
            continue
        where = f"Dockerfile stage {stage}, {keyword}"
        if keyword == "USER":
            proc.user = value
        elif keyword == "ENV":
            for word in shlex.split(value):
                name, eq, setting = word.partition("=")
                if not eq:
                    raise OCIBuildError(f"{where} {word}: write NAME=value")
                proc.env[name] = setting
        elif keyword == "ENTRYPOINT":
            proc.entrypoint = _exec_form(value, where)
            proc.cmd = []  # as docker: a new ENTRYPOINT drops an inherited CMD
        elif keyword == "CMD":
            proc.cmd = _exec_form(value, where)
        elif keyword == "EXPOSE":
            proc.expose += [p if "/" in p else f"{p}/tcp" for p in value.split()]
    if not found:
        raise OCIBuildError(f"the Dockerfile has no stage `AS {target}`")
    if not proc.entrypoint:
        raise OCIBuildError(f"Dockerfile stage {target} sets no ENTRYPOINT")
    return proc


def cache_key(context: bytes, image: str) -> str:
    """The hash of every input of the archive."""
    digest = hashlib.sha256()
    version = subprocess.run([str(PYTHON), "--version"], capture_output=True, text=True)
    for part in (
        context,
        image.encode(),
        version.stdout.encode(),
        Path(__file__).read_bytes(),
        Path(ociimage.__file__).read_bytes(),
    ):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def _run(cmd: list[str], log: Path, cwd: Path, env: dict[str, str]) -> None:
    with log.open("a") as out:
        out.write(f"$ {shlex.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise OCIBuildError(f"{cmd[0]} {cmd[1]} failed (log {log}):\n{tail}")


def assemble(ctx: Path, rootfs: Path, log: Path) -> None:
    """The Dockerfile build stage's RUN, on this host: the virtualenv, then assemble.py."""
    if not PYTHON.is_file():
        raise OCIBuildError(
            f"{PYTHON} is missing: the docker-free build needs Debian bookworm's python3.11, "
            "as the images' base (apt-get install python3 python3-venv)"
        )
    env = {
        **os.environ,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("PIP_CONSTRAINT", None)  # the context's constraints.txt is the one given
    env.pop("VIRTUAL_ENV", None)
    if (ctx / "ca.pem").stat().st_size:
        env["PIP_CERT"] = str(ctx / "ca.pem")
    venv = ctx / "venv"
    # --no-compile: assemble.py compiles what it keeps (pip's bytecode is never copied).
    pip = [str(venv / "bin" / "pip"), "install", "--quiet", "--no-compile"]
    pip += ["-c", str(ctx / "constraints.txt")]
    _run([str(PYTHON), "-m", "venv", str(venv)], log, ctx, env)
    # With the build backend the local packages need (assemble.py drops both from the image).
    build_backend = ["setuptools>=68", "wheel"]
    reqs = ["-r", str(ctx / "requirements.txt"), *build_backend]
    _run([*pip, "--only-binary=:all:", *reqs], log, ctx, env)
    local = sorted(str(p) for p in (ctx / "src").glob("*")) if (ctx / "src").is_dir() else []
    if local:
        # With the virtualenv's setuptools: an isolated build env per package would install
        # setuptools again for each (minutes on a loaded machine).
        _run([*pip, "--no-deps", "--no-build-isolation", *local], log, ctx, env)
    _run([str(venv / "bin" / "pip"), "check"], log, ctx, env)
    flags = shlex.split((ctx / "assemble-flags").read_text())
    cmd = [str(PYTHON), str(ctx / "assemble.py"), str(rootfs), "--venv", str(venv)]
    _run([*cmd, "--image-venv", IMAGE_VENV, *flags], log, ctx, env)


def _link_or_copy(source: Path, dest: Path) -> None:
    dest.unlink(missing_ok=True)
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def _build(context: bytes, target: str, image: str, cached: Path, log: Path) -> None:
    log.write_text("")
    with tempfile.TemporaryDirectory(dir=cached.parent, prefix=f"{target}-") as tmp:
        ctx = Path(tmp) / "ctx"
        with tarfile.open(fileobj=io.BytesIO(context)) as tar:
            tar.extractall(ctx, filter="data")
        rootfs = Path(tmp) / "rootfs"
        assemble(ctx, rootfs, log)
        proc = process_of((ctx / "Dockerfile").read_text(), target)
        spec = ociimage.Image(
            image,
            entrypoint=proc.entrypoint,
            cmd=proc.cmd,
            env=[f"{k}={v}" for k, v in proc.env.items()],
            user=proc.user,
            exposed_ports=proc.expose,
            tree=rootfs,
        )
        partial = Path(tmp) / "image.tar"
        ociimage.write(spec, partial)
        partial.replace(cached)


def build_archive(
    context: bytes, target: str, image: str, out: Path, cache: Path, log: Path
) -> tuple[Path, bool]:
    """`out` (an OCI archive of `image`) from the build context; True when it was built now,
    False when the cache had it."""
    key = cache_key(context, image)
    cached = cache / f"{target}-{key[:24]}.tar"
    cache.mkdir(parents=True, exist_ok=True)
    # CI builds the images in the background too: a second run waits, then finds them cached.
    with one_at_a_time(cache / f"{target}.lock", "images", f"{target} is being built"):
        built = not cached.is_file()
        if built:
            _build(context, target, image, cached, log)
    for stale in cache.glob(f"{target}-*.tar"):
        if stale != cached:
            stale.unlink(missing_ok=True)  # an older build of this image: only the newest stays
    out.parent.mkdir(parents=True, exist_ok=True)
    _link_or_copy(cached, out)
    print(f"{out}: {image}{'' if built else ' (cached)'}", file=sys.stderr)
    return out, built
