"""The image map: what a container image "runs" when the agent runs it as a host process.

A container's ``image`` means nothing to a process runner, so a YAML file maps image names
to an entrypoint, a default command, extra env and PATH entries. Format::

    images:
      - match: "python:*"          # exact name, "name" (any tag) or a prefix ending in *
        entrypoint: []             # ENTRYPOINT (replaced by the container's command)
        cmd: [python3]             # CMD (replaced by the container's args)
        env: {PYTHONUNBUFFERED: "1"}
        path: [/work/venv/bin]     # prepended to PATH

Docker semantics apply: ``command`` replaces the entrypoint and then the image's CMD is
dropped; ``args`` alone replace CMD. A container without ``command`` whose image is not in
the map cannot start (ErrImagePull naming the image and the map file). Built in, and
overridable by the file: ``python`` images run the agent's own interpreter, with its bin
directory first on PATH so ``python3``/``python`` resolve to the agent's venv. Every
container's PATH starts with that bin directory too, so console scripts installed in the
venv (the project's services) run under any image name when given as ``command``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class ImageEntry:
    """One image map rule."""

    match: str
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)

    def matches(self, image: str) -> int:
        """Match strength (longer is more specific); 0 means no match."""
        if self.match.endswith("*"):
            return len(self.match) if image.startswith(self.match[:-1]) else 0
        if image == self.match:
            return len(self.match) + 1000
        return len(self.match) + 500 if _repository(image) == self.match else 0


def _repository(image: str) -> str:
    """The image name without tag or digest."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def _venv_bin() -> str:
    return os.path.dirname(sys.executable)


def builtin_entries() -> list[ImageEntry]:
    """The defaults every map starts with."""
    py = sys.executable
    common = {"env": {"PYTHONUNBUFFERED": "1"}, "path": [_venv_bin()]}
    return [
        ImageEntry(match="python", cmd=[py], **common),  # type: ignore[arg-type]
        ImageEntry(match="python:*", cmd=[py], **common),  # type: ignore[arg-type]
    ]


class ImageMapError(Exception):
    """The image has no entry and the container gave no command."""


@dataclass
class ImageMap:
    """Ordered rules; the most specific match wins."""

    entries: list[ImageEntry]
    source: str = "<builtin>"

    @classmethod
    def load(cls, path: str | None) -> ImageMap:
        """Read the YAML file (or only the built-ins when no file is given)."""
        entries = builtin_entries()
        if not path:
            return cls(entries)
        with open(path, encoding="utf-8") as fh:
            doc: Any = yaml.safe_load(fh) or {}
        raw = doc.get("images", []) if isinstance(doc, dict) else doc
        if isinstance(raw, dict):  # shorthand: {image: {...}}
            raw = [dict(v or {}, match=k) for k, v in raw.items()]
        for item in raw or []:
            entries.append(
                ImageEntry(
                    match=str(item["match"]),
                    entrypoint=[str(x) for x in item.get("entrypoint") or []],
                    cmd=[str(x) for x in item.get("cmd") or item.get("command") or []],
                    env={str(k): str(v) for k, v in (item.get("env") or {}).items()},
                    path=[str(x) for x in item.get("path") or []],
                )
            )
        return cls(entries, source=os.path.abspath(path))

    def lookup(self, image: str) -> ImageEntry | None:
        """The best rule for an image; later rules win ties (the file overrides built-ins)."""
        best: ImageEntry | None = None
        score = 0
        for e in self.entries:
            s = e.matches(image)
            if s and s >= score:
                best, score = e, s
        return best

    def argv(self, image: str, command: list[str] | None, args: list[str] | None) -> list[str]:
        """The process argv for a container, by Docker's ENTRYPOINT/CMD rules."""
        entry = self.lookup(image)
        if command:
            return list(command) + list(args or [])
        if entry is None:
            raise ImageMapError(
                f'image "{image}" has no entry in the node agent image map ({self.source}) '
                "and the container has no command"
            )
        argv = list(entry.entrypoint) + (list(args) if args else list(entry.cmd))
        if not argv:
            raise ImageMapError(
                f'image "{image}" maps to an empty command in {self.source} and the '
                "container has no command"
            )
        return argv

    def base_env(self, image: str) -> dict[str, str]:
        """The environment the image provides (PATH first)."""
        entry = self.lookup(image)
        path = _venv_bin() + ":" + DEFAULT_PATH
        env: dict[str, str] = {}
        if entry is not None:
            if entry.path:
                path = ":".join(entry.path) + ":" + path
            env.update(entry.env)
        env["PATH"] = env.get("PATH", path)
        return env
