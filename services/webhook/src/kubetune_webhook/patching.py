"""JSONPatch (RFC 6902) between two JSON documents, and applying one.

Why: admission responses carry a JSONPatch, but the defaulting and injection rules are easiest
to write (and to prove idempotent) as "compute the desired object". `diff(before, after)` turns
the pair into the patch the API server applies; `apply` is its inverse, used by tests and to
check that mutating twice equals mutating once.

Lists that change length are replaced whole: the API server applies the patch to the object it
sent us, so a replace is always correct, and element-wise moves buy nothing here.
"""

from __future__ import annotations

import copy
from typing import Any

Patch = list[dict[str, Any]]


def escape(token: str) -> str:
    """A JSON Pointer reference token (`~` -> `~0`, `/` -> `~1`), e.g. for label keys."""
    return token.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def diff(before: Any, after: Any, path: str = "") -> Patch:
    """The operations that turn `before` into `after` (empty when they are equal)."""
    if isinstance(before, dict) and isinstance(after, dict):
        ops: Patch = []
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in after.items():
            sub = f"{path}/{escape(key)}"
            if key not in before:
                ops.append({"op": "add", "path": sub, "value": value})
            else:
                ops += diff(before[key], value, sub)
        return ops
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        ops = []
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            ops += diff(old, new, f"{path}/{index}")
        return ops
    if type(before) is type(after) and before == after:
        return []
    return [{"op": "replace", "path": path, "value": after}]


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = [_unescape(t) for t in path.split("/")[1:]]
    node = doc
    for token in tokens[:-1]:
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node, tokens[-1]


def apply(doc: Any, patch: Patch) -> Any:
    """A copy of `doc` with `patch` applied (add, remove, replace; what `diff` emits).

    Raises:
        KeyError, IndexError, ValueError: an operation does not fit the document.
    """
    result = copy.deepcopy(doc)
    for op in patch:
        path = op["path"]
        if path == "":
            if op["op"] == "remove":
                raise ValueError("cannot remove the whole document")
            result = copy.deepcopy(op["value"])
            continue
        parent, key = _parent(result, path)
        kind = op["op"]
        if isinstance(parent, list):
            if kind == "add":
                index = len(parent) if key == "-" else int(key)
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "replace":
                parent[int(key)] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[int(key)]
            else:
                raise ValueError(f"unsupported op {kind}")
        elif kind in ("add", "replace"):
            if kind == "replace" and key not in parent:
                raise KeyError(path)
            parent[key] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del parent[key]
        else:
            raise ValueError(f"unsupported op {kind}")
    return result
