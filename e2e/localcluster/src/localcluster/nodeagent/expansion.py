"""Kubelet-compatible ``$(VAR)`` expansion for command, args and env values.

Katib's wrapped training commands rely on the exact rules (``$$$$`` becomes ``$$`` so the
shell sees its own PID), so this follows the kubelet semantics byte for byte:

* ``$(NAME)`` becomes the value of NAME when it is defined, else stays ``$(NAME)``;
* ``$$`` becomes ``$`` (an escaped operator);
* ``$(`` without a closing ``)`` and a ``$`` before any other character stay verbatim;
* the name runs to the first ``)``, so nested references are not expanded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence


def mapping_for(*contexts: Mapping[str, str]) -> Callable[[str], str]:
    """Look a name up in each context in turn; unknown names render as ``$(NAME)``."""

    def lookup(name: str) -> str:
        for ctx in contexts:
            if name in ctx:
                return ctx[name]
        return "$(" + name + ")"

    return lookup


def expand(text: str, lookup: Callable[[str], str]) -> str:
    """Expand one string."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 == n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
            else:
                out.append(lookup(text[i + 2 : close]))
                i = close + 1
        else:
            out.append("$")
            i += 1
    return "".join(out)


def expand_all(items: Sequence[str] | None, env: Mapping[str, str]) -> list[str]:
    """Expand each of a command or args list against the container's final env."""
    lookup = mapping_for(env)
    return [expand(s, lookup) for s in items or []]
