"""The HTTPS server on loopback: bad input answered with 400 or a denial, and it keeps serving."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from webhook_cases import StaticCluster, experiment, pod, review

from kubetune import config as katib_config
from kubetune_webhook import certificates, main, reviewing, serving


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    assert (
        main.main(["certs", "--out-dir", str(d), "--dns-name", "localhost", "--ip", "127.0.0.1"])
        == 0
    )
    return d


@pytest.fixture
def server(cert_dir: Path) -> Iterator[serving.AdmissionServer]:
    certs = serving.CertificateStore(str(cert_dir / "tls.crt"), str(cert_dir / "tls.key"), 0.0)
    admission = reviewing.Admission(katib_config.default(), StaticCluster())
    srv = serving.AdmissionServer(("127.0.0.1", 0), certs, admission.handle, max_body=64 * 1024)
    serving.serve(srv)
    yield srv
    srv.shutdown()
    srv.server_close()


def _connect(srv: serving.AdmissionServer, cert_dir: Path) -> http.client.HTTPSConnection:
    ctx = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    return http.client.HTTPSConnection("127.0.0.1", srv.server_address[1], context=ctx, timeout=10)


def _post(conn: http.client.HTTPSConnection, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def _healthy(srv: serving.AdmissionServer, cert_dir: Path) -> bool:
    conn = _connect(srv, cert_dir)
    conn.request("GET", "/healthz")
    ok = conn.getresponse().status == 200
    conn.close()
    return ok


BAD_BODIES = [
    ("not-json", b"{this is not json", "request body is not JSON"),
    ("json-list", b"[1, 2]", "expected an admission.k8s.io/v1 AdmissionReview object, got list"),
    (
        "v1beta1-review",
        json.dumps({**review({}, "Experiment"), "apiVersion": "admission.k8s.io/v1beta1"}).encode(),
        "got apiVersion 'admission.k8s.io/v1beta1'",
    ),
    (
        "no-uid",
        json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}
        ).encode(),
        "no request.uid",
    ),
    ("empty", b"", "request body is not JSON"),
]


@pytest.mark.parametrize(
    ("body", "message"), [c[1:] for c in BAD_BODIES], ids=[c[0] for c in BAD_BODIES]
)
def test_bad_bodies_get_400_and_the_server_keeps_serving(
    server: serving.AdmissionServer, cert_dir: Path, body: bytes, message: str
) -> None:
    conn = _connect(server, cert_dir)
    for path in reviewing.PATHS:
        status, answer = _post(conn, path, body)
        assert status == 400
        assert message in answer["error"]
    # Same keep-alive connection still works.
    status, answer = _post(
        conn, "/validate-experiment", json.dumps(review(experiment(), "Experiment")).encode()
    )
    assert status == 200 and answer["response"]["allowed"] is True
    conn.close()


def test_oversize_body_is_refused_unread(server: serving.AdmissionServer, cert_dir: Path) -> None:
    conn = _connect(server, cert_dir)
    status, answer = _post(conn, "/validate-experiment", b" " * (server.max_body + 1))
    assert status == 400
    assert f"exceeds the limit of {server.max_body} bytes" in answer["error"]
    conn.close()
    assert _healthy(server, cert_dir)


def test_no_content_length_is_refused(server: serving.AdmissionServer, cert_dir: Path) -> None:
    conn = _connect(server, cert_dir)
    conn.putrequest("POST", "/mutate-pod")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()
    assert response.status == 400
    assert "Content-Length" in json.loads(response.read())["error"]
    conn.close()
    assert _healthy(server, cert_dir)


DENIALS = [
    (
        "experiment-wrong-shape",
        "/validate-experiment",
        review({"kind": "Experiment", "spec": {"parameters": "lr"}}, "Experiment"),
        "spec.parameters: ",
    ),
    (
        "experiment-not-object",
        "/validate-experiment",
        review("hello", "Experiment"),
        "expected an Experiment object",
    ),
    (
        "pod-labelled-but-not-a-trials",
        "/mutate-pod",
        review(pod(), "Pod"),
        "metadata.labels[katib.kubeflow.org/trial]: 'random-abc' is reserved for the pods of "
        "Trial random-abc, but no Trial owns it; remove the label",
    ),
    (
        "pod-to-experiment-endpoint",
        "/validate-experiment",
        review(pod(), "Pod"),
        "this endpoint admits Experiment objects, got Pod",
    ),
    (
        "experiment-to-pod-endpoint",
        "/mutate-pod",
        review(experiment(), "Experiment"),
        "this endpoint admits Pod objects",
    ),
    (
        "invalid-experiment",
        "/validate-experiment",
        review(experiment(maxTrialCount=0), "Experiment"),
        "spec.maxTrialCount: 0 must be greater than 0",
    ),
]


@pytest.mark.parametrize(
    ("path", "body", "message"), [c[1:] for c in DENIALS], ids=[c[0] for c in DENIALS]
)
def test_wrong_objects_get_a_well_formed_denial(
    server: serving.AdmissionServer, cert_dir: Path, path: str, body: dict[str, Any], message: str
) -> None:
    conn = _connect(server, cert_dir)
    status, answer = _post(conn, path, json.dumps(body).encode())
    assert status == 200
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == body["request"]["uid"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert message in response["status"]["message"]
    conn.close()
    assert _healthy(server, cert_dir)


def test_mutate_experiment_returns_a_json_patch(
    server: serving.AdmissionServer, cert_dir: Path
) -> None:
    exp = experiment()
    del exp["spec"]["parallelTrialCount"]
    conn = _connect(server, cert_dir)
    status, answer = _post(
        conn, "/mutate-experiment?timeout=10s", json.dumps(review(exp, "Experiment")).encode()
    )
    assert status == 200
    response = answer["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {"op": "add", "path": "/spec/parallelTrialCount", "value": 3} in patch
    conn.close()


@pytest.mark.parametrize(
    "obj",
    [
        pod(labels={"app": "web"}),
        {"metadata": {}, "spec": {"containers": []}},
        {"metadata": {}},
        {"metadata": "x"},
    ],
    ids=["owned-by-a-job", "no-containers", "no-spec", "bad-metadata"],
)
def test_a_pod_without_the_trial_label_passes_unchanged(
    server: serving.AdmissionServer, cert_dir: Path, obj: dict[str, Any]
) -> None:
    """Whatever it looks like: judging a pod that is not a trial's is the API server's job."""
    conn = _connect(server, cert_dir)
    status, answer = _post(conn, "/mutate-pod", json.dumps(review(obj, "Pod")).encode())
    assert status == 200 and answer["response"] == {"uid": "u-1", "allowed": True}
    conn.close()


def test_probes_and_unknown_paths(server: serving.AdmissionServer, cert_dir: Path) -> None:
    conn = _connect(server, cert_dir)
    for path, expected in (("/healthz", 200), ("/readyz", 200), ("/nope", 404)):
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        assert response.status == expected
    status, answer = _post(conn, "/mutate-nothing", json.dumps(review(pod(), "Pod")).encode())
    assert status == 404 and "/mutate-pod" in answer["error"]
    conn.close()


def test_garbage_instead_of_tls_does_not_stop_the_server(
    server: serving.AdmissionServer, cert_dir: Path
) -> None:
    with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")  # plain HTTP to a TLS port
        with contextlib.suppress(ConnectionResetError):
            sock.recv(100)
    assert _healthy(server, cert_dir)


def _served_serial(srv: serving.AdmissionServer, cert_dir: Path) -> int:
    conn = _connect(srv, cert_dir)
    conn.connect()
    der = conn.sock.getpeercert(binary_form=True)
    conn.close()
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_certificate_is_reloaded_when_the_files_change(tmp_path: Path) -> None:
    certificates.issue(tmp_path, ["localhost"], ["127.0.0.1"])
    certs = serving.CertificateStore(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), 0.0)
    admission = reviewing.Admission(katib_config.default(), StaticCluster())
    srv = serving.AdmissionServer(("127.0.0.1", 0), certs, admission.handle)
    serving.serve(srv)
    try:
        first = _served_serial(srv, tmp_path)
        files = certificates.issue(tmp_path, ["localhost"], ["127.0.0.1"])  # same CA, new cert
        second = _served_serial(srv, tmp_path)
        assert second != first
        assert second == x509.load_pem_x509_certificate(files.cert.read_bytes()).serial_number
        # A broken pair keeps the last good one.
        (tmp_path / "tls.crt").write_text("garbage")
        assert _served_serial(srv, tmp_path) == second
    finally:
        srv.shutdown()
        srv.server_close()


def test_certs_subcommand_writes_a_ca_and_a_serving_cert(tmp_path: Path) -> None:
    assert (
        main.main(
            [
                "certs",
                "--out-dir",
                str(tmp_path),
                "--dns-name",
                "webhook.kubeflow.svc",
                "--ip",
                "10.0.0.7",
            ]
        )
        == 0
    )
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    assert cert.issuer == ca.subject
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["webhook.kubeflow.svc"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.7"]
    assert oct((tmp_path / "tls.key").stat().st_mode & 0o777) == "0o600"
    ca_before = (tmp_path / "ca.crt").read_bytes()
    assert main.main(["certs", "--out-dir", str(tmp_path), "--dns-name", "x"]) == 0
    assert (tmp_path / "ca.crt").read_bytes() == ca_before  # the CA is reused
    assert main.main(["certs", "--out-dir", str(tmp_path / "none")]) == 2  # no name at all


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_console_script_serves_and_exits_0_on_sigterm(cert_dir: Path, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "current-context: x\n"
    )
    port = _free_port()
    script = Path(sys.executable).with_name("webhook")
    proc = subprocess.Popen(
        [
            str(script),
            "serve",
            "--address",
            "127.0.0.1",
            "--port",
            str(port),
            "--cert-file",
            str(cert_dir / "tls.crt"),
            "--key-file",
            str(cert_dir / "tls.key"),
            "--kubeconfig",
            str(kubeconfig),
            "--log-format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "KUBETUNE_WEBHOOK_REQUIRE_NAMESPACE_LABEL": "false"},
    )
    try:
        ctx = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
                conn.request("GET", "/readyz")
                response = conn.getresponse()
                response.read()
                assert response.status == 200
                break
            except OSError:
                assert time.monotonic() < deadline, "webhook did not come up"
                time.sleep(0.1)
        # A lookup the API server cannot answer is a denial with code 500, not a crash.
        status, answer = _post(
            conn,
            "/validate-experiment",
            json.dumps(review(experiment(resumePolicy="FromVolume"), "Experiment")).encode(),
        )
        assert status == 200 and answer["response"]["status"]["code"] == 500
        assert "retry" in answer["response"]["status"]["message"]
        conn.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        out = proc.communicate()[0]
        assert json.loads(out.splitlines()[0])["message"].startswith("loaded serving certificate")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
