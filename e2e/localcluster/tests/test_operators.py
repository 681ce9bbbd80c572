"""The operator build step's pure parts: the wrapper go.mod, the restored symlink, the stamp."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localcluster import gotool, operators

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
    with pytest.raises(gotool.BuildError, match=r"cannot restore .*signal_linux\.go"):
        operators._copy_module(operators.ARGO_WORKFLOWS, module, tmp_path / "src2")


def test_stamp_names_the_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBETUNE_CACHE", str(tmp_path))
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
    with pytest.raises(gotool.BuildError, match=r"unknown operator.*training-operator"):
        operators.build_all(["tekton"])


def test_a_second_build_waits_for_the_running_one_and_finds_it_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI builds the operators in the background while the e2e env asks for them too: the
    second `build-operators` must wait on the first's lock, then reuse what it built."""
    import fcntl
    import subprocess
    import sys
    import time

    monkeypatch.setenv("KUBETUNE_CACHE", str(tmp_path))
    op = operators.TRAINING_OPERATOR
    go_version = "go1.0-test"
    work = operators.work_dir(op)
    bin_dir = work / "bin"
    work.parent.mkdir(parents=True)
    with open(work.parent / f".{work.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the "first build", still running
        script = (
            "import sys; from localcluster import gotool, operators;"
            "gotool.go_version = lambda go: 'go1.0-test';"
            "print('bin', operators.build_operator(operators.TRAINING_OPERATOR, 'go'))"
        )
        second = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        time.sleep(1.5)
        assert second.poll() is None, "the second build did not wait for the lock"
        # The first build finishes: binaries and their stamp appear, then the lock goes.
        bin_dir.mkdir(parents=True)
        for name in op.binaries:
            (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / operators.STAMP).write_text(json.dumps(operators._expected(op, go_version)))
    out, err = second.communicate(timeout=30)
    assert second.returncode == 0, err
    assert "another build of it is running; waiting for it" in out
    assert "cached in" in out and out.splitlines()[-1] == f"bin {bin_dir}"
