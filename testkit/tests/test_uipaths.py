"""The UI paths tests build: validated and escaped names."""

from __future__ import annotations

import pytest

from kubetune import errors
from kubetune_testkit.uipaths import events_path, object_path


def test_a_path_names_the_object() -> None:
    assert object_path("/api/trials", "ns-1", "t.a", "logs") == "/api/trials/ns-1/t.a/logs"


@pytest.mark.parametrize(
    ("namespace", "name"), [("ns", "../../x"), ("../x", "e"), ("ns", "a/b"), ("ns", "a%2Fb")]
)
def test_a_name_cannot_change_the_path(namespace: str, name: str) -> None:
    with pytest.raises(errors.InvalidName):
        object_path("/api/experiments", namespace, name)


def test_event_topics_are_query_data_never_the_route() -> None:
    path = events_path(["trial/ns/../../x", "a&topic=b"])
    assert path.startswith("/api/events?") and "/.." not in path.split("?", 1)[0]
    assert path == "/api/events?topic=trial%2Fns%2F..%2F..%2Fx&topic=a%26topic%3Db"
