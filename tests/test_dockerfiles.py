"""Every service image: multi-stage, small base, only shared/ + its service, non-root, its script.

Images cannot be built here (no Docker engine), so the Dockerfiles are checked as text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kustomizing import SERVICES, console_scripts, service_dirs

# Services that ship an image (the `kubetune` CLI in services/cli runs on the user's machine).
IMAGED = (
    "experiment-controller",
    "suggestion-controller",
    "suggestion-algorithm",
    "trial-controller",
    "webhook",
    "pns-collector",
)
NO_IMAGE = ("cli",)
SMALL_BASES = re.compile(r"(-slim\b|alpine|distroless|scratch|chainguard|ubi-micro)")


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [i for i, (word, _) in enumerate(instructions) if word == "FROM"]
    return instructions[starts[-1] :]


def test_every_service_is_classified() -> None:
    names = {p.name for p in service_dirs()}
    assert names <= set(IMAGED) | set(NO_IMAGE), (
        f"new service dir(s) {sorted(names - set(IMAGED) - set(NO_IMAGE))}: add to IMAGED or "
        "NO_IMAGE in tests/test_dockerfiles.py"
    )


@pytest.mark.parametrize("service", IMAGED)
def test_dockerfile(service: str) -> None:
    path = SERVICES / service / "Dockerfile"
    assert path.exists(), f"services/{service}/Dockerfile is missing"
    ins = _instructions(path)
    froms = [rest for word, rest in ins if word == "FROM"]
    assert len(froms) >= 2, f"{path}: not multi-stage (one FROM)"
    final = _final_stage(ins)
    base = final[0][1].split()[0]
    assert SMALL_BASES.search(base), f"{path}: final base image {base} is not a small one"

    users = [rest for word, rest in final if word == "USER"]
    assert users, f"{path}: the final stage sets no USER (runs as root)"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), f"{path}: final USER is {users[-1]}"
    assert user.isdigit(), f"{path}: USER {user} is not numeric (runAsNonRoot cannot verify it)"

    entrypoints = [rest for word, rest in final if word == "ENTRYPOINT"]
    assert entrypoints, f"{path}: no ENTRYPOINT in the final stage"
    argv = json.loads(entrypoints[-1])  # exec form, so SIGTERM reaches the service
    assert isinstance(argv, list) and argv, f"{path}: ENTRYPOINT is not in exec form"
    scripts = console_scripts(SERVICES / service)
    assert Path(argv[0]).name in scripts, (
        f"{path}: ENTRYPOINT {argv} does not start with the console script {sorted(scripts)}"
    )

    for word, rest in ins:
        if word not in ("COPY", "ADD"):
            continue
        parts = [p for p in rest.split() if not p.startswith("--")]
        if any(p.startswith("--from") for p in rest.split()):
            continue
        for src in parts[:-1]:
            src = src.rstrip("/")
            assert (
                src == "shared"
                or src.startswith("shared/")
                or (src == f"services/{service}" or src.startswith(f"services/{service}/"))
            ), f"{path}: {word} {src} copies more than shared/ and services/{service}/"
