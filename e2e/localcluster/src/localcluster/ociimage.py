"""Write small OCI image archives from local files, for the real node's containerd.

No registry can be reached, so the node's own images (the pod sandbox's pause, CoreDNS) and
the images tests run are made here from binaries on this machine: one uncompressed layer,
a config with the entrypoint, a manifest, and an index naming the image, in the OCI layout
that ``ctr images import`` reads.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

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
    # The image's user (``uid`` or ``uid:gid``); empty: root.
    user: str = ""
    # Directories with a mode of their own (``tmp`` -> 0o1777); parents of files get 0o755.
    dirs: dict[str, int] = field(default_factory=dict)

    def add_file(self, inner: str, source: Path, mode: int = 0o755) -> Image:
        self.files[inner] = (source.read_bytes(), mode)
        return self

    def add_text(self, inner: str, text: str, mode: int = 0o644) -> Image:
        self.files[inner] = (text.encode(), mode)
        return self

    def add_dir(self, inner: str, mode: int = 0o755) -> Image:
        self.dirs[inner.strip("/")] = mode
        return self

    def add_symlink(self, inner: str, target: str) -> Image:
        self.files[inner] = (target, 0o777)
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


def _layer(files: dict[str, tuple[bytes | str, int]], own_dirs: dict[str, int]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()

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
    return buf.getvalue()


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    _file(tar, f"blobs/sha256/{digest}", data)
    return f"sha256:{digest}"


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def write(image: Image, archive: Path) -> Path:
    """Write ``image`` as an OCI layout tar at ``archive``."""
    if ":" not in image.name.rsplit("/", 1)[-1]:
        raise ValueError(f"image name {image.name!r} needs a tag (name:tag)")
    layer = _layer(image.files, image.dirs)
    process: dict[str, object] = {
        "Entrypoint": image.entrypoint,
        "Cmd": image.cmd or None,
        "Env": image.env,
    }
    if image.user:
        process["User"] = image.user
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": process,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w") as tar:
        layer_digest = _blob(tar, layer)
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
                "layers": [{"mediaType": LAYER_TYPE, "digest": layer_digest, "size": len(layer)}],
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
