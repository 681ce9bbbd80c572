"""Every shell command the documentation shows either runs here, and passes, or says why not
(the convention is in `codeblocks`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from codeblocks import ROOT, Block, blocks, every_block

from localcluster import build

BLOCKS = every_block()


def test_every_shell_block_says_whether_it_runs() -> None:
    unmarked = [b.where for b in BLOCKS if b.run is None]
    assert not unmarked, (
        "shell blocks without `<!-- run -->` or `<!-- not run: REASON -->` on the line before "
        f"the fence: {', '.join(unmarked)}"
    )


def test_the_blocks_not_run_and_why() -> None:
    """Prints the list of commands not run here, with their reasons (`pytest -s` shows it)."""
    skipped = [b for b in BLOCKS if b.run is False]
    for block in skipped:
        print(f"not run: {block.where}: {block.reason}")
    assert all(b.reason.strip() for b in skipped)
    assert any(b.run for b in BLOCKS), "no block is run: the convention has stopped working"


def test_the_marker_is_read_from_the_line_before_the_fence(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n<!-- run -->\n```sh\necho a\n```\n\n<!-- not run: a cluster -->\n"
        "```console\nkubectl get pods\n```\n```sh\nls\n```\n```yaml\na: 1\n```\n"
    )
    found = blocks(page)
    assert [(b.run, b.reason, b.text) for b in found] == [
        (True, "", "echo a"),
        (False, "a cluster", "kubectl get pods"),
        (None, "", "ls"),
    ]


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.run], ids=lambda b: b.where)
def test_the_block_runs(block: Block) -> None:
    path = os.pathsep.join(
        [str(Path(sys.executable).parent), str(build.binaries().bin_dir), os.environ["PATH"]]
    )
    before = _git_status()
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=ROOT,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.where} exited {done.returncode}\n{block.text}\n{done.stdout}\n{done.stderr}"
    )
    assert _git_status() == before, f"{block.where} changed the working tree"
