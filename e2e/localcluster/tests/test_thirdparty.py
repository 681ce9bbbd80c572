"""The operators' CRDs fetched from their Go modules: what they are, the cache, the errors."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
import yaml

from localcluster import cli, gotool, thirdparty
from localcluster.pytest_plugin import ClusterHandle

# file -> (CRD name, kind, group): what the tests of the other packages install them for.
EXPECTED = {
    "kubeflow.org_tfjobs.yaml": ("tfjobs.kubeflow.org", "TFJob", "kubeflow.org"),
    "kubeflow.org_pytorchjobs.yaml": ("pytorchjobs.kubeflow.org", "PyTorchJob", "kubeflow.org"),
    "argoproj.io_workflows.yaml": ("workflows.argoproj.io", "Workflow", "argoproj.io"),
}


@pytest.mark.parametrize("filename", sorted(EXPECTED))
def test_fetched_crds_are_the_expected_custom_resource_definitions(filename: str) -> None:
    path = thirdparty.crd_path(filename)
    assert path.is_file()
    assert thirdparty.cache_root() in path.parents
    body = yaml.safe_load(path.read_text())
    name, kind, group = EXPECTED[filename]
    assert body["apiVersion"] == "apiextensions.k8s.io/v1"
    assert body["kind"] == "CustomResourceDefinition"
    assert body["metadata"]["name"] == name
    assert (body["spec"]["group"], body["spec"]["names"]["kind"]) == (group, kind)
    assert any(v.get("served") and v.get("storage") for v in body["spec"]["versions"])


def test_cache_dir_is_stamped_with_module_version_and_sum() -> None:
    path = thirdparty.crd_path("argoproj.io_workflows.yaml")
    assert path.parent.name == "v3@v3.7.9"
    stamp = json.loads((path.parent / thirdparty.STAMP).read_text())
    assert stamp == {
        "module": "github.com/argoproj/argo-workflows/v3",
        "version": "v3.7.9",
        "sum": thirdparty.ARGO_WORKFLOWS.sum,
    }


def test_unknown_file_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"'nope\.yaml'.*kubeflow\.org_tfjobs\.yaml"):
        thirdparty.crd_path("nope.yaml")


def test_missing_go_with_an_empty_cache_says_install_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gotool, "FALLBACK_GO_PATHS", [])
    with pytest.raises(gotool.BuildError, match=r"install Go 1\.24"):
        thirdparty.crd_path("kubeflow.org_tfjobs.yaml")


def test_a_stamped_cache_needs_no_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBETUNE_CACHE", str(tmp_path / "cache"))
    thirdparty.fetch(gotool.find_go(), thirdparty.TRAINING_OPERATOR)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gotool, "FALLBACK_GO_PATHS", [])
    path = thirdparty.crd_path("kubeflow.org_pytorchjobs.yaml")
    assert (
        path.parent
        == tmp_path / "cache" / "thirdparty-crds" / "github.com/kubeflow/training-operator@v1.9.2"
    )
    # A no-op fetch does not even look for go.
    assert thirdparty.fetch("/nonexistent/go", thirdparty.TRAINING_OPERATOR) == path.parent


def test_a_stamp_of_another_pin_is_fetched_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETUNE_CACHE", str(tmp_path / "cache"))
    target = thirdparty.fetch(gotool.find_go(), thirdparty.ARGO_WORKFLOWS)
    stamp = target / thirdparty.STAMP
    stamp.write_text(json.dumps({"module": "x", "version": "v0.0.1", "sum": "h1:old"}))
    (target / "argoproj.io_workflows.yaml").write_text("stale")
    assert not thirdparty.is_cached(thirdparty.ARGO_WORKFLOWS)
    thirdparty.crd_path("argoproj.io_workflows.yaml")
    assert thirdparty.is_cached(thirdparty.ARGO_WORKFLOWS)
    assert "CustomResourceDefinition" in (target / "argoproj.io_workflows.yaml").read_text()


def test_a_sum_other_than_the_pinned_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETUNE_CACHE", str(tmp_path / "cache"))
    wrong = dataclasses.replace(thirdparty.ARGO_WORKFLOWS, sum="h1:AAAA=")
    with pytest.raises(gotool.BuildError, match=r"pinned h1:AAAA="):
        thirdparty.fetch(gotool.find_go(), wrong)
    assert not (tmp_path / "cache" / wrong.key).exists()


def test_a_file_missing_from_the_module_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETUNE_CACHE", str(tmp_path / "cache"))
    missing = dataclasses.replace(thirdparty.ARGO_WORKFLOWS, files=("manifests/no-such.yaml",))
    with pytest.raises(gotool.BuildError, match=r"manifests/no-such\.yaml is not in the module"):
        thirdparty.fetch(gotool.find_go(), missing)
    assert not (tmp_path / "cache" / missing.key).exists()


@pytest.mark.parametrize(
    ("goproxy", "expected"),
    [
        ("https://proxy.golang.org,direct", "https://proxy.golang.org"),
        ("https://a.example|https://b.example,off", "https://a.example,https://b.example"),
        ("direct", gotool.DEFAULT_PROXY),
        ("off", gotool.DEFAULT_PROXY),
        (None, gotool.DEFAULT_PROXY),
    ],
)
def test_only_the_module_proxy_is_used(goproxy: str | None, expected: str) -> None:
    assert gotool.proxy_only(goproxy) == expected


def test_cli_prints_the_crd_paths(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["thirdparty-crds"]) == 0
    printed = {Path(line).name for line in capsys.readouterr().out.split()}
    assert printed == {Path(f).name for m in thirdparty.MODULES for f in m.files}
    assert set(EXPECTED) <= printed


@pytest.mark.integration
def test_the_api_server_establishes_the_fetched_crds(cluster: ClusterHandle) -> None:
    """The real kube-apiserver accepts each schema (it validates CRDs far beyond YAML).

    Created, not applied, and removed afterwards only when created here: on an existing
    cluster the operators' own CRDs stay untouched.
    """
    created = []
    try:
        for filename, (name, _, _) in EXPECTED.items():
            out = cluster.kubectl("create", "-f", str(thirdparty.crd_path(filename)), check=False)
            if out.returncode == 0:
                created.append(name)
            else:
                assert "AlreadyExists" in out.stderr, out.stderr
        for name in created:
            deadline = time.monotonic() + 60
            while True:
                got = json.loads(cluster.kubectl("get", "crd", name, "-o", "json").stdout)
                # Right after the create the status may hold `conditions: null`.
                found = (got.get("status") or {}).get("conditions") or []
                conds = {c["type"]: c["status"] for c in found}
                if conds.get("Established") == "True":
                    break
                assert time.monotonic() < deadline, f"{name} not Established: {conds}"
                time.sleep(0.2)
    finally:
        for name in created:
            cluster.kubectl("delete", "crd", name, "--wait=false", check=False)
