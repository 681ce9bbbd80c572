"""Create, delete and restart Experiments as the user behind the proxy (impersonation).

The UI's ServiceAccount may only read. A write is sent with `Impersonate-User` (and one
`Impersonate-Group` per group) taken from the headers the authenticating proxy sets, so the API
server authorizes it with the user's own RBAC, runs admission (the webhook) for that user, and
the audit log names the user: the answer, or the refusal, is exactly the one kubectl would give
them. Without such a header a write is refused before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubetune.kube import EXPERIMENTS, Kube

Obj = dict[str, Any]


class WriteMode(StrEnum):
    IMPERSONATE = "impersonate"
    """As the proxy's user (the deployed default)."""
    OWN = "own-credentials"
    """With the UI's own credentials: a UI run locally by one user with their kubeconfig."""
    OFF = "off"
    """Read-only."""


class Refused(Exception):
    """A write the UI will not send; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Writer:
    """Sends Experiment writes as `user` (impersonated) or with the UI's own credentials."""

    kube: Kube
    mode: WriteMode
    user_header: str = "X-Forwarded-User"
    groups_header: str = "X-Forwarded-Groups"

    def user_of(self, headers: Mapping[str, str]) -> User | None:
        """The proxy's user, or None; refuses when writes are off or the user is unknown."""
        if self.mode == WriteMode.OFF:
            raise Refused(403, "this UI is read-only (started with --writes=off)")
        if self.mode == WriteMode.OWN:
            return None
        name = (headers.get(self.user_header) or "").strip()
        if not name:
            raise Refused(
                401,
                f"no user: writes are made as the user the proxy names in {self.user_header} "
                "(the UI runs with --writes=impersonate); sign in through the proxy",
            )
        groups = tuple(
            g.strip() for g in (headers.get(self.groups_header) or "").split(",") if g.strip()
        )
        return User(name, groups)

    def call(
        self,
        user: User | None,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        """One API request; impersonating `user` unless None. API errors raise ApiError."""
        impersonation: list[tuple[str, str]] = []
        if user is not None:
            impersonation.append(("Impersonate-User", user.name))
            impersonation += [("Impersonate-Group", group) for group in user.groups]
        return self.kube.request(
            method, path, body=body, content_type=content_type, extra_headers=impersonation
        )

    def create(self, user: User | None, experiment: Obj, namespace: str) -> Obj:
        return self.call(user, "POST", EXPERIMENTS.path(namespace), experiment)

    def delete(self, user: User | None, namespace: str, name: str) -> None:
        self.call(user, "DELETE", EXPERIMENTS.path(namespace, name))

    def set_max_trials(self, user: User | None, namespace: str, name: str, count: int) -> Obj:
        """Restart: a Succeeded experiment resumes when maxTrialCount is raised."""
        patch = {"spec": {"maxTrialCount": count}}
        return self.call(
            user,
            "PATCH",
            EXPERIMENTS.path(namespace, name),
            patch,
            "application/merge-patch+json",
        )
