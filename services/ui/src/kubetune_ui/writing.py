"""Create, delete and restart Experiments as the user behind the proxy (impersonation).

The UI's ServiceAccount may only read. A write is sent with `Impersonate-User` (and one
`Impersonate-Group` per allowed group) taken from the headers the authenticating proxy sets, so
the API server authorizes it with the user's own RBAC, runs admission (the webhook) for that
user, and the audit log names the user: the answer, or the refusal, is exactly the one kubectl
would give them.

The user headers are believed only on a request that proves it came from the proxy: it carries
the shared secret (`--proxy-secret-file`) in `X-Kubetune-Proxy-Secret`. Anything else that
reaches the UI (a pod that skipped the proxy, a port-forward) cannot name a user, so it cannot
write. Names the API server reserves (`system:` users and groups) are never impersonated.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from starlette.datastructures import Headers

from kubetune.kube import EXPERIMENTS, Kube

Obj = dict[str, Any]

PROOF_HEADER = "X-Kubetune-Proxy-Secret"
"""The header in which the authenticating proxy presents the shared secret."""
MAX_NAME = 256
"""Longest user or group name passed on (Kubernetes names users freely; IdP ids are short)."""
MAX_GROUPS = 64
"""Most groups one request may name."""
RESERVED = "system:"
"""The API server's own users and groups (system:masters, system:serviceaccount:...)."""


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


def read_secret(path: str) -> bytes:
    """The shared secret in `path` (surrounding whitespace dropped); ValueError if unusable."""
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as e:
        raise ValueError(f"--proxy-secret-file: cannot read {path!r}: {e.strerror}") from e
    if len(secret) < 16:
        raise ValueError(
            f"--proxy-secret-file: {path!r} holds {len(secret)} bytes; use at least 16 random "
            "bytes (e.g. `openssl rand -hex 32`)"
        )
    return secret


def _reserved(name: str, what: str) -> None:
    if name.lower().startswith(RESERVED):
        raise Refused(
            403,
            f"{what} {name!r}: names starting with {RESERVED!r} belong to the API server "
            "(service accounts, nodes, system:masters); the UI never acts as them",
        )


def _bounded(name: str, what: str) -> str:
    if len(name) > MAX_NAME:
        raise Refused(400, f"{what}: {len(name)} characters, more than {MAX_NAME}")
    if not name.isprintable():
        raise Refused(400, f"{what}: has control characters")
    return name


@dataclass(frozen=True)
class Identity:
    """Who a request is, as the authenticating proxy says, believed only with its proof."""

    proof: bytes | None = None
    user_header: str = "X-Forwarded-User"
    groups_header: str = "X-Forwarded-Groups"
    user_prefix: str = ""
    """Stripped from the user header (Kubeflow's `kubeflow-userid` carries e.g.
    `accounts.google.com:`); a value without it is refused."""
    groups: frozenset[str] = field(default_factory=frozenset)
    """The groups that may be impersonated (as in the ClusterRole's resourceNames); others the
    proxy names are dropped."""

    def proven(self, headers: Headers) -> bool:
        """Whether the request carries the proxy's secret."""
        given = headers.get(PROOF_HEADER)
        if self.proof is None or given is None:
            return False
        return hmac.compare_digest(given.strip().encode(), self.proof)

    def client_of(self, headers: Headers) -> str | None:
        """The proven user's name (for per-client limits), or None."""
        if not self.proven(headers):
            return None
        try:
            return self.user(headers).name
        except Refused:
            return None

    def user(self, headers: Headers) -> User:
        """The proxy's user with the allowed groups; refuses without the proxy's proof."""
        if not self.proven(headers):
            raise Refused(
                401,
                f"no proof of the authenticating proxy: writes are made as the user it names in "
                f"{self.user_header}, and only on a request carrying the shared secret of "
                f"--proxy-secret-file in {PROOF_HEADER}; sign in through the proxy",
            )
        raw = (headers.get(self.user_header) or "").strip()
        if not raw:
            raise Refused(
                401,
                f"no user: the proxy named none in {self.user_header}; sign in through the proxy",
            )
        if self.user_prefix:
            if not raw.startswith(self.user_prefix):
                raise Refused(
                    401,
                    f"{self.user_header}: {raw[:MAX_NAME]!r} does not start with the prefix "
                    f"{self.user_prefix!r} of --user-prefix",
                )
            raw = raw[len(self.user_prefix) :]
        name = _bounded(raw, self.user_header)
        _reserved(name, "user")
        return User(name, self._groups(headers))

    def _groups(self, headers: Headers) -> tuple[str, ...]:
        if not self.groups_header:
            return ()
        named = [
            g.strip()
            for value in headers.getlist(self.groups_header)
            for g in value.split(",")
            if g.strip()
        ]
        if len(named) > MAX_GROUPS:
            raise Refused(400, f"{self.groups_header}: {len(named)} groups, more than {MAX_GROUPS}")
        for group in named:
            _reserved(_bounded(group, self.groups_header), "group")
        return tuple(dict.fromkeys(g for g in named if g in self.groups))


@dataclass(frozen=True)
class Writer:
    """Sends Experiment writes as the proxy's user (impersonated) or with the UI's own
    credentials."""

    kube: Kube
    mode: WriteMode
    identity: Identity = field(default_factory=Identity)

    def user_of(self, headers: Headers) -> User | None:
        """The proxy's user, or None; refuses when writes are off or the user is unproven."""
        if self.mode == WriteMode.OFF:
            raise Refused(403, "this UI is read-only (started with --writes=off)")
        if self.mode == WriteMode.OWN:
            return None
        return self.identity.user(headers)

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
