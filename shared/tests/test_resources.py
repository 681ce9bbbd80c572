"""One vocabulary of resources: every resource a service touches is named once, in `kubetune.kube`.

Two spellings of one resource drift (a plural typo, a wrong `namespaced`) and the error shows
only against a cluster; so production code defines no `Resource` constant of its own.
"""

from __future__ import annotations

import re

import pytest

from kubetune import kube
from kubetune.kube import Resource
from kubetune_testkit.paths import REPO

PRODUCTION = [REPO / "shared" / "src", *sorted((REPO / "services").glob("*/src"))]
DEFINITION = re.compile(r"^\s*\w+\s*=\s*(kube\.)?Resource\(", re.M)

CONSTANTS = {name: value for name, value in vars(kube).items() if isinstance(value, Resource)}


def test_no_production_module_defines_a_resource_of_its_own() -> None:
    assert len(PRODUCTION) > 1, "the services' source trees were not found"
    found = [
        f"{path.relative_to(REPO)}:{source[: m.start()].count(chr(10)) + 1}"
        for root in PRODUCTION
        for path in sorted(root.rglob("*.py"))
        if path != REPO / "shared" / "src" / "kubetune" / "kube.py"
        for source in [path.read_text()]
        for m in DEFINITION.finditer(source)
    ]
    assert found == [], f"define these in kubetune.kube and import them: {found}"


@pytest.mark.parametrize("name", sorted(CONSTANTS))
def test_each_constant_builds_its_path(name: str) -> None:
    resource = CONSTANTS[name]
    path = resource.path("ns", "obj")
    assert path.endswith(f"/{resource.plural}/obj")
    assert ("/namespaces/ns/" in path) == resource.namespaced
    singular = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", resource.kind).upper()
    plural = singular[:-1] + "IES" if singular.endswith("Y") else singular + "S"
    assert name == plural or name in {"CONFIGMAPS"}


def test_names_are_unique() -> None:
    values = list(CONSTANTS.values())
    assert len(values) == len(set(values)), "one resource under two names"
