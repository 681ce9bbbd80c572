"""Nothing in the repository cites documents it does not contain: a fact is stated where it is
used, or points at a page of docs/."""

from __future__ import annotations

import re
import subprocess

from codeblocks import ROOT

CITATION = re.compile(r"(?i:reference\s+§)|DESIGN\.md|\bDESIGN\b")


def test_no_file_cites_the_reference_or_design() -> None:
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for name in files:
        path = ROOT / name
        if name == "docs/tests/test_citations.py" or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += [
            f"{name}:{text.count(chr(10), 0, m.start()) + 1}" for m in CITATION.finditer(text)
        ]
    assert not found, "cite a page of docs/ or state the fact: " + ", ".join(found)
