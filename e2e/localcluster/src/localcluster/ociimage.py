"""Write OCI image archives from local files, for the real node's containerd.

No registry can be reached, so the node's own images (the pod sandbox's pause, CoreDNS), the
images tests run and kubetune's own images (``images/build.py --oci-dir``) are made here from
files on this machine: one uncompressed layer (named files, or a whole root filesystem tree
kept with its owners and modes), a config with the entrypoint, user and environment, a
manifest, and an index naming the image, in the OCI layout that ``ctr images import`` reads.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"


@dataclass
class Image:
    """An image to write: its full name (``host/path:tag``), files and process."""

    name: str
    entrypoint: list[str]
    # path inside the image -> (content, mode); a str content is a symlink target.
    files: dict[str, tuple[bytes | str, int]] = field(default_factory=dict)
    cmd: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=lambda: ["PATH=/bin:/usr/bin:/usr/local/bin"])
    user: str = ""  # "uid" or "uid:gid"; empty: root
    # Directories with a mode of their own (``tmp`` -> 0o1777); parents of files get 0o755.
    dirs: dict[str, int] = field(default_factory=dict)
    exposed_ports: list[str] = field(default_factory=list)  # "8080/tcp"
    # A root filesystem directory taken whole (owners, modes, symlinks kept), before `files`.
    tree: Path | None = None

    def add_file(self, inner: str, source: Path, mode: int = 0o755) -> Image:
        self.files[inner] = (source.read_bytes(), mode)
        return self

    def add_symlink(self, inner: str, target: str) -> Image:
        self.files[inner] = (target, 0o777)
        return self

    def add_text(self, inner: str, text: str, mode: int = 0o644) -> Image:
        self.files[inner] = (text.encode(), mode)
        return self

    def add_dir(self, inner: str, mode: int = 0o755) -> Image:
        self.dirs[inner.strip("/")] = mode
        return self


def busybox(name: str, applets: tuple[str, ...], binary: Path = Path("/bin/busybox")) -> Image:
    """A shell image from a static busybox (Debian busybox-static) with these applets."""
    if not binary.is_file():
        raise FileNotFoundError(f"{binary} is missing: apt-get install busybox-static")
    image = Image(name, entrypoint=["/bin/sh"]).add_file("bin/busybox", binary)
    for applet in applets:
        image.add_symlink(f"bin/{applet}", "busybox")
    return image


# Users of a minimal base (as distroless's static image has them): root, nobody and nonroot.
BASE_USERS = {"root": 0, "nobody": 65534, "nonroot": 65532}
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def static_base(image: Image, users: dict[str, int] | None = None) -> Image:
    """What a static Go binary expects of its image beside the binary: ``/etc/passwd`` and
    ``/etc/group`` (Go's os/user, a ``runAsNonRoot`` user that has a name), the CA bundle
    (TLS to anything but the API server), ``hosts: files dns`` in ``/etc/nsswitch.conf``
    (Go's resolver reads /etc/hosts first) and a world-writable ``/tmp``."""
    if not CA_BUNDLE.is_file():
        raise FileNotFoundError(f"{CA_BUNDLE} is missing: apt-get install ca-certificates")
    every = {**BASE_USERS, **(users or {})}
    home = {"root": "/root"}
    passwd = "".join(
        f"{name}:x:{uid}:{uid}:{name}:{home.get(name, '/home/' + name)}:/sbin/nologin\n"
        for name, uid in every.items()
    )
    group = "".join(f"{name}:x:{uid}:\n" for name, uid in every.items())
    image.add_text("etc/passwd", passwd).add_text("etc/group", group)
    image.add_text("etc/nsswitch.conf", "hosts: files dns\n")
    image.add_file("etc/ssl/certs/ca-certificates.crt", CA_BUNDLE, mode=0o644)
    return image.add_dir("tmp", 0o1777).add_dir("root", 0o700)


def _file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _normalized(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Numeric owners only and one fixed time: the same tree gives the same layer."""
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def _add_tree(tar: tarfile.TarFile, root: Path) -> set[str]:
    """Every entry under ``root`` (symlinks not followed), sorted; returns the directories."""
    dirs: set[str] = set()
    for top, subdirs, names in os.walk(root):
        subdirs.sort()
        for name in sorted(subdirs + names):
            path = Path(top) / name
            inner = str(path.relative_to(root))
            tar.add(path, arcname=inner, recursive=False, filter=_normalized)
            if name in subdirs and not path.is_symlink():
                dirs.add(inner)
    return dirs


def _layer(
    files: dict[str, tuple[bytes | str, int]],
    out: IO[bytes],
    tree: Path | None = None,
    own_dirs: dict[str, int] | None = None,
) -> None:
    own_dirs = own_dirs or {}
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = _add_tree(tar, tree) if tree is not None else set()

        def add_dirs(path: str, last: bool) -> None:
            parts = path.split("/")
            for i in range(1, len(parts) + (1 if last else 0)):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, own_dirs.get(d, 0o755)
                    tar.addfile(info)

        for d in sorted(own_dirs):
            add_dirs(d, last=True)
        for inner in sorted(files):
            parts = inner.strip("/").split("/")
            add_dirs("/".join(parts), last=False)
            content, mode = files[inner]
            info = tarfile.TarInfo("/".join(parts))
            info.mode = mode
            if isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    _file(tar, f"blobs/sha256/{digest}", data)
    return f"sha256:{digest}"


def _file_digest(f: IO[bytes]) -> tuple[str, int]:
    f.seek(0)
    digest = hashlib.sha256()
    while chunk := f.read(1 << 20):
        digest.update(chunk)
    size = f.tell()
    f.seek(0)
    return digest.hexdigest(), size


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def write(image: Image, archive: Path) -> Path:
    """Write ``image`` as an OCI layout tar at ``archive``."""
    if ":" not in image.name.rsplit("/", 1)[-1]:
        raise ValueError(f"image name {image.name!r} needs a tag (name:tag)")
    archive.parent.mkdir(parents=True, exist_ok=True)
    # The layer goes through a file: a root filesystem tree is hundreds of megabytes.
    with tempfile.TemporaryFile(dir=archive.parent) as layer, tarfile.open(archive, "w") as tar:
        _layer(image.files, layer, image.tree, image.dirs)
        layer_hex, layer_size = _file_digest(layer)
        info = tarfile.TarInfo(f"blobs/sha256/{layer_hex}")
        info.size, info.mode = layer_size, 0o644
        tar.addfile(info, layer)
        layer_digest = f"sha256:{layer_hex}"
        process: dict[str, object] = {
            "Entrypoint": image.entrypoint,
            "Cmd": image.cmd or None,
            "Env": image.env,
        }
        if image.user:
            process["User"] = image.user
        if image.exposed_ports:
            process["ExposedPorts"] = {port: {} for port in image.exposed_ports}
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": process,
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        }
        config_bytes = _json(config)
        config_digest = _blob(tar, config_bytes)
        manifest = _json(
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST_TYPE,
                "config": {
                    "mediaType": CONFIG_TYPE,
                    "digest": config_digest,
                    "size": len(config_bytes),
                },
                "layers": [{"mediaType": LAYER_TYPE, "digest": layer_digest, "size": layer_size}],
            }
        )
        manifest_digest = _blob(tar, manifest)
        index = _json(
            {
                "schemaVersion": 2,
                "mediaType": INDEX_TYPE,
                "manifests": [
                    {
                        "mediaType": MANIFEST_TYPE,
                        "digest": manifest_digest,
                        "size": len(manifest),
                        "platform": {"architecture": "amd64", "os": "linux"},
                        "annotations": {
                            "io.containerd.image.name": image.name,
                            "org.opencontainers.image.ref.name": image.name.rsplit(":", 1)[1],
                        },
                    }
                ],
            }
        )
        _file(tar, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
        _file(tar, "index.json", index)
    return archive


def names_in(archive: Path) -> list[str]:
    """The image names an OCI layout or docker-save archive holds, as written in it.

    ``ctr images import`` reports what it saved, but prints a name's ``-`` as a space
    (``docker.io/kubetune/trial controller:dev``), so the archive is read instead."""
    with tarfile.open(archive) as tar:

        def document(name: str) -> Any:
            try:
                member = tar.extractfile(name)
            except KeyError:
                return None
            return json.load(member) if member is not None else None

        index = document("index.json")
        if index is not None:
            return [
                str(m["annotations"]["io.containerd.image.name"])
                for m in index.get("manifests") or []
                if "io.containerd.image.name" in (m.get("annotations") or {})
            ]
        saved = document("manifest.json") or []
        return [str(tag) for entry in saved for tag in entry.get("RepoTags") or []]
