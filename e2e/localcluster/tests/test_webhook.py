"""The apiserver really calls admission webhooks (URL form, TLS verified by caBundle)."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kubernetes import client

from localcluster import certs
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration


class _Handler(BaseHTTPRequestHandler):
    """Denies ConfigMaps whose name starts with ``deny-``; records every review."""

    seen: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = review["request"]
        name = req["object"]["metadata"]["name"]
        _Handler.seen.append(name)
        allowed = not name.startswith("deny-")
        response: dict[str, Any] = {"uid": req["uid"], "allowed": allowed}
        if not allowed:
            response["status"] = {"code": 403, "message": f"test webhook refuses {name}"}
        body = json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Keep test output quiet."""


@pytest.fixture
def webhook_server(tmp_path: Path) -> Iterator[tuple[str, bytes]]:
    ca = certs.make_ca("test-webhook-ca")
    leaf = certs.issue(ca, "webhook", server=True, dns=("localhost",), ips=("127.0.0.1",))
    crt, key = leaf.write(tmp_path, "webhook")
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(crt), str(key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/validate", ca.cert_pem
    finally:
        server.shutdown()
        server.server_close()


def test_validating_webhook_is_called(
    cluster: ClusterHandle, namespace: str, webhook_server: tuple[str, bytes]
) -> None:
    url, ca_pem = webhook_server
    api = cluster.api_client()
    adm: Any = client.AdmissionregistrationV1Api(api)
    core: Any = client.CoreV1Api(api)
    name = f"deny-test-{namespace}"[:63]
    adm.create_validating_webhook_configuration(
        client.V1ValidatingWebhookConfiguration(
            metadata=client.V1ObjectMeta(name=name),
            webhooks=[
                client.V1ValidatingWebhook(
                    name="deny.test.kubetune.io",
                    admission_review_versions=["v1"],
                    side_effects="None",
                    failure_policy="Fail",
                    client_config=client.AdmissionregistrationV1WebhookClientConfig(
                        url=url, ca_bundle=base64.b64encode(ca_pem).decode()
                    ),
                    namespace_selector=client.V1LabelSelector(
                        match_labels={"kubernetes.io/metadata.name": namespace}
                    ),
                    rules=[
                        client.V1RuleWithOperations(
                            api_groups=[""],
                            api_versions=["v1"],
                            operations=["CREATE"],
                            resources=["configmaps"],
                        )
                    ],
                )
            ],
        )
    )
    try:
        # The webhook configuration reaches the admission plugin asynchronously.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                core.create_namespaced_config_map(
                    namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="deny-me"))
                )
                core.delete_namespaced_config_map("deny-me", namespace)
            except client.ApiException as exc:
                assert exc.status == 403
                assert "test webhook refuses deny-me" in str(exc.body)
                break
            time.sleep(0.3)
        else:
            raise AssertionError("the webhook never denied deny-me")
        core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="allowed"))
        )
        assert "allowed" in _Handler.seen
    finally:
        adm.delete_validating_webhook_configuration(name)
