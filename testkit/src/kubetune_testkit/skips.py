"""The skips a test run may report: each one an environment a run may lack, with why that is
allowed. The plugin (`kubetune_testkit.plugin`) fails every other skip, so a missing tool, a
missing cache or an unbuilt binary can never turn into a green run that tested nothing.

A test skips through `skip(tag, detail)` with a tag of `ALLOWED`; the skip's reason then starts
with the tag, and the entry allows it only while its condition holds (an "existing cluster"
skip passes only when the run was told to use one). Adding an entry is a decision: write down
why a run without that environment still tests what it claims to.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import pytest


@dataclass(frozen=True)
class AllowedSkip:
    """One allowed skip: the tag its reason starts with, when it applies, and why it may."""

    tag: str
    applies: Callable[[], bool]
    why: str


def _existing_cluster() -> bool:
    return os.environ.get("KUBETUNE_E2E_EXISTING_CLUSTER") == "1"


def _not_root() -> bool:
    return os.geteuid() != 0


ALLOWED: tuple[AllowedSkip, ...] = (
    AllowedSkip(
        "existing cluster",
        _existing_cluster,
        "KUBETUNE_E2E_EXISTING_CLUSTER=1 runs the tests against a cluster someone else started "
        "(kind): its etcd, node agent state and host ports are out of reach. The default run "
        "starts its own local cluster, where none of these skips can happen.",
    ),
    AllowedSkip(
        "needs root",
        _not_root,
        "the node agent's sandbox makes Linux namespaces and mounts, which only root may; CI "
        "runs as root, a developer's unprivileged run still tests the rest.",
    ),
)


def skip(tag: str, detail: str) -> NoReturn:
    """Skip this test for an allowed environment reason (`tag` must be one of `ALLOWED`)."""
    entry = allowed_entry(tag)
    if entry is None:
        raise ValueError(f"skip tag {tag!r} is not in kubetune_testkit.skips.ALLOWED")
    pytest.skip(f"{tag}: {detail}")


def allowed_entry(tag: str) -> AllowedSkip | None:
    return next((e for e in ALLOWED if e.tag == tag), None)


def refusal(reason: str) -> str | None:
    """Why a skip with this reason fails the run, or None when an entry allows it now."""
    for entry in ALLOWED:
        if reason.startswith(f"{entry.tag}:"):
            if entry.applies():
                return None
            return (
                f"a skip tagged {entry.tag!r} is allowed only in its environment, which this "
                f"run is not ({entry.why}): {reason}"
            )
    return (
        f"skipped for a reason kubetune_testkit.skips.ALLOWED does not list: {reason!r}. "
        "Make the test fail with what to fix (a missing tool or cache is a failure), or, for "
        "an environment a run may lack, add an entry there saying why that is allowed."
    )
