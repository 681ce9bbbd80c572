"""The operator build step's pure parts: the wrapper go.mod, the restored symlink, the stamp."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localcluster import build, operators

ARGO_GOMOD = """module github.com/argoproj/argo-workflows/v3

go 1.24.10

require k8s.io/api v0.33.1

replace github.com/olekukonko/tablewriter => github.com/olekukonko/tablewriter v0.0.5

replace (
\tgithub.com/a/b v1.0.0 => github.com/c/d v1.2.3
\tgithub.com/e/f => ../local/f
)
"""


def test_wrapper_keeps_the_release_replace_lines_and_the_local_copy() -> None:
    """A dependency's replace lines do not apply to the module requiring it: copy them."""
    assert operators.replace_lines(ARGO_GOMOD) == [
        "github.com/olekukonko/tablewriter => github.com/olekukonko/tablewriter v0.0.5",
        "github.com/a/b v1.0.0 => github.com/c/d v1.2.3",
    ]
    text = operators.wrapper_gomod(operators.ARGO_WORKFLOWS, ARGO_GOMOD, local_copy=True)
    assert "go 1.24.10\n" in text
    assert "require github.com/argoproj/argo-workflows/v3 v3.7.9\n" in text
    assert "\tgithub.com/argoproj/argo-workflows/v3 => ./src\n" in text
    assert "../local/f" not in text
    plain = operators.wrapper_gomod(operators.TRAINING_OPERATOR, "module x\n\ngo 1.23\n", False)
    assert "replace" not in plain


def test_module_copy_restores_the_file_the_zip_dropped(tmp_path: Path) -> None:
    """Module zips drop git symlinks (argoexec's signal_linux.go -> signal_darwin.go)."""
    module = tmp_path / "mod"
    osdir = module / "workflow" / "executor" / "osspecific"
    osdir.mkdir(parents=True)
    (osdir / "signal_darwin.go").write_text("package osspecific\n")
    (osdir / "signal_darwin.go").chmod(0o444)  # module cache files are read-only
    operators._copy_module(operators.ARGO_WORKFLOWS, module, tmp_path / "src")
    restored = tmp_path / "src" / "workflow" / "executor" / "osspecific" / "signal_linux.go"
    assert restored.read_text() == "package osspecific\n"
    (osdir / "signal_darwin.go").chmod(0o644)
    (osdir / "signal_darwin.go").unlink()
    with pytest.raises(build.BuildError, match=r"cannot restore .*signal_linux\.go"):
        operators._copy_module(operators.ARGO_WORKFLOWS, module, tmp_path / "src2")


def test_stamp_names_the_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBETUNE_OPERATORS_CACHE", str(tmp_path))
    op = operators.TRAINING_OPERATOR
    assert not operators.is_built(op)
    binary = operators.binary(op)
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    stamp = binary.parent / operators.STAMP
    stamp.write_text(json.dumps(operators._expected(op, "go1.26.8")))
    assert operators.is_built(op) and operators.is_built(op, "go1.26.8")
    assert not operators.is_built(op, "go1.25.0")
    data = json.loads(stamp.read_text())
    data["version"] = "v1.9.1"
    stamp.write_text(json.dumps(data))
    assert not operators.is_built(op)


def test_unknown_operator_names_the_choices() -> None:
    with pytest.raises(build.BuildError, match=r"unknown operator.*training-operator"):
        operators.build_all(["tekton"])
