"""The only module that imports the `kubernetes` client at run time: connection and raw resource
access (`jobfields` reads the client's models only to generate its table).

Controllers handle objects as plain dicts of any group/version/kind (a Trial's job can be any
custom resource), so this module speaks in `Resource` (group, version, plural) and paths, and
maps the client's exceptions to `kubetune.errors` with the cause chained.
"""

from __future__ import annotations

import builtins
import os

from kubetune import errors, lightjson, urlparts
from kubetune.incluster import InCluster, NotInCluster, Timeout
from kubetune.plain import Frozen
from kubetune.typenames import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any, overload

    import kubernetes.client
    import urllib3

# The `kubernetes` package (and urllib3, its HTTP client) is imported only where a kubeconfig
# or its typed models are used: its import costs about 0.35 s of CPU, which a trial pod's
# collector should not pay (`kubetune.incluster` reaches the API server with the standard
# library).

if TYPE_CHECKING:
    Obj = dict[str, Any]
    ObjectHook = Callable[[dict[str, Any]], Any]
    """A `json.loads` object_hook: called on every JSON object as it is parsed, innermost
    first, so a big field can be dropped while one object is parsed rather than after a whole
    list."""
else:  # the same names at run time, for modules that import them (collections.abc's
    # Callable is _collections_abc's, loaded with the interpreter: no collections package)
    from _collections_abc import Callable

    Obj = dict[str, object]
    ObjectHook = Callable[[dict[str, object]], object]

# The name rules, checked by hand rather than by regex: compiling the three regexes was a
# sizeable part of `import kubetune.kube`, paid by the collector in every trial pod.
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_LABEL_CHARS = _LOWER | frozenset("0123456789-")


def _is_label(value: str) -> bool:
    """A DNS-1123 label's characters: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`."""
    return bool(value) and _LABEL_CHARS.issuperset(value) and value[0] != "-" and value[-1] != "-"


def _is_subdomain(value: str) -> bool:
    """DNS-1123 labels joined by dots."""
    return all(_is_label(part) for part in value.split("."))


def _is_subresource(value: str) -> bool:
    """Lowercase words joined by `/` (`status`, `scale`)."""
    return all(part and _LOWER.issuperset(part) for part in value.split("/"))


def _checked(value: str, what: str, valid: Callable[[str], bool], limit: int, rule: str) -> str:
    if not isinstance(value, str) or len(value) > limit or not valid(value):
        raise errors.InvalidName(
            f"{what} {value!r} is not valid: it must be {rule} of at most {limit} characters; "
            "it was not sent to the API server"
        )
    return value


_LABEL_RULE = "a DNS-1123 label (lowercase letters, digits and '-')"
_SUBDOMAIN_RULE = "a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')"


def object_name(name: str) -> str:
    """`name` if it is a DNS-1123 subdomain (every object kubetune reads or writes), else
    `errors.InvalidName`: a name goes into a URL, so `..`, `/` or `%` must never pass."""
    return _checked(name, "object name", _is_subdomain, 253, _SUBDOMAIN_RULE)


def namespace_name(namespace: str) -> str:
    """`namespace` if it is a DNS-1123 label, else `errors.InvalidName`."""
    return _checked(namespace, "namespace", _is_label, 63, _LABEL_RULE)


def api_group(group: str) -> str:
    """An API group ("" for core) if it is a DNS-1123 subdomain, else `errors.InvalidName`."""
    return group and _checked(group, "API group", _is_subdomain, 253, _SUBDOMAIN_RULE)


def api_version_part(version: str) -> str:
    """An API version (`v1`, `v1beta1`) if it is a DNS-1123 label, else `errors.InvalidName`."""
    return _checked(version, "API version", _is_label, 63, _LABEL_RULE)


def _segment(value: str) -> str:
    """Percent-escape one path segment (a no-op once validated; kept as the last defence)."""
    return urlparts.quote(value)


def group_version_path(group: str, version: str) -> str:
    """`/apis/<group>/<version>` or `/api/<version>`, both checked and escaped."""
    group, version = _segment(api_group(group)), _segment(api_version_part(version))
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


class Resource(Frozen):
    """A REST resource: `group` is "" for the core API."""

    __slots__ = ("group", "kind", "namespaced", "plural", "version")

    def __init__(
        self, group: str, version: str, plural: str, kind: str, namespaced: bool = True
    ) -> None:
        self.group = group
        self.version = version
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        """The REST path. Every part is validated and escaped: raises `errors.InvalidName`."""
        base = group_version_path(self.group, self.version)
        if self.namespaced and namespace:
            base += f"/namespaces/{_segment(namespace_name(namespace))}"
        base += f"/{_segment(_checked(self.plural, 'resource', _is_label, 63, _LABEL_RULE))}"
        if name:
            base += f"/{_segment(object_name(name))}"
        if sub:
            _checked(sub, "subresource", _is_subresource, 63, "lowercase words separated by '/'")
            base += "/" + "/".join(_segment(part) for part in sub.split("/"))
        return base


# Every resource kubetune's services touch, named once (tests and bench use these too); only the
# stand-in kinds a test invents are defined beside that test.
EXPERIMENTS = Resource("kubeflow.org", "v1beta1", "experiments", "Experiment")
SUGGESTIONS = Resource("kubeflow.org", "v1beta1", "suggestions", "Suggestion")
TRIALS = Resource("kubeflow.org", "v1beta1", "trials", "Trial")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PODS = Resource("", "v1", "pods", "Pod")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event")
SERVICES = Resource("", "v1", "services", "Service")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
JOBS = Resource("batch", "v1", "jobs", "Job")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
_RBAC = "rbac.authorization.k8s.io"
ROLES = Resource(_RBAC, "v1", "roles", "Role")
ROLE_BINDINGS = Resource(_RBAC, "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES = Resource(_RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(
    _RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
TOKEN_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False
)
_ADMISSION = "admissionregistration.k8s.io"
MUTATING_WEBHOOK_CONFIGURATIONS = Resource(
    _ADMISSION,
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_WEBHOOK_CONFIGURATIONS = Resource(
    _ADMISSION,
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
NETWORK_POLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
VALIDATING_ADMISSION_POLICIES = Resource(
    _ADMISSION,
    "v1",
    "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy",
    namespaced=False,
)
VALIDATING_ADMISSION_POLICY_BINDINGS = Resource(
    _ADMISSION,
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    namespaced=False,
)
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)


if TYPE_CHECKING:
    # Overloads for mypy only.
    @overload
    def connect(
        kubeconfig: str, context: str | None = None, *, pool_size: int | None = None
    ) -> kubernetes.client.ApiClient: ...

    @overload
    def connect(
        kubeconfig: None = None, context: str | None = None, *, pool_size: int | None = None
    ) -> kubernetes.client.ApiClient | InCluster: ...


def connect(
    kubeconfig: str | None = None, context: str | None = None, *, pool_size: int | None = None
) -> kubernetes.client.ApiClient | InCluster:
    """A client from the kubeconfig given, else `$KUBECONFIG`/`~/.kube/config`, else in-cluster
    (then without the `kubernetes` package, `kubetune.incluster`).

    `pool_size`: connections kept open to the API server, at least the number of threads that
    call it at once (beyond the pool each call opens and drops a TLS connection).
    """
    if not kubeconfig and not _default_kubeconfig():
        try:
            return InCluster.from_environment(pool_size=pool_size)
        except NotInCluster:
            pass  # the client's loader says what is missing, as before
    import kubernetes.client
    import kubernetes.config

    configuration = kubernetes.client.Configuration()
    if pool_size is not None:
        configuration.connection_pool_maxsize = pool_size
    if kubeconfig:
        kubernetes.config.load_kube_config(kubeconfig, context, configuration)  # type: ignore[no-untyped-call]
    else:
        try:
            kubernetes.config.load_kube_config(None, context, configuration)  # type: ignore[no-untyped-call]
        except kubernetes.config.ConfigException:
            kubernetes.config.load_incluster_config(configuration)  # type: ignore[no-untyped-call]
    return kubernetes.client.ApiClient(configuration)


def _default_kubeconfig() -> bool:
    """Whether the kubernetes client would find a kubeconfig without being given one."""
    # expanduser, not Path.home(): a pod's user may have no home, which Path.home() raises on.
    return bool(os.environ.get("KUBECONFIG")) or os.path.exists(
        os.path.expanduser("~/.kube/config")
    )


class Response(Protocol):
    """A response as `Kube` reads it from any transport (urllib3's has this shape): `data`
    whole or `stream` in chunks, then `release_conn`."""

    @property
    def status(self) -> int: ...

    @property
    def reason(self) -> str | None: ...

    @property
    def data(self) -> bytes: ...

    def stream(self, amt: int, decode_content: bool = ...) -> Iterator[bytes]: ...

    def release_conn(self) -> None: ...


class Transport(Protocol):
    """What carries `Kube`'s requests: the kubernetes client's pool for a kubeconfig
    (`_Client`), the standard library in a pod (`kubetune.incluster.InCluster`). It adds the
    credentials; the request, the answer's parsing and error mapping are `Kube`'s alone."""

    def send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        timeout: Timeout,
    ) -> Response: ...


class _Client:
    """Requests prepared by a `kubernetes` client: its kubeconfig's auth (token refresh of
    exec plugins included), proxy and default headers, sent through its urllib3 pool."""

    def __init__(self, api: kubernetes.client.ApiClient) -> None:
        self.api = api
        self.pool: urllib3.PoolManager = api.rest_client.pool_manager

    def send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        timeout: Timeout,
    ) -> urllib3.BaseHTTPResponse:
        import urllib3

        first: dict[str, str] = {}  # through the client; a name's repeats added after
        repeats: builtins.list[tuple[str, str]] = []
        for name, value in headers:
            if name in first:
                repeats.append((name, value))
            else:
                first[name] = value
        _, url, prepared, _, _ = self.api.param_serialize(
            method,
            path,
            query_params=builtins.list(query),
            header_params=first,
            auth_settings=["BearerToken"],
        )
        sent = urllib3.HTTPHeaderDict(prepared)
        for name, value in repeats:
            sent.add(name, value)
        if timeout is None:
            limit = None
        elif isinstance(timeout, tuple):
            limit = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        else:
            limit = urllib3.Timeout(total=timeout)
        return self.pool.request(
            method, url, headers=sent, body=body, timeout=limit, preload_content=False
        )


def _query_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _error_from_body(status: int, reason: str, text: str) -> errors.ApiError:
    """Map an error answer to our error class, using the Status object's reason and message."""
    message = text
    try:
        body = lightjson.loads(text or "{}")
        reason = body.get("reason", reason) or reason
        message = body.get("message", message) or message
    except (ValueError, TypeError, AttributeError):
        pass
    return errors.from_status(status, reason, message)


class Kube:
    """Typed-enough access to any resource, returning and taking plain JSON dicts."""

    def __init__(self, api: kubernetes.client.ApiClient | InCluster) -> None:
        self.api = api
        self._transport: Transport = api if isinstance(api, InCluster) else _Client(api)

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str],
        extra_headers: Sequence[tuple[str, str]] = (),
        timeout: Timeout = 30,
    ) -> Response:
        """One request, its response unread. Connection failures raise the transport's
        errors (urllib3's through a kubeconfig, `OSError` in a pod)."""
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        data = None if body is None else lightjson.dumps(body).encode()
        sent = [*headers.items(), *extra_headers]
        return self._transport.send(method, path, params, sent, data, timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        extra_headers: Sequence[tuple[str, str]] = (),
    ) -> Obj:
        """One request to any path with headers of the caller's (the UI's impersonated
        writes); its JSON answer. An error answer raises `errors.ApiError`."""
        result: Obj = self._call(
            method, path, body=body, content_type=content_type, extra_headers=extra_headers
        )
        return result

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Timeout = 30,
        stream: bool = False,
        object_hook: ObjectHook | None = None,
        sizes: builtins.list[int] | None = None,
        extra_headers: Sequence[tuple[str, str]] = (),
    ) -> Any:
        """One request; the JSON answer parsed (`object_hook` as in `json.loads`), its size
        in bytes appended to `sizes` when given; with `stream` the raw response."""
        raw = self._send(
            method,
            path,
            query=query,
            body=body,
            headers={"Accept": "application/json", "Content-Type": content_type},
            extra_headers=extra_headers,
            timeout=timeout,
        )
        if raw.status >= 300:
            text = raw.data.decode(errors="replace")
            raw.release_conn()
            raise _error_from_body(raw.status, str(raw.reason), text)
        if stream:
            return raw
        data = raw.data
        raw.release_conn()
        if sizes is not None:
            sizes.append(len(data or b""))
        return lightjson.loads(data, object_hook=object_hook) if data else {}

    def get(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float = 30,
        subresource: str = "",
    ) -> Obj:
        """The object; with `subresource` (e.g. "status") read through it, which RBAC grants
        apart (a trial pod may read its Trial only through trials/status)."""
        result: Obj = self._call("GET", res.path(namespace, name, subresource), timeout=timeout)
        return result

    def get_or_none(
        self, res: Resource, name: str, namespace: str | None = None, *, timeout: float = 30
    ) -> Obj | None:
        try:
            return self.get(res, name, namespace, timeout=timeout)
        except errors.NotFound:
            return None

    def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        object_hook: ObjectHook | None = None,
        sizes: builtins.list[int] | None = None,
    ) -> Obj:
        """One page (`limit`, `continue_token`); `object_hook` and `sizes` as in `_call`."""
        result: Obj = self._call(
            "GET",
            res.path(namespace),
            query={
                "labelSelector": label_selector,
                "fieldSelector": field_selector,
                "limit": limit,
                "continue": continue_token,
                "resourceVersion": resource_version,
            },
            object_hook=object_hook,
            sizes=sizes,
        )
        return result

    def pages(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        limit: int | None = None,
    ) -> Iterator[builtins.list[Obj]]:
        """The items a page at a time (each read only when the previous one was used), at
        most `limit` in all, following `continue`."""
        token: str | None = None
        left = limit
        while left is None or left > 0:
            page = self.list(
                res,
                namespace,
                limit=page_size if left is None else min(page_size, left),
                continue_token=token,
                label_selector=label_selector,
                field_selector=field_selector,
            )
            items: builtins.list[Obj] = page.get("items") or []
            yield items
            if left is not None:
                left -= len(items)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def list_all(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[Obj]:
        """Every item, following `continue` pages of 500."""
        pages = self.pages(
            res, namespace, label_selector=label_selector, field_selector=field_selector
        )
        return [item for page in pages for item in page]

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        label_selector: str | None = None,
        field_selector: str | None = None,
        object_hook: ObjectHook | None = None,
    ) -> Iterator[Obj]:
        """Watch events (`{"type", "object"}`) with bookmarks; ends when the server closes it.
        Each event is parsed with `object_hook` (see `ObjectHook`)."""
        response = self._call(
            "GET",
            res.path(namespace),
            query={
                "watch": "true",
                "allowWatchBookmarks": "true",
                "resourceVersion": resource_version,
                "timeoutSeconds": timeout_seconds,
                "labelSelector": label_selector,
                "fieldSelector": field_selector,
            },
            timeout=(10, timeout_seconds + 30),
            stream=True,
        )
        buffer = b""
        try:
            for chunk in response.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield lightjson.loads(line, object_hook=object_hook)
        finally:
            response.release_conn()

    def create(
        self,
        res: Resource,
        body: Obj,
        namespace: str | None = None,
        *,
        timeout: float = 30,
        dry_run: bool = False,
    ) -> Obj:
        """POST the object; `dry_run` runs admission and validation without storing it."""
        query = {"dryRun": "All"} if dry_run else None
        result: Obj = self._call(
            "POST", res.path(namespace), query=query, body=body, timeout=timeout
        )
        return result

    def replace(
        self, res: Resource, body: Obj, namespace: str | None = None, *, timeout: float = 30
    ) -> Obj:
        name = body["metadata"]["name"]
        result: Obj = self._call("PUT", res.path(namespace, name), body=body, timeout=timeout)
        return result

    def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        subresource: str = "",
        patch_type: str = "merge",
    ) -> Obj:
        """Patch an object or a subresource (`status`): `merge`, `json` or `strategic`."""
        content_type = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[patch_type]
        result: Obj = self._call(
            "PATCH", res.path(namespace, name, subresource), body=patch, content_type=content_type
        )
        return result

    def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str | None = None,
        uid: str | None = None,
        grace_seconds: int | None = None,
    ) -> None:
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            body["propagationPolicy"] = propagation
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        self._call("DELETE", res.path(namespace, name), body=body)

    def pod_log(
        self,
        name: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
    ) -> str:
        """A container's log as text (the kubelet's answer, proxied by the API server)."""
        raw = self._send(
            "GET",
            PODS.path(namespace, name, "log"),
            query={"container": container, "tailLines": tail_lines},
            headers={"Accept": "*/*"},
        )
        text = raw.data.decode(errors="replace")
        raw.release_conn()
        if raw.status >= 300:
            raise _error_from_body(raw.status, str(raw.reason), text)
        return str(text)

    def resource_for(self, api_version: str, kind: str) -> Resource:
        """Find a kind's plural and scope through discovery.

        Raises:
            NotFound: the group/version is not served or has no such kind.
            InvalidName: `api_version` is not `<group>/<version>` or `<version>` (never sent).
        """
        group, _, version = api_version.rpartition("/")
        listing = self._call("GET", group_version_path(group, version))
        for entry in listing.get("resources") or []:
            if entry.get("kind") == kind and "/" not in entry.get("name", ""):
                return Resource(group, version, entry["name"], kind, bool(entry.get("namespaced")))
        raise errors.NotFound(404, "NotFound", f"kind {kind} is not served by {api_version}")
