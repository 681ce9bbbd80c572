"""The wrapper-module generation and the missing-Go message (no cluster; the network only for
the release's go.mod when the Go module cache lacks it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from localcluster import build, gotool

RELEASE_GOMOD = """module k8s.io/kubernetes

go 1.25.0

godebug default=go1.25

require (
\tk8s.io/api v0.0.0
\tk8s.io/klog/v2 v2.130.1
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-2024
)

replace k8s.io/cri-api => ./staging/src/k8s.io/cri-api
"""


def test_staging_modules_are_derived_from_the_release_gomod() -> None:
    assert build.staging_modules(RELEASE_GOMOD) == ["api", "client-go", "cri-api"]


def test_wrapper_gomod_pins_staging_to_v0_and_keeps_go_and_godebug() -> None:
    text = build.wrapper_gomod("v1.35.4", RELEASE_GOMOD)
    assert "require k8s.io/kubernetes v1.35.4" in text
    assert "\tk8s.io/client-go => k8s.io/client-go v0.35.4" in text
    assert "\tk8s.io/cri-api => k8s.io/cri-api v0.35.4" in text
    assert "kube-openapi" not in text  # non-staging deps are normal requires
    assert "go 1.25.0" in text and "godebug default=go1.25" in text


def test_wrapper_gomod_without_staging_lines_is_an_error() -> None:
    with pytest.raises(gotool.BuildError):
        build.wrapper_gomod("v1.35.4", "module k8s.io/kubernetes\n\ngo 1.25.0\n")


def test_real_release_gomod(tmp_path: Path) -> None:
    """The pinned release's own go.mod yields the known 31 modules. `go list -m` reads it from
    the module cache, or fetches that one small file when the binaries were built from a cache
    of their own (a missing Go cache is no reason to test nothing)."""
    out = subprocess.run(
        [gotool.find_go(), "list", "-m", "-json", f"k8s.io/kubernetes@{build.K8S_VERSION}"],
        cwd=tmp_path,
        env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, (
        f"the release's go.mod is neither cached nor fetchable: {out.stderr}"
    )
    names = build.staging_modules(Path(json.loads(out.stdout)["GoMod"]).read_text())
    assert len(names) >= 31
    assert {"api", "apiserver", "client-go", "kubectl", "component-base"} <= set(names)


def test_missing_go_says_install_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gotool, "FALLBACK_GO_PATHS", [])
    with pytest.raises(gotool.BuildError, match=r"install Go 1\.24"):
        gotool.find_go()


def test_build_cli_reports_missing_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gotool, "FALLBACK_GO_PATHS", [])
    assert build.main() == 1
    err = capsys.readouterr().err
    assert "Go 1.24+ is required" in err


def test_failed_compile_shows_the_compiler_error(tmp_path: Path) -> None:
    go = gotool.find_go()
    (tmp_path / "go.mod").write_text("module example.local/broken\n\ngo 1.24\n")
    (tmp_path / "main.go").write_text("package main\n\nfunc main() { undefinedThing() }\n")
    with pytest.raises(gotool.BuildError, match="undefined: undefinedThing"):
        gotool.run([go, "build", "-o", str(tmp_path / "out"), "."], tmp_path)
