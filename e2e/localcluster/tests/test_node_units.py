"""The real node's pieces that need no root: image archives, configs, bad input."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest
import yaml

from localcluster import cli, node, nodebuild, ociimage


def test_an_oci_archive_names_its_image_and_its_blobs_match(tmp_path: Path) -> None:
    binary = tmp_path / "tool"
    binary.write_bytes(b"\x7fELF not really")
    image = ociimage.Image("localcluster.local/tool:1", entrypoint=["/tool"])
    image.add_file("tool", binary).add_symlink("bin/alias", "/tool")
    archive = ociimage.write(image, tmp_path / "tool.tar")
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    for name, data in members.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    index = json.loads(members["index.json"])
    entry = index["manifests"][0]
    assert entry["annotations"]["io.containerd.image.name"] == "localcluster.local/tool:1"
    manifest = json.loads(members[f"blobs/sha256/{entry['digest'].split(':')[1]}"])
    layer = members[f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}"]
    config = json.loads(members[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert config["config"]["Entrypoint"] == ["/tool"]
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]
    with tarfile.open(fileobj=__import__("io").BytesIO(layer)) as files:
        assert files.getmember("tool").mode == 0o755
        assert files.getmember("bin/alias").linkname == "/tool"


def test_an_image_name_needs_a_tag(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a tag"):
        ociimage.write(ociimage.Image("localcluster.local/tool", ["/tool"]), tmp_path / "x.tar")


def test_load_says_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["load", str(tmp_path / "missing.tar")]) == 1
    assert "missing.tar does not exist" in capsys.readouterr().err
    (tmp_path / "present.tar").write_bytes(b"")
    if not node.CONTAINERD_SOCKET.exists():
        assert cli.main(["load", str(tmp_path / "present.tar")]) == 1
        assert "localcluster up --node kubelet" in capsys.readouterr().err


def test_unknown_node_mode_names_the_choices() -> None:
    with pytest.raises(node.NodeError, match="choose from kubelet"):
        node.validate_mode("kind")


def test_the_node_configs_carry_this_machine_s_settings(tmp_path: Path) -> None:
    kubelet = node.kubelet_config(tmp_path, "192.0.2.9", 10250, 10248)
    assert kubelet["failCgroupV1"] is False and kubelet["cgroupDriver"] == "cgroupfs"
    assert kubelet["failSwapOn"] is False and kubelet["clusterDNS"] == [node.DNS_SERVICE_IP]
    # A disk other work fills never evicts the node's pods ("0%": the signal is off).
    disk = {k: v for k, v in kubelet["evictionHard"].items() if not k.startswith("memory")}
    assert disk and set(disk.values()) == {"0%"}
    proxy = node.kube_proxy_config(tmp_path / "k", "n", dict.fromkeys(node.LOCAL_PORTS, 1))
    assert proxy["conntrack"]["maxPerCore"] == 0 and proxy["mode"] == "nftables"
    corefile = next(m for m in node.coredns_manifests() if m["kind"] == "ConfigMap")
    text = corefile["data"]["Corefile"]
    assert "forward" not in text and "loop" not in text and "kubernetes cluster.local" in text
    yaml.safe_dump_all(node.coredns_manifests())  # serialisable as applied
    bins = nodebuild.NodeBinaries({n: tmp_path / n for n in ("runc", "bridge")})
    containerd = node.containerd_config(bins, tmp_path / "root", tmp_path / "cni")
    assert "restrict_oom_score_adj = true" in containerd
    assert f'sandbox = "{node.PAUSE_IMAGE}"' in containerd


def test_a_starting_node_holds_the_lock_before_its_first_process_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI once took a host snapshot while another env's node was between claim and start."""
    import subprocess
    import sys

    from localcluster import cluster

    monkeypatch.setattr(node, "LOCK_FILE", tmp_path / "node.lock")
    starting = tmp_path / "starting"  # no state saved yet: nothing of it runs
    claimer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        node.LOCK_FILE.write_text(f"{starting}\n{claimer.pid}")
        assert node.owner(cluster._holds_real_node) == str(starting)
        with pytest.raises(node.NodeBusy, match=str(starting)):
            node.claim(tmp_path / "second", cluster._holds_real_node)
    finally:
        claimer.kill()
        claimer.wait()
    # The claimer gone and no cluster running from it: the claim is stale.
    assert node.owner(cluster._holds_real_node) == ""
    node.claim(tmp_path / "second", cluster._holds_real_node)
    assert node.owner(cluster._holds_real_node) == str(tmp_path / "second")
    # Started: its processes hold it now, not this (living) process; none run here.
    node.started(tmp_path / "second")
    assert node.owner(cluster._holds_real_node) == ""
    node.release(tmp_path / "second")
    assert node.LOCK_FILE.read_text() == ""
