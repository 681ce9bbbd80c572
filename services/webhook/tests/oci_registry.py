"""A real OCI registry for the tests: distribution's `registry`, and images pushed without docker.

The binary is `go install`-ed once from the Go module proxy into ~/.cache/kubetune/registry/
(`XDG_CACHE_HOME` honoured). `serving` starts it on a free loopback port (plain HTTP, which the
webhook allows for loopback), with htpasswd basic auth when given users, or bearer tokens from
a small token service (`TokenIssuer`). `push_image` uploads a
config blob and one tiny layer and puts a manifest; `push_index` a multi-arch index over images
already pushed.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt
import urllib3
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from kubetune_testkit.waiting import wait_for
from kubetune_webhook import imagecommand

MODULE = "github.com/distribution/distribution/v3/cmd/registry"
VERSION = "v3.0.0"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def binary() -> Path:
    """The registry binary, built on first use (a minute or two) and cached."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = cache / "kubetune" / "registry" / VERSION / "registry"
    if target.exists():
        return target
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("Go is needed to build the test registry: put `go` on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as gobin:
        env = {**os.environ, "GOBIN": gobin, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
        subprocess.run([go, "install", f"{MODULE}@{VERSION}"], env=env, check=True, cwd=gobin)
        os.replace(Path(gobin) / "registry", target)  # atomic: a half-built file is never seen
    return target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Registry:
    host: str  # 127.0.0.1:<port>, as an image name starts
    auth: tuple[str, str] | None = None
    issuer: TokenIssuer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def v2_url(self, repo: str, *tail: str) -> str:
        """`/v2/<repo>/<tail...>` on this registry; `repo` is checked by the webhook's own image
        grammar (`imagecommand.parse_image` raises for a bad one) and each tail part escaped."""
        checked = imagecommand.parse_image(f"{self.host}/{repo}").repository
        parts = "".join("/" + urllib.parse.quote(part, safe=":") for part in tail)
        return f"{self.url}/v2/{urllib.parse.quote(checked, safe='/')}{parts}"


class TokenIssuer:
    """A token service for the registry's `auth: token` mode: anonymous GETs of its realm get a
    pull token (RS256, its self-signed certificate in `x5c`, the registry's root bundle); the
    scopes asked are kept in `asked`."""

    SERVICE = "kubetune-test-registry"
    ISSUER = "kubetune-test-issuer"

    def __init__(self, directory: Path) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.ISSUER)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.bundle = directory / "token-root.pem"
        self.bundle.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.asked: list[str] = []
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                scope = query.get("scope", [""])[0]
                issuer.asked.append(scope)
                repo = scope.split(":")[1] if scope.count(":") == 2 else ""
                body = json.dumps({"token": issuer.sign(repo, ["pull"])}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass  # the test's output stays the registry's

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.realm = f"http://127.0.0.1:{self.server.server_address[1]}/token"

    def sign(self, repository: str, actions: list[str]) -> str:
        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        der = self.cert.public_bytes(serialization.Encoding.DER)
        header = {"alg": "RS256", "typ": "JWT", "x5c": [base64.b64encode(der).decode()]}
        now = int(time.time())
        claims = {
            "iss": self.ISSUER,
            "sub": "",
            "aud": self.SERVICE,
            "exp": now + 600,
            "nbf": now - 60,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": [{"type": "repository", "name": repository, "actions": actions}],
        }
        signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{b64(signature)}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def serving(
    directory: Path, users: dict[str, str] | None = None, *, tokens: bool = False
) -> Iterator[Registry]:
    """A registry storing under `directory`; `users` (name -> password) switch on basic auth,
    `tokens` bearer tokens from a `TokenIssuer` (as Docker Hub and most registries do)."""
    port = _free_port()
    config: dict[str, Any] = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(directory / "data")}},
        "http": {"addr": f"127.0.0.1:{port}", "secret": "kubetune-test"},
    }
    if users:
        lines = [
            f"{name}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()}"
            for name, password in users.items()
        ]
        (directory / "htpasswd").write_text("\n".join(lines) + "\n")
        config["auth"] = {
            "htpasswd": {"realm": "kubetune-test", "path": str(directory / "htpasswd")}
        }
    issuer = TokenIssuer(directory) if tokens else None
    if issuer is not None:
        config["auth"] = {
            "token": {
                "realm": issuer.realm,
                "service": TokenIssuer.SERVICE,
                "issuer": TokenIssuer.ISSUER,
                "rootcertbundle": str(issuer.bundle),
            }
        }
    (directory / "config.yml").write_text(json.dumps(config))  # JSON is YAML
    log = (directory / "registry.log").open("wb")
    proc = subprocess.Popen(
        [str(binary()), "serve", str(directory / "config.yml")], stdout=log, stderr=log
    )
    credentials = next(iter(users.items())) if users else None
    registry = Registry(f"127.0.0.1:{port}", credentials, issuer)
    try:
        http = urllib3.PoolManager()

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"registry exited: {(directory / 'registry.log').read_text()}")
            try:
                return http.request("GET", f"{registry.url}/v2/", retries=False).status in (
                    200,
                    401,
                )
            except urllib3.exceptions.HTTPError:
                return False

        wait_for("the test registry to answer /v2/", up)
        yield registry
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        if issuer is not None:
            issuer.close()


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def _headers(registry: Registry, repo: str, **extra: str) -> dict[str, str]:
    if registry.issuer:
        extra["Authorization"] = "Bearer " + registry.issuer.sign(repo, ["pull", "push"])
    elif registry.auth:
        pair = ":".join(registry.auth).encode()
        extra["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return extra


def _upload_blob(http: urllib3.PoolManager, registry: Registry, repo: str, data: bytes) -> str:
    digest = _digest(data)
    start = http.request(
        "POST", registry.v2_url(repo, "blobs", "uploads", ""), headers=_headers(registry, repo)
    )
    assert start.status == 202, (start.status, start.data)
    location = start.headers["Location"]
    if location.startswith("/"):
        location = registry.url + location
    sep = "&" if "?" in location else "?"
    done = http.request(
        "PUT",
        f"{location}{sep}digest={digest}",
        body=data,
        headers=_headers(registry, repo, **{"Content-Type": "application/octet-stream"}),
    )
    assert done.status == 201, (done.status, done.data)
    return digest


def _put_manifest(
    http: urllib3.PoolManager, registry: Registry, repo: str, ref: str, body: bytes, media: str
) -> str:
    put = http.request(
        "PUT",
        registry.v2_url(repo, "manifests", ref),
        body=body,
        headers=_headers(registry, repo, **{"Content-Type": media}),
    )
    assert put.status == 201, (put.status, put.data)
    return _digest(body)


def _tiny_layer() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    return gzip.compress(raw.getvalue(), mtime=0)


def push_image(
    registry: Registry,
    repo: str,
    tag: str | None,
    *,
    entrypoint: list[str] | None = None,
    cmd: list[str] | None = None,
    platform: tuple[str, str] = ("linux", "amd64"),
) -> tuple[str, int]:
    """Push an image; (its manifest digest, the manifest's size)."""
    http = urllib3.PoolManager()
    layer = _tiny_layer()
    diff_id = _digest(gzip.decompress(layer))
    inner: dict[str, Any] = {}
    if entrypoint is not None:
        inner["Entrypoint"] = entrypoint
    if cmd is not None:
        inner["Cmd"] = cmd
    config = json.dumps(
        {
            "architecture": platform[1],
            "os": platform[0],
            "config": inner,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
    ).encode()
    config_digest = _upload_blob(http, registry, repo, config)
    layer_digest = _upload_blob(http, registry, repo, layer)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": len(layer)}],
        }
    ).encode()
    digest = _put_manifest(http, registry, repo, tag or _digest(manifest), manifest, OCI_MANIFEST)
    return digest, len(manifest)


def push_index(
    registry: Registry, repo: str, tag: str, images: dict[tuple[str, str], tuple[str, int]]
) -> str:
    """Put a multi-arch index of `images` ((os, arch) -> (digest, size)) under `tag`."""
    http = urllib3.PoolManager()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": digest,
                    "size": size,
                    "platform": {"os": os_name, "architecture": arch},
                }
                for (os_name, arch), (digest, size) in images.items()
            ],
        }
    ).encode()
    return _put_manifest(http, registry, repo, tag, index, OCI_INDEX)


if __name__ == "__main__":  # tox builds the registry before the tests' time limits apply
    print(f"test registry: {binary()}")
