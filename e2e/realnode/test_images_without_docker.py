"""The images `images/build.py --oci-dir` writes follow the Dockerfile's rules: the process
(user, entrypoint, command, environment) of each service's stage, non-root, no shell in a
service image, the root filesystem written by root only, /tmp sticky, the algorithm's data
directory its user's. Reads the archives the session loads (KUBETUNE_REALNODE_IMAGES)."""

from __future__ import annotations

import importlib.util
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from conftest import ARCHIVES, image_archives

from kubetune_testkit.deploying import ROOT


def load_ocibuild() -> Any:
    """images/ocibuild.py as a module (images/ holds scripts, not an installed package)."""
    spec = importlib.util.spec_from_file_location("ocibuild", ROOT / "images" / "ocibuild.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ocibuild"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


ocibuild = load_ocibuild()

SERVICES = [name for name in ARCHIVES if name != "examples"]
DOCKERFILE = (ROOT / "images" / "Dockerfile").read_text()


Image = tuple[dict[str, Any], dict[str, tarfile.TarInfo], dict[str, bytes]]


def read_image(archive: Path) -> Image:
    """The image config, the layer's entries by path, and the scripts in /opt/kubetune/bin."""
    with tarfile.open(archive) as outer:

        def blob(digest: str) -> bytes:
            member = outer.extractfile(f"blobs/sha256/{digest.split(':')[1]}")
            assert member is not None
            return member.read()

        index = json.loads(blob_of(outer, "index.json"))
        manifest = json.loads(blob(index["manifests"][0]["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        (layer,) = manifest["layers"]
        member = outer.extractfile(f"blobs/sha256/{layer['digest'].split(':')[1]}")
        assert member is not None
        with tarfile.open(fileobj=member) as inner:
            entries = {m.name: m for m in inner.getmembers()}
            scripts = {
                name: blob_of(inner, name)
                for name, m in entries.items()
                if name.startswith("opt/kubetune/bin/") and m.isfile() and m.size < 4096
            }
    return config, entries, scripts


def blob_of(tar: tarfile.TarFile, name: str) -> bytes:
    member = tar.extractfile(name)
    assert member is not None
    return member.read()


@pytest.fixture(scope="module")
def images() -> dict[str, Image]:
    return {path.stem: read_image(path) for path in image_archives()}


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_image_runs_as_its_dockerfile_stage_says(
    images: dict[str, Image], service: str
) -> None:
    config, entries, scripts = images[service]
    process = ocibuild.process_of(DOCKERFILE, service)
    assert config["config"]["User"] == "65532:65532" == process.user
    assert config["config"]["Entrypoint"] == process.entrypoint
    # Its console script, or (the collector, started in every trial pod) the bare interpreter.
    bare = ["/opt/kubetune/bin/python3", "-I", "-S", "-u", "-c"]
    assert process.entrypoint == [service] or (
        service == "pns-collector" and process.entrypoint[:5] == bare
    ), process.entrypoint
    assert config["config"]["Env"] == [f"{k}={v}" for k, v in process.env.items()]
    # The virtualenv was made elsewhere: its scripts start the image's interpreter.
    assert scripts[f"opt/kubetune/bin/{service}"].startswith(b"#!/opt/kubetune/bin/python")
    # No shell: a service image runs its one command.
    assert not {"usr/bin/sh", "usr/bin/bash", "usr/bin/dash", "usr/bin/busybox"} & set(entries)
    writable = [
        name for name, e in entries.items() if not e.issym() and (e.mode & 0o002) and name != "tmp"
    ]
    assert writable == [], "written by anyone"
    assert entries["tmp"].mode & 0o1777 == 0o1777
    owned = [name for name, e in entries.items() if e.uid != 0]
    assert owned == (["opt/katib/data"] if service == "suggestion-algorithm" else [])


def test_the_webhook_serves_by_default() -> None:
    """CMD follows ENTRYPOINT in its stage (`webhook serve`), as docker runs it."""
    assert ocibuild.process_of(DOCKERFILE, "webhook").cmd == ["serve"]


def test_the_trainer_image_has_a_shell_and_the_example(
    images: dict[str, Image],
) -> None:
    config, entries, _ = images["examples"]
    assert "opt/kubetune/examples/training/digits.py" in entries
    assert entries["usr/bin/sh"].linkname == "busybox"
    assert "PATH=/opt/kubetune/bin:/usr/bin" in config["config"]["Env"]
    assert config["config"]["User"] == "65532:65532", "the collector's user, which stops it"


def test_a_stage_without_an_entrypoint_is_refused() -> None:
    with pytest.raises(ocibuild.OCIBuildError, match="stage ui sets no ENTRYPOINT"):
        ocibuild.process_of("FROM scratch AS runtime\nUSER 1\nFROM runtime AS ui\n", "ui")
    with pytest.raises(ocibuild.OCIBuildError, match="no stage `AS nothing`"):
        ocibuild.process_of(DOCKERFILE, "nothing")
