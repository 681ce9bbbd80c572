"""The real node's operator install, without a node: the images' base files, the releases'
manifests with only the images and the node's settings changed, the init container
template, and the command's errors. (tox -e node runs the operators on a real node.)"""

from __future__ import annotations

import copy
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from localcluster import build, cli, cluster, nodeoperators, ociimage, thirdparty


def _layer_and_config(archive: Path) -> tuple[tarfile.TarFile, dict[str, Any]]:
    with tarfile.open(archive) as tar:
        blobs = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    entry = json.loads(blobs["index.json"])["manifests"][0]
    manifest = json.loads(blobs[f"blobs/sha256/{entry['digest'].split(':')[1]}"])
    config = json.loads(blobs[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    layer = blobs[f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}"]
    return tarfile.open(fileobj=io.BytesIO(layer)), config


def test_a_static_base_has_users_ca_certificates_and_a_sticky_tmp(tmp_path: Path) -> None:
    binary = tmp_path / "tool"
    binary.write_bytes(b"\x7fELF not really")
    image = ociimage.Image("localcluster.local/tool:1", entrypoint=["tool"], user="8737")
    image.add_file("bin/tool", binary)
    ociimage.static_base(image, users={"argo": 8737})
    layer, config = _layer_and_config(ociimage.write(image, tmp_path / "tool.tar"))
    assert config["config"]["User"] == "8737"
    with layer:
        assert layer.getmember("tmp").isdir() and layer.getmember("tmp").mode == 0o1777
        assert layer.getmember("bin").isdir() and layer.getmember("bin").mode == 0o755
        passwd = layer.extractfile("etc/passwd").read().decode()  # type: ignore[union-attr]
        assert "argo:x:8737:8737:" in passwd and passwd.startswith("root:x:0:0:")
        assert layer.extractfile("etc/ssl/certs/ca-certificates.crt").read()  # type: ignore[union-attr]
        assert b"hosts: files dns" in layer.extractfile("etc/nsswitch.conf").read()  # type: ignore[union-attr]


def test_an_image_without_a_user_runs_as_the_runtime_s_default(tmp_path: Path) -> None:
    image = ociimage.Image("localcluster.local/plain:1", entrypoint=["/x"])
    layer, config = _layer_and_config(ociimage.write(image, tmp_path / "plain.tar"))
    layer.close()
    assert "User" not in config["config"]


SOURCE = """package pytorch
var (
	initContainerTemplate = `
- name: init-pytorch
  command: ['sh', '-c', 'for i in $(seq 3); do if nslookup {{.MasterAddr}}; then break; fi; done']`
	other = 1
)
"""


def test_the_init_container_template_is_the_release_s_naming_nslookup_by_path() -> None:
    template = nodeoperators.init_container_template(SOURCE)
    assert template.startswith("\n- name: init-pytorch\n")
    assert "if /bin/nslookup {{.MasterAddr}}; then" in template
    assert "`" not in template and "other" not in template


def test_an_init_container_template_without_nslookup_is_refused() -> None:
    with pytest.raises(nodeoperators.InstallError, match="has no nslookup"):
        nodeoperators.init_container_template(SOURCE.replace("nslookup", "getent hosts"))
    with pytest.raises(nodeoperators.InstallError, match="no initContainerTemplate"):
        nodeoperators.init_container_template("package pytorch\n")


def _without(objs: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    return [o for o in objs if not (o["kind"] == kind and o["metadata"]["name"] == name)]


def _deployment(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == name)


@pytest.fixture(scope="module")
def kubectl() -> str:
    return str(build.binaries().kubectl)


def test_the_training_operator_is_the_release_s_install_with_its_images_changed(
    kubectl: str,
) -> None:
    release = nodeoperators.render(
        kubectl, thirdparty.TRAINING_OPERATOR, nodeoperators.TRAINING_OVERLAY
    )
    ours = nodeoperators.training_operator_manifests(kubectl)
    config = next(o for o in ours if o["kind"] == "ConfigMap")
    assert "/bin/nslookup {{.MasterAddr}}" in config["data"]["initContainer.yaml"]
    changed = _deployment(ours, "training-operator")
    spec = copy.deepcopy(changed["spec"]["template"]["spec"])
    container = spec["containers"][0]
    assert container["image"] == nodeoperators.TRAINING_OPERATOR_IMAGE
    assert container["args"] == [f"--pytorch-init-container-image={nodeoperators.POD_TOOLS_IMAGE}"]
    assert container["volumeMounts"][-1]["mountPath"] == "/etc/config"
    # Everything else is the release's.
    original = _deployment(release, "training-operator")["spec"]["template"]["spec"]
    container["image"] = original["containers"][0]["image"]
    del container["args"]
    container["volumeMounts"].pop()
    spec["volumes"].pop()
    assert spec == original
    rest = _without(
        _without(ours, "ConfigMap", config["metadata"]["name"]), "Deployment", "training-operator"
    )
    assert rest == _without(release, "Deployment", "training-operator")


def test_argo_is_the_release_s_cluster_install_without_the_server(kubectl: str) -> None:
    release = nodeoperators.render(kubectl, thirdparty.ARGO_WORKFLOWS, nodeoperators.ARGO_OVERLAY)
    ours = nodeoperators.argo_manifests(kubectl)
    assert ours[0] == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": nodeoperators.ARGO_NAMESPACE},
    }
    container = _deployment(ours, "workflow-controller")["spec"]["template"]["spec"]["containers"][
        0
    ]
    assert container["image"] == nodeoperators.ARGO_CONTROLLER_IMAGE
    assert container["args"] == ["--executor-image", nodeoperators.ARGOEXEC_IMAGE]
    # Its default user matches the image's, the user its Deployment requires to be non-root.
    assert _deployment(ours, "workflow-controller")["spec"]["template"]["spec"][
        "securityContext"
    ] == {"runAsNonRoot": True}
    expected = _without(_without(release, "Deployment", "argo-server"), "Service", "argo-server")
    original = _deployment(expected, "workflow-controller")["spec"]["template"]["spec"]
    original["containers"][0].update(image=container["image"], args=container["args"])
    assert ours[1:] == expected


def test_install_operators_needs_a_real_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--state-dir", str(tmp_path), "install-operators"]) == 1
    assert "`localcluster up --node kubelet` first" in capsys.readouterr().err


def test_install_operators_names_the_choices(tmp_path: Path) -> None:
    with pytest.raises(nodeoperators.InstallError, match=r"unknown operator.*argo-workflows"):
        nodeoperators.install("kubectl", "kubeconfig", tmp_path, ["tekton"])
    assert cluster.State.load(tmp_path) is None
