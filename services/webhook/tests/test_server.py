"""The HTTPS server on loopback: bad input answered with 400 or a denial, and it keeps serving."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from webhook_cases import StaticCluster, experiment, pod, review

from kubetune import config as katib_config
from kubetune_testkit.waiting import wait_for
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


def test_oversize_body_gets_413_unread(server: serving.AdmissionServer, cert_dir: Path) -> None:
    conn = _connect(server, cert_dir)
    status, answer = _post(conn, "/validate-experiment", b" " * (server.max_body + 1))
    assert status == 413
    assert f"exceeds the limit of {server.max_body} bytes (--max-body-bytes)" in answer["error"]
    conn.close()
    # A body that is announced but never sent is refused at once, not waited for.
    conn = _connect(server, cert_dir)
    conn.putrequest("POST", "/mutate-pod")
    conn.putheader("Content-Length", str(1 << 30))
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 413
    assert "1073741824 bytes exceeds the limit" in json.loads(response.read())["error"]
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


def test_alive_while_the_loop_turns(
    server: serving.AdmissionServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the plain-HTTP liveness probe answers: the loop runs and turned lately."""
    wait_for("the loop to start", server.alive, timeout=5)
    monkeypatch.setattr(serving, "STALL_SECONDS", 0.0)
    assert not server.alive()  # a loop that has not turned within the window is stuck
    monkeypatch.undo()
    server.shutdown()
    assert not server.alive()


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


# -- bounded connections and threads (issue 13, defect 4) ------------------------------------


@pytest.fixture
def start(cert_dir: Path) -> Iterator[Callable[..., serving.AdmissionServer]]:
    """Start servers with the given options; all are stopped after the test."""
    started: list[serving.AdmissionServer] = []

    def _start(handler: serving.Handler | None = None, **options: Any) -> serving.AdmissionServer:
        certs = serving.CertificateStore(str(cert_dir / "tls.crt"), str(cert_dir / "tls.key"))
        admission = reviewing.Admission(katib_config.default(), StaticCluster())
        srv = serving.AdmissionServer(
            ("127.0.0.1", 0), certs, handler or admission.handle, **options
        )
        serving.serve(srv)
        started.append(srv)
        return srv

    yield _start
    for srv in started:
        srv.shutdown()
        srv.server_close()


def _idle_tls(srv: serving.AdmissionServer, cert_dir: Path) -> socket.socket:
    """A connection that completes the TLS handshake and then sends nothing."""
    ctx = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    raw = socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def _idle_tcp(srv: serving.AdmissionServer, hello: bool) -> socket.socket:
    """A connection that sends nothing, or the start of a ClientHello (half-open handshake)."""
    sock = socket.create_connection(("127.0.0.1", srv.server_address[1]), timeout=10)
    if hello:
        sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    return sock


def _closed_by_server(sock: socket.socket, wait: float) -> bool:
    """True when the server closed `sock` (within `wait` seconds); it never sends these data."""
    sock.settimeout(wait)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:  # reset, or a TLS error on a torn connection
        return True


def _allowed_pod(srv: serving.AdmissionServer, cert_dir: Path) -> None:
    """An ordinary pod (no trial label): admitted unchanged, the cheapest whole admission."""
    conn = _connect(srv, cert_dir)
    ordinary = pod(labels={})
    status, answer = _post(conn, "/mutate-pod", json.dumps(review(ordinary, "Pod")).encode())
    assert status == 200 and answer["response"]["allowed"] is True
    conn.close()


def test_idle_connections_beyond_the_cap_do_not_lock_out_admission(
    start: Callable[..., serving.AdmissionServer], cert_dir: Path
) -> None:
    srv = start(max_connections=8)
    flood = [
        _idle_tls(srv, cert_dir) if i % 3 == 0 else _idle_tcp(srv, hello=i % 3 == 1)
        for i in range(20)
    ]
    try:
        # A new client still gets in and is answered: the oldest idle connections make room.
        _allowed_pod(srv, cert_dir)
        assert _healthy(srv, cert_dir)
        closed = [i for i, sock in enumerate(flood) if _closed_by_server(sock, 0.5)]
        # 20 flood connections and the client, 8 allowed: the oldest 13 went (the client
        # closed its own connection before the probe came).
        assert closed[:13] == list(range(13)), closed
        assert srv.open_connections <= 8
    finally:
        for sock in flood:
            sock.close()


def test_slow_and_idle_clients_are_disconnected(
    start: Callable[..., serving.AdmissionServer], cert_dir: Path
) -> None:
    srv = start(handshake_timeout=0.5, read_timeout=0.5)
    silent = _idle_tcp(srv, hello=False)
    half_hello = _idle_tcp(srv, hello=True)
    no_request = _idle_tls(srv, cert_dir)
    loris = _idle_tls(srv, cert_dir)
    try:
        # Slow loris: a request trickling in a byte at a time is cut off after the read
        # timeout, however steadily the bytes come.
        trickle = b"POST /mutate-pod HTTP/1.1\r\nContent-Length: 100\r\nX-Padding: " + b"x" * 200
        cut_off = False
        for byte in trickle:
            try:
                loris.sendall(bytes([byte]))
            except OSError:
                cut_off = True
                break
            if _closed_by_server(loris, 0.1):
                cut_off = True
                break
        assert cut_off, "a request trickling in for 20 s was never cut off"
        for sock in (silent, half_hello, no_request):
            assert _closed_by_server(sock, 5.0)
        _allowed_pod(srv, cert_dir)
    finally:
        for sock in (silent, half_hello, no_request, loris):
            sock.close()


def test_failed_handshakes_log_one_line_without_a_traceback(
    start: Callable[..., serving.AdmissionServer],
    cert_dir: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    srv = start()
    port = srv.server_address[1]
    caplog.set_level(logging.INFO, logger="kubetune_webhook")

    def closed_at_once() -> int:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        local = int(sock.getsockname()[1])
        sock.close()
        return local

    def untrusting_client() -> int:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        local = int(sock.getsockname()[1])
        with pytest.raises(ssl.SSLCertVerificationError):
            ssl.create_default_context().wrap_socket(sock, server_hostname="127.0.0.1")
        sock.close()
        return local

    def plain_http() -> int:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        local = int(sock.getsockname()[1])
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        with contextlib.suppress(OSError):
            sock.recv(100)
        sock.close()
        return local

    def torn_tls_record() -> int:
        tls = _idle_tls(srv, cert_dir)
        local = int(tls.getsockname()[1])
        os.write(tls.fileno(), b"\x17\x03\x03\x00\x10" + b"x" * 16)  # not a valid record
        with contextlib.suppress(OSError):
            tls.recv(1)
        tls.close()
        return local

    for client, reason in (
        (closed_at_once, "the client closed the connection during the handshake"),
        (untrusting_client, "the client does not trust the serving certificate"),
        (plain_http, "the client sent plain HTTP to this HTTPS port"),
        (torn_tls_record, "TLS error"),
    ):
        caplog.clear()
        local = client()
        peer = f"127.0.0.1:{local}"
        deadline = time.monotonic() + 5
        while not any(peer in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, f"{client.__name__}: nothing logged"
            time.sleep(0.05)
        assert _healthy(srv, cert_dir)  # also: everything about the client has been logged
        lines = [r for r in caplog.records if peer in r.getMessage()]
        assert len(lines) == 1, [r.getMessage() for r in lines]
        assert reason in lines[0].getMessage()
        assert lines[0].exc_info is None and lines[0].levelno >= logging.INFO
    assert "Traceback" not in capfd.readouterr().err


def test_threads_stay_bounded_with_many_connections(
    start: Callable[..., serving.AdmissionServer], cert_dir: Path
) -> None:
    before = threading.active_count()
    srv = start(workers=3)
    flood: list[socket.socket] = []
    keep_alive: list[http.client.HTTPSConnection] = []
    try:
        for i in range(60):
            flood.append(_idle_tls(srv, cert_dir) if i % 2 else _idle_tcp(srv, hello=False))
        # Keep-alive connections that answered once and now idle pin no thread either.
        for _ in range(10):
            keep_alive.append(_connect(srv, cert_dir))
            status, _ = _post(
                keep_alive[-1], "/mutate-pod", json.dumps(review(pod(), "Pod")).encode()
            )
            assert status == 200
        with ThreadPoolExecutor(8) as clients:
            list(clients.map(lambda _: _allowed_pod(srv, cert_dir), range(16)))
        _allowed_pod(srv, cert_dir)
        # The loop thread and at most `workers` handler threads.
        assert threading.active_count() - before <= 1 + 3
    finally:
        for conn in keep_alive:
            conn.close()
        for sock in flood:
            sock.close()


def test_a_request_without_an_answer_gets_504_and_the_rest_is_served(
    start: Callable[..., serving.AdmissionServer], cert_dir: Path
) -> None:
    release = threading.Event()
    admission = reviewing.Admission(katib_config.default(), StaticCluster())

    def handler(path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        if path == "/stuck":
            release.wait(30)
        return admission.handle(path, body)

    srv = start(handler, workers=2, request_timeout=0.5)
    conn = _connect(srv, cert_dir)
    try:
        status, answer = _post(conn, "/stuck", json.dumps(review(pod(), "Pod")).encode())
        assert status == 504 and "no answer within 0.5 s" in answer["error"]
        _allowed_pod(srv, cert_dir)
        assert _healthy(srv, cert_dir)
    finally:
        conn.close()
        release.set()


def test_large_bodies_arriving_slowly_cannot_take_the_memory(
    start: Callable[..., serving.AdmissionServer], cert_dir: Path
) -> None:
    srv = start(max_body=64 * 1024, max_buffered=128 * 1024)
    body = json.dumps(review(pod(labels={}), "Pod")).encode()
    holders = [_idle_tls(srv, cert_dir) for _ in range(2)]
    try:
        for sock in holders:  # each announces the largest body and sends all but a byte
            sock.sendall(b"POST /mutate-pod HTTP/1.1\r\nContent-Length: 65536\r\n\r\n")
            sock.sendall(b" " * 65535)
        conn = _connect(srv, cert_dir)
        status, answer = _post(conn, "/mutate-pod", body)
        conn.close()
        assert status == 503 and "retry" in answer["error"], answer
    finally:
        for sock in holders:
            sock.close()
    deadline = time.monotonic() + 5
    while True:  # once they are gone, requests pass again
        conn = _connect(srv, cert_dir)
        status, answer = _post(conn, "/mutate-pod", body)
        conn.close()
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert status == 200 and answer["response"]["allowed"] is True
