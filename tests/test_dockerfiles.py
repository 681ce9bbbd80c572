"""Every service has an image target in images/Dockerfile: empty base, non-root, its script.

The images are built and run by `tox -e images` (needs Docker); this checks the file as text,
so a new service without an image fails here too.
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
    "db-manager",
    "ui",
)
NO_IMAGE = ("cli",)
DOCKERFILE = SERVICES.parent / "images" / "Dockerfile"


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


def test_every_service_is_classified() -> None:
    names = {p.name for p in service_dirs()}
    assert names <= set(IMAGED) | set(NO_IMAGE), (
        f"new service dir(s) {sorted(names - set(IMAGED) - set(NO_IMAGE))}: add to IMAGED or "
        "NO_IMAGE in tests/test_dockerfiles.py"
    )


def _stages(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Instructions per stage name (`FROM x AS name`)."""
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for word, rest in _instructions(path):
        if word == "FROM":
            current = []
            stages[rest.split()[-1] if " AS " in rest.upper() else rest] = current
        current.append((word, rest))
    return stages


def test_the_runtime_stage_is_empty_but_for_the_assembled_tree_and_non_root() -> None:
    runtime = _stages(DOCKERFILE)["runtime"]
    assert runtime[0] == ("FROM", "scratch AS runtime"), runtime[0]
    users = [rest for word, rest in runtime if word == "USER"]
    assert users and users[-1].split(":")[0].isdigit() and users[-1].split(":")[0] != "0", users


@pytest.mark.parametrize("service", IMAGED)
def test_every_service_has_a_target_starting_its_console_script(service: str) -> None:
    """`images/build.py` builds `--target <service>` of images/Dockerfile (built and run for real
    by `tox -e images`); the per-service Dockerfiles are gone."""
    assert not (SERVICES / service / "Dockerfile").exists(), "use images/Dockerfile"
    stage = _stages(DOCKERFILE).get(service)
    assert stage, f"{DOCKERFILE}: no stage `FROM runtime AS {service}`"
    assert stage[0] == ("FROM", f"runtime AS {service}"), stage[0]
    entrypoints = [rest for word, rest in stage if word == "ENTRYPOINT"]
    argv = json.loads(entrypoints[-1])  # exec form, so SIGTERM reaches the service
    assert isinstance(argv, list) and argv, f"{service}: ENTRYPOINT is not in exec form"
    scripts = console_scripts(SERVICES / service)
    if argv[0] in scripts:
        return
    # Or the interpreter started bare (`-I -S`, no `site` to import: the collector starts in
    # every trial pod) running what the console script runs.
    assert argv[:2] == ["/opt/kubetune/bin/python3", "-I"] and "-c" in argv, argv
    code = argv[argv.index("-c") + 1]
    targets = [target.split(":") for target in scripts.values()]
    assert any(f"from {module} import {func}" in code for module, func in targets), code
