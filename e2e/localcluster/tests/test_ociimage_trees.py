"""OCI archives of whole root filesystems (kubetune's images without docker) and the names
`localcluster load` reports; no root, no node."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

from localcluster import ociimage


def _blobs(archive: Path) -> tuple[dict[str, Any], bytes]:
    with tarfile.open(archive) as tar:
        data = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    index = json.loads(data["index.json"])
    manifest = json.loads(data[f"blobs/sha256/{index['manifests'][0]['digest'][7:]}"])
    config = json.loads(data[f"blobs/sha256/{manifest['config']['digest'][7:]}"])
    return config, data[f"blobs/sha256/{manifest['layers'][0]['digest'][7:]}"]


def test_a_tree_keeps_owners_modes_and_symlinks_and_the_process_its_user(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "tool").write_bytes(b"#!/usr/bin/tool\n")
    (root / "usr" / "bin" / "tool").chmod(0o755)
    (root / "bin").symlink_to("usr/bin")
    (root / "data").mkdir()
    (root / "tmp").mkdir()
    (root / "tmp").chmod(0o1777)
    if os.geteuid() == 0:
        os.chown(root / "data", 65532, 65532)
    image = ociimage.Image(
        "localcluster.local/tree-image:1",
        entrypoint=["tool"],
        user="65532:65532",
        exposed_ports=["8080/tcp"],
        tree=root,
    )
    config, layer = _blobs(ociimage.write(image, tmp_path / "tree.tar"))
    assert config["config"]["User"] == "65532:65532"
    assert config["config"]["ExposedPorts"] == {"8080/tcp": {}}
    with tarfile.open(fileobj=io.BytesIO(layer)) as files:
        entries = {m.name: m for m in files.getmembers()}
    assert entries["usr/bin/tool"].mode == 0o755
    assert entries["bin"].issym() and entries["bin"].linkname == "usr/bin"
    assert entries["tmp"].mode == 0o1777
    assert (entries["data"].uid, entries["data"].gid) == (os.stat(root / "data").st_uid,) * 2
    assert {e.uname for e in entries.values()} == {""}, "numeric owners only"
    # Parents before children, so the layer unpacks in order.
    names = list(entries)
    assert names.index("usr") < names.index("usr/bin") < names.index("usr/bin/tool")


def test_the_names_of_an_archive_are_read_from_it(tmp_path: Path) -> None:
    """ctr prints `trial controller` for `trial-controller`: the archive says the real name."""
    oci = ociimage.write(
        ociimage.Image("docker.io/kubetune/trial-controller:dev", ["/x"]), tmp_path / "oci.tar"
    )
    assert ociimage.names_in(oci) == ["docker.io/kubetune/trial-controller:dev"]
    saved = tmp_path / "saved.tar"
    with tarfile.open(saved, "w") as tar:
        manifest = json.dumps([{"RepoTags": ["example.com/a-b:1", "example.com/a-b:2"]}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
    assert ociimage.names_in(saved) == ["example.com/a-b:1", "example.com/a-b:2"]
