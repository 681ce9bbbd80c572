"""MkDocs hook: the reference pages' generated parts, made from the installed services at build
time so they cannot drift from the code.

A page asks for a part with an HTML comment on a line of its own, `<!-- generated: NAME -->`;
the hook replaces it with the part's Markdown. Parts:

- `flags`: every console script's `--help` (and each subcommand's), run as a process;
- `katib-config`: `kubetune.config.default_yaml()`, the document that applies with no file;
- `crd-fields`: every field of the three CRDs in `kustomize/base/crds/`, with its type.

An unknown part, or a script missing from the build environment, fails the build.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)

# (console script, subcommands whose own --help is shown too)
SCRIPTS: list[tuple[str, list[str]]] = [
    ("experiment-controller", []),
    ("suggestion-controller", []),
    ("suggestion-algorithm", ["bridge"]),
    ("trial-controller", []),
    ("webhook", ["serve", "certs"]),
    ("pns-collector", []),
    ("db-manager", []),
    ("kubetune-ui", []),
    ("kubetune", ["run", "get", "best", "logs", "metrics", "plot"]),
]


def _script(name: str) -> str:
    """The console script beside this interpreter (the docs env's), else on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed: the docs env installs every service")
    return found


def help_text(argv: list[str]) -> str:
    """`argv --help` as printed with no KUBETUNE_* variable set (so defaults are the code's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBETUNE_")}
    env["COLUMNS"] = "100"
    done = subprocess.run(
        [_script(argv[0]), *argv[1:], "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} --help exited {done.returncode}: {done.stderr}")
    return done.stdout.rstrip()


def flags() -> str:
    out: list[str] = []
    for script, subcommands in SCRIPTS:
        out += [f"## `{script}`", "", "```text", help_text([script]), "```", ""]
        for sub in subcommands:
            out += [f"### `{script} {sub}`", "", "```text", help_text([script, sub]), "```", ""]
    return "\n".join(out)


def katib_config() -> str:
    from kubetune import config

    return "```yaml\n" + config.default_yaml().rstrip() + "\n```\n"


def _type(schema: dict[str, Any]) -> str:
    kind = str(schema.get("type", "object"))
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        kind += " (any fields)"
    if "enum" in schema:
        kind += ": " + ", ".join(f"`{v}`" for v in schema["enum"])
    return kind


def _fields(schema: dict[str, Any], path: str) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for name, child in sorted((schema.get("properties") or {}).items()):
        here = f"{path}.{name}" if path else name
        rows.append((here, _type(child)))
        rows += _fields(child, here)
    items = schema.get("items")
    if isinstance(items, dict):
        rows += _fields(items, path + "[]")
    return rows


def crd_fields() -> str:
    out: list[str] = []
    for path in sorted((ROOT / "kustomize" / "base" / "crds").glob("*.kubeflow.org.yaml")):
        crd = yaml.safe_load(path.read_text())
        kind = crd["spec"]["names"]["kind"]
        version = crd["spec"]["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        out += [f"## {kind} fields", "", f"`{crd['spec']['group']}/{version['name']}`, "]
        out[-1] += f"generated from `kustomize/base/crds/{path.name}`.\n"
        out += ["| field | type |", "| --- | --- |"]
        for top in ("spec", "status"):
            sub = (schema.get("properties") or {}).get(top)
            if sub:
                out += [f"| `{f}` | {t} |" for f, t in _fields(sub, top)]
        out.append("")
    return "\n".join(out)


PARTS = {"flags": flags, "katib-config": katib_config, "crd-fields": crd_fields}


def render(markdown: str) -> str:
    """The page with each marker replaced by its part."""

    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in PARTS:
            raise RuntimeError(f"unknown generated part {name!r}: one of {', '.join(PARTS)}")
        return PARTS[name]()

    return MARKER.sub(part, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return render(markdown)
