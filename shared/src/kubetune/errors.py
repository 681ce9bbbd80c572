"""kubetune's error classes: what a reconcile raises decides what the runtime does next.

`TemporaryError` retries after its delay, `TerminalError` is logged and not retried, any other
exception retries with per-key exponential backoff. API errors are mapped from the client's
exception (with the cause chained) so callers never import the client to tell them apart.
"""

from __future__ import annotations


class TemporaryError(Exception):
    """Retry this key after `delay` seconds (no backoff growth)."""

    def __init__(self, message: str, delay: float = 1.0) -> None:
        super().__init__(message)
        self.delay = delay


class TerminalError(Exception):
    """Retrying cannot help (bad input); log it and stop until the object changes."""


class InvalidName(ValueError):
    """A name, namespace, group, version or resource that is not a valid Kubernetes one.

    Raised before any request is made: such a string would change the URL it is put into
    (`../`, `/`, `%`), so it is never sent.
    """


class ApiError(Exception):
    """An error answer from the API server."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class AlreadyExists(Conflict):
    pass


class Gone(ApiError):
    """410: the resourceVersion a watch asked for is compacted away; relist."""


class Forbidden(ApiError):
    pass


class Invalid(ApiError):
    pass


def from_status(status: int, reason: str, message: str) -> ApiError:
    """The ApiError subclass for an HTTP status and the Status object's reason."""
    if status == 404:
        return NotFound(status, reason, message)
    if status == 409:
        if reason == "AlreadyExists":
            return AlreadyExists(status, reason, message)
        return Conflict(status, reason, message)
    if status == 410:
        return Gone(status, reason, message)
    if status == 403:
        return Forbidden(status, reason, message)
    if status == 422:
        return Invalid(status, reason, message)
    return ApiError(status, reason, message)


def is_namespace_terminating(e: ApiError) -> bool:
    """A create refused because its namespace is being deleted (403, cause
    NamespaceTerminating): nothing to retry, the objects are going away with the namespace."""
    return e.status == 403 and "because it is being terminated" in e.message


def is_too_large(e: ApiError) -> bool:
    """A write refused for its size: the API server's body limit (413) or etcd's request limit
    (`etcdserver: request is too large`, which the API server passes on as a 500)."""
    return e.status == 413 or "too large" in e.message.lower()
