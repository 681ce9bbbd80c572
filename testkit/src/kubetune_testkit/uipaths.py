"""Paths of the web UI's pages and API for one object, built safely: the namespace and the name
are validated as Kubernetes names and escaped, so a name such as `../../x` can never change
which route a test or a bench asks for."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote, urlencode

from kubetune import kube


def object_path(prefix: str, namespace: str, name: str, *tail: str) -> str:
    """`{prefix}/{namespace}/{name}[/tail...]`, e.g. `/api/experiments/ns/exp` or
    `/api/trials/ns/t/logs`; raises `errors.InvalidName` for a bad namespace or name."""
    parts = [kube.namespace_name(namespace), kube.object_name(name), *tail]
    return prefix.rstrip("/") + "".join("/" + quote(p, safe="") for p in parts)


def events_path(topics: Iterable[str]) -> str:
    """`/api/events?topic=...`, each topic query-escaped: topics are data the UI validates (the
    tests send malformed ones on purpose), never part of the route."""
    return "/api/events?" + urlencode([("topic", topic) for topic in topics])
