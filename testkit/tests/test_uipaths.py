"""The UI paths tests build: validated and escaped names."""

from __future__ import annotations

import pytest

from kubetune import errors
from kubetune_testkit.uipaths import object_path


def test_a_path_names_the_object() -> None:
    assert object_path("/api/trials", "ns-1", "t.a", "logs") == "/api/trials/ns-1/t.a/logs"


@pytest.mark.parametrize(
    ("namespace", "name"), [("ns", "../../x"), ("../x", "e"), ("ns", "a/b"), ("ns", "a%2Fb")]
)
def test_a_name_cannot_change_the_path(namespace: str, name: str) -> None:
    with pytest.raises(errors.InvalidName):
        object_path("/api/experiments", namespace, name)
