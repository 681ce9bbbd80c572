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

    def add_file(self, inner: str, source: Path, mode: int = 0o755) -> Image:
        self.files[inner] = (source.read_bytes(), mode)
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


def _file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _layer(files: dict[str, tuple[bytes | str, int]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for inner in sorted(files):
            parts = inner.strip("/").split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
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
    layer = _layer(image.files)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": image.entrypoint, "Cmd": image.cmd or None, "Env": image.env},
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
