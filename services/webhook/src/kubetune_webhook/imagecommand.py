"""An image's ENTRYPOINT and CMD, read from its registry through the OCI distribution API.

A trial's primary container without `command` runs what its image says; the metrics collector
wraps that command, so the pod webhook must know it. This module reads it as a container
runtime would: GET `/v2/<repository>/manifests/<reference>` (OCI and Docker v2 manifests and
indexes), an index resolved for one platform, then the config blob's `config.Entrypoint` and
`config.Cmd`.

Authentication: anonymous first; a 401 with `WWW-Authenticate: Bearer realm=...` is answered
with a pull token from the realm (with the pull secret's user and password when there is one),
`Basic` with the pull secret. Pull secrets are `kubernetes.io/dockerconfigjson` (or the older
`dockercfg`) `auths` maps.

Bounds: every request has a connect and a read timeout and a response size limit, a whole
lookup a deadline (8 s: under the pod webhook's 10 s timeoutSeconds), and a request follows
at most `MAX_REDIRECTS` redirects (urllib3 drops `Authorization` when one leaves the host). A
config is kept by manifest digest (content-addressed: valid for ever, only the LRU size limits
it); a tag's digest for `tag_seconds`. Both keys include a fingerprint of the credentials used,
so an answer read with one namespace's secret never serves a pod that has no right to it.
Manifests read by digest and config blobs are checked against their digest.

HTTPS always, except for loopback and `.localhost` registries (plain HTTP, as container runtimes
allow them). Every name placed in a URL is first checked against the distribution grammar.

Neighbours: `injecting` (uses the command), `reviewing` (gives the pod's pull secrets).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import urllib3

from kubetune.clock import SYSTEM, Clock
from kubetune_webhook.lookups import TTLCache

DOCKER_HUB = "docker.io"
DOCKER_HUB_HOST = "registry-1.docker.io"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
ACCEPT = ", ".join((*INDEX_TYPES, *MANIFEST_TYPES))
DEFAULT_PLATFORM = ("linux", "amd64")
"""The platform of an index entry when the pod does not pin its node's (Katib's default)."""
MAX_REDIRECTS = 3
MAX_NESTED_INDEXES = 2

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})")
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*|\[[0-9a-fA-F:.]+\])"
)
_PORT = re.compile(r"[0-9]{1,5}")
_CHALLENGE_PARAM = re.compile(r'([A-Za-z]+)="([^"]*)"')


class RegistryError(Exception):
    """The image's config cannot be read; the message names the image, the registry and why.

    `transient` is true when asking again may succeed (unreachable, a server error)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class ImageRef:
    """A parsed image name: `registry` as written (Docker Hub as `docker.io`), `host` dialled."""

    registry: str
    repository: str
    reference: str

    @property
    def host(self) -> str:
        return DOCKER_HUB_HOST if self.registry == DOCKER_HUB else self.registry

    @property
    def is_digest(self) -> bool:
        return _DIGEST.fullmatch(self.reference) is not None


@dataclass(frozen=True)
class ImageCommand:
    """The image config's `Entrypoint` and `Cmd` (empty when unset)."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()

    def argv(self, args: list[str] | None) -> list[str]:
        """What a container without `command` runs: ENTRYPOINT, then its `args` when given,
        else the image's CMD (Kubernetes' rule)."""
        return [*self.entrypoint, *(args if args else self.cmd)]


@dataclass(frozen=True)
class Credentials:
    """User and password for one registry, from a pull secret."""

    username: str
    password: str = field(repr=False)

    def fingerprint(self) -> str:
        return hashlib.sha256(f"{self.username}\0{self.password}".encode()).hexdigest()[:16]


def _valid_host(registry: str) -> bool:
    host, _, port = registry.rpartition(":") if not registry.endswith("]") else (registry, "", "")
    if not host:
        host, port = registry, ""
    if port and _PORT.fullmatch(port) is None:
        return False
    return _HOST.fullmatch(host) is not None


def parse_image(image: str) -> ImageRef:
    """Docker's normalisation: no registry part means Docker Hub (`library/` for one name), no
    tag `latest`; `name:tag@digest` reads by digest. Raises `RegistryError` for a name the
    distribution grammar rejects (it would never reach a URL)."""
    rest, _, digest = image.partition("@")
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        registry, path = first, remainder
    else:
        registry, path = DOCKER_HUB, rest
    if registry.lower() in ("index.docker.io", DOCKER_HUB_HOST):
        registry = DOCKER_HUB
    name, colon, tag = path.rpartition(":") if ":" in path else (path, "", "")
    if registry == DOCKER_HUB and "/" not in name:
        name = f"library/{name}"
    reference = digest or (tag if colon else "latest")
    problem = None
    if registry != DOCKER_HUB and not _valid_host(registry):
        problem = f"registry {registry!r} is not a host[:port]"
    elif _REPOSITORY.fullmatch(name) is None or len(name) > 255:
        problem = f"repository {name!r} is not a valid repository name"
    elif digest and _DIGEST.fullmatch(digest) is None:
        problem = f"digest {digest!r} is not sha256:<64 hex> or sha512:<128 hex>"
    elif not digest and _TAG.fullmatch(reference) is None:
        problem = f"tag {reference!r} is not a valid tag"
    if problem:
        raise RegistryError(
            f"image {image!r} cannot be looked up: {problem}; fix the container's image"
        )
    return ImageRef(registry=registry, repository=name, reference=reference)


def _auth_key(key: str) -> str:
    """A dockerconfigjson `auths` key as a registry: scheme and path dropped, Docker Hub's
    aliases as `docker.io`."""
    host = key.split("://", 1)[-1].split("/", 1)[0].lower()
    if host in ("index.docker.io", DOCKER_HUB_HOST, "docker.io"):
        return DOCKER_HUB
    return host


def credentials_from_secret(secret: Mapping[str, Any]) -> dict[str, Credentials]:
    """Registry -> credentials of a `kubernetes.io/dockerconfigjson` or `dockercfg` Secret;
    entries that cannot be read are skipped (the registry will then say 401)."""
    data = secret.get("data") or {}
    raw = data.get(".dockerconfigjson") or data.get(".dockercfg")
    if not isinstance(raw, str):
        return {}
    try:
        parsed = json.loads(base64.b64decode(raw))
    except (ValueError, binascii.Error):
        return {}
    if not isinstance(parsed, dict):
        return {}
    auths = parsed.get("auths", parsed) if ".dockerconfigjson" in data else parsed
    found: dict[str, Credentials] = {}
    for key, entry in (auths or {}).items():
        if not isinstance(entry, dict):
            continue
        user, password = entry.get("username"), entry.get("password")
        if not (isinstance(user, str) and isinstance(password, str)) and isinstance(
            entry.get("auth"), str
        ):
            try:
                user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            except (ValueError, binascii.Error, UnicodeDecodeError):
                continue
        if isinstance(user, str) and isinstance(password, str) and user:
            found.setdefault(_auth_key(str(key)), Credentials(user, password))
    return found


def merge_credentials(secrets: Iterable[Mapping[str, Any]]) -> dict[str, Credentials]:
    """The first secret naming a registry wins (the pod's own before its ServiceAccount's)."""
    merged: dict[str, Credentials] = {}
    for secret in secrets:
        for registry, creds in credentials_from_secret(secret).items():
            merged.setdefault(registry, creds)
    return merged


def _plain_http(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass
class _Response:
    status: int
    headers: Mapping[str, str]
    body: bytes


class RegistryClient:
    """Reads image commands; one instance per webhook process (it holds the caches)."""

    def __init__(
        self,
        *,
        connect_seconds: float = 3.0,
        read_seconds: float = 5.0,
        deadline_seconds: float = 8.0,
        max_bytes: int = 4 << 20,
        cache_size: int = 512,
        tag_seconds: float = 60.0,
        clock: Clock = SYSTEM,
        pool: urllib3.PoolManager | None = None,
    ) -> None:
        self.connect_seconds = connect_seconds
        self.read_seconds = read_seconds
        self.deadline_seconds = deadline_seconds
        self.clock = clock
        self.max_bytes = max_bytes
        self.pool = pool or urllib3.PoolManager(num_pools=16, maxsize=2)
        self._by_digest = TTLCache(float("inf"), cache_size, clock)
        self._by_tag = TTLCache(tag_seconds, cache_size, clock)

    def image_command(
        self,
        image: str,
        credentials: Mapping[str, Credentials] | None = None,
        platform: tuple[str, str] = DEFAULT_PLATFORM,
    ) -> ImageCommand:
        """The image's ENTRYPOINT and CMD. Raises `RegistryError` naming image and registry."""
        ref = parse_image(image)
        creds = (credentials or {}).get(ref.registry)
        who = creds.fingerprint() if creds else ""
        digest = ref.reference if ref.is_digest else self._by_tag.get((ref, who, platform))
        if digest is not None:
            found = self._by_digest.get((ref.registry, ref.repository, digest, who, platform))
            if found is not None:
                return found  # type: ignore[no-any-return]
        session = _Session(self, ref, image, creds)
        digest, command = session.resolve(platform)
        if not ref.is_digest:
            self._by_tag.put((ref, who, platform), digest)
        self._by_digest.put((ref.registry, ref.repository, digest, who, platform), command)
        return command

    def request(self, url: str, headers: dict[str, str], deadline: float) -> _Response:
        """One bounded GET, over by `deadline` (this clock's monotonic seconds); network
        failures raise urllib3's errors, the deadline `_Late`."""
        remaining = deadline - self.clock.monotonic()
        if remaining <= 0:
            raise _Late()
        resp = self.pool.request(
            "GET",
            url,
            headers=headers,
            timeout=urllib3.Timeout(
                connect=min(self.connect_seconds, remaining),
                read=min(self.read_seconds, remaining),
            ),
            retries=urllib3.Retry(
                total=None,
                connect=0,
                read=0,
                status=0,
                other=0,
                redirect=MAX_REDIRECTS,
                raise_on_redirect=True,
            ),
            preload_content=False,
        )
        try:
            declared = resp.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
                raise _TooLarge(int(declared))
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.stream(64 << 10):
                size += len(chunk)
                if size > self.max_bytes:
                    raise _TooLarge(size)
                if self.clock.monotonic() > deadline:
                    raise _Late()
                chunks.append(chunk)
            return _Response(resp.status, dict(resp.headers), b"".join(chunks))
        finally:
            resp.release_conn()


class _Late(Exception):
    """The lookup's deadline passed."""


class _TooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class _Session:
    """One lookup: the token the registry gave for this repository is reused for every GET."""

    def __init__(
        self, client: RegistryClient, ref: ImageRef, image: str, creds: Credentials | None
    ) -> None:
        self.client = client
        self.ref = ref
        self.image = image
        self.creds = creds
        scheme = "http" if _plain_http(ref.host) else "https"
        self.base = f"{scheme}://{ref.host}/v2/{urllib.parse.quote(ref.repository, safe='/')}"
        self.authorization: str | None = None
        self.deadline = client.clock.monotonic() + client.deadline_seconds

    def fail(self, why: str, *, transient: bool = False) -> RegistryError:
        hint = (
            "retry"
            if transient
            else "check the image name, or give the pod an imagePullSecret for this registry, "
            "or set `command` on the container"
        )
        return RegistryError(
            f"cannot read the ENTRYPOINT and CMD of image {self.image!r} from registry "
            f"{self.ref.registry}: {why}; {hint}",
            transient=transient,
        )

    def resolve(self, platform: tuple[str, str]) -> tuple[str, ImageCommand]:
        """(the manifest digest of the reference as asked, the command)."""
        reference = self.ref.reference
        top_digest: str | None = None
        for _ in range(MAX_NESTED_INDEXES + 1):
            body, media_type, digest = self.manifest(reference)
            top_digest = top_digest or digest
            manifest = self.json(body, "manifest")
            media_type = str(manifest.get("mediaType") or media_type).split(";")[0].strip()
            if media_type in INDEX_TYPES or "manifests" in manifest:
                reference = self.pick(manifest, platform)
                continue
            if media_type in MANIFEST_TYPES or "config" in manifest:
                return top_digest, self.command(manifest)
            raise self.fail(f"unsupported manifest type {media_type!r} (schema 1 is not read)")
        raise self.fail("indexes nested too deeply")

    def manifest(self, reference: str) -> tuple[bytes, str, str]:
        path = urllib.parse.quote(reference, safe=":")
        resp = self.get(f"{self.base}/manifests/{path}", "manifest", accept=ACCEPT)
        digest = hashlib.sha256(resp.body).hexdigest()
        if reference.startswith("sha256:") and reference != f"sha256:{digest}":
            raise self.fail(f"manifest {reference} does not match its digest")
        media_type = next((v for k, v in resp.headers.items() if k.lower() == "content-type"), "")
        return resp.body, media_type, f"sha256:{digest}"

    def pick(self, index: dict[str, Any], platform: tuple[str, str]) -> str:
        want_os, want_arch = platform
        entries = [m for m in index.get("manifests") or [] if isinstance(m, dict)]
        offered = []
        for entry in entries:
            plat = entry.get("platform") or {}
            offered.append(f"{plat.get('os')}/{plat.get('architecture')}")
            if plat.get("os") == want_os and plat.get("architecture") == want_arch:
                digest = str(entry.get("digest") or "")
                if _DIGEST.fullmatch(digest) is None:
                    raise self.fail(f"index entry for {want_os}/{want_arch} has no valid digest")
                return digest
        raise self.fail(
            f"the image index has no {want_os}/{want_arch} image (it has: "
            f"{', '.join(offered) or 'none'})"
        )

    def command(self, manifest: dict[str, Any]) -> ImageCommand:
        config = manifest.get("config") or {}
        digest = str(config.get("digest") or "") if isinstance(config, dict) else ""
        if _DIGEST.fullmatch(digest) is None:
            raise self.fail("the manifest has no valid config digest")
        resp = self.get(f"{self.base}/blobs/{digest}", "config blob")
        algorithm, _, expected = digest.partition(":")
        if hashlib.new(algorithm, resp.body).hexdigest() != expected:
            raise self.fail(f"config blob {digest} does not match its digest")
        blob = self.json(resp.body, "config blob")
        inner = blob.get("config") or {}
        if not isinstance(inner, dict):
            inner = {}
        return ImageCommand(
            entrypoint=tuple(str(a) for a in inner.get("Entrypoint") or []),
            cmd=tuple(str(a) for a in inner.get("Cmd") or []),
        )

    def json(self, body: bytes, what: str) -> dict[str, Any]:
        try:
            parsed = json.loads(body)
        except ValueError as e:
            raise self.fail(f"the {what} is not JSON: {e}") from e
        if not isinstance(parsed, dict):
            raise self.fail(f"the {what} is not a JSON object")
        return parsed

    def get(self, url: str, what: str, accept: str | None = None) -> _Response:
        headers = {"Accept": accept} if accept else {}
        resp = self.send(url, headers, what)
        if resp.status == 401 and self.authorization is None:
            self.authorization = self.authenticate(resp.headers)
            resp = self.send(url, headers, what)
        if resp.status == 200:
            return resp
        if resp.status in (401, 403):
            how = "with the pull secret's credentials" if self.creds else "anonymously"
            raise self.fail(f"HTTP {resp.status}: access to the {what} denied {how}")
        if resp.status == 404:
            raise self.fail(f"HTTP 404: the {what} does not exist ({_error_code(resp.body)})")
        raise self.fail(f"HTTP {resp.status} reading the {what}", transient=resp.status >= 500)

    def send(self, url: str, headers: dict[str, str], what: str) -> _Response:
        if self.authorization:
            headers = {**headers, "Authorization": self.authorization}
        try:
            return self.client.request(url, headers, self.deadline)
        except _Late as e:
            late = f"no answer within {self.client.deadline_seconds:g} s"
            raise self.fail(late, transient=True) from e
        except _TooLarge as e:
            raise self.fail(f"the {what} is over {self.client.max_bytes} bytes ({e.size})") from e
        except urllib3.exceptions.MaxRetryError as e:
            raise self.fail(f"too many redirects or unreachable: {e.reason}", transient=True) from e
        except urllib3.exceptions.HTTPError as e:
            raise self.fail(f"unreachable: {e}", transient=True) from e

    def basic(self) -> str | None:
        if self.creds is None:
            return None
        pair = f"{self.creds.username}:{self.creds.password}".encode()
        return "Basic " + base64.b64encode(pair).decode()

    def authenticate(self, headers: Mapping[str, str]) -> str:
        """The Authorization header the registry's 401 challenge asks for."""
        challenge = next(
            (v for k, v in headers.items() if k.lower() == "www-authenticate"), ""
        ).strip()
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            basic = self.basic()
            if basic is None:
                raise self.fail(
                    "the registry asks for a user and password and the pod has no "
                    "imagePullSecret for it"
                )
            return basic
        if scheme != "bearer":
            raise self.fail(f"unsupported authentication challenge {challenge[:80]!r}")
        params = dict(_CHALLENGE_PARAM.findall(challenge))
        realm = params.get("realm", "")
        if urllib.parse.urlsplit(realm).scheme not in ("http", "https"):
            raise self.fail(f"the token realm {realm[:80]!r} is not an http(s) URL")
        query = {"scope": f"repository:{self.ref.repository}:pull"}
        if params.get("service"):
            query["service"] = params["service"]
        sep = "&" if urllib.parse.urlsplit(realm).query else "?"
        url = f"{realm}{sep}{urllib.parse.urlencode(query)}"
        basic = self.basic()
        try:
            resp = self.client.request(
                url, {"Authorization": basic} if basic else {}, self.deadline
            )
        except _Late as e:
            late = f"no token within {self.client.deadline_seconds:g} s"
            raise self.fail(late, transient=True) from e
        except _TooLarge as e:
            raise self.fail(f"the token answer is over {self.client.max_bytes} bytes") from e
        except urllib3.exceptions.HTTPError as e:
            raise self.fail(f"token service {realm} unreachable: {e}", transient=True) from e
        if resp.status != 200:
            raise self.fail(
                f"token service {realm} answered HTTP {resp.status}",
                transient=resp.status >= 500,
            )
        answer = self.json(resp.body, "token answer")
        token = answer.get("token") or answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise self.fail(f"token service {realm} gave no token")
        return f"Bearer {token}"


def _error_code(body: bytes) -> str:
    """The registry's error code (MANIFEST_UNKNOWN, NAME_UNKNOWN...), or 'not found'."""
    try:
        errors = json.loads(body).get("errors") or []
        return ", ".join(str(e.get("code")) for e in errors if isinstance(e, dict)) or "not found"
    except (ValueError, AttributeError):
        return "not found"
