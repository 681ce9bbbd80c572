"""The shell commands the documentation shows, read from its Markdown.

Convention: every fenced block of shell (```sh, ```bash, ```console, ```shell) in `docs/` and in
README.md has, on the line right before its fence, either

    <!-- run -->                 the docs tests run it (bash -euo pipefail, from the repository
                                 root, with the docs env's scripts and kubectl on PATH); it must
                                 leave the working tree as it found it
    <!-- not run: REASON -->     why it cannot run here (a real cluster, a registry, minutes of
                                 building); the reason is printed by the tests

Both are HTML comments, so the rendered page shows neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"sh", "bash", "console", "shell"}
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+)(?P<lang>[\w-]*)\s*$")
RUN = re.compile(r"^\s*<!-- run -->\s*$")
NOT_RUN = re.compile(r"^\s*<!-- not run: (?P<reason>.+?) -->\s*$")


@dataclass(frozen=True)
class Block:
    file: Path
    line: int
    """1-based line of the opening fence."""
    text: str
    run: bool | None
    """True: run it; False: not run (reason); None: no marker (an error)."""
    reason: str

    @property
    def where(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The shell blocks of one Markdown file, with their markers."""
    lines = path.read_text().split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].strip() != opening.group("fence"):
            end += 1
        if opening.group("lang") in SHELL:
            before = lines[i - 1] if i > 0 else ""
            indent = len(opening.group("indent"))
            body = "\n".join(line[indent:] for line in lines[i + 1 : end])
            skip = NOT_RUN.match(before)
            run = True if RUN.match(before) else (False if skip else None)
            found.append(Block(path, i + 1, body, run, skip.group("reason") if skip else ""))
        i = end + 1
    return found


def every_block() -> list[Block]:
    return [b for page in pages() for b in blocks(page)]
