"""Unit tests of the node agent's pure rules: $(VAR) expansion, env, image map."""

from __future__ import annotations

import base64
import sys
from typing import Any

import pytest

from localcluster.nodeagent.envvars import ConfigError, build_env, parse_quantity, service_env
from localcluster.nodeagent.expansion import expand, expand_all, mapping_for
from localcluster.nodeagent.images import ImageMap, ImageMapError

JSON = dict[str, Any]

CTX = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("", ""),
        ("$(VAR_A)", "A"),
        ("___$(VAR_B)___", "___B___"),
        ("$(VAR_A)-$(VAR_B)-$(VAR_C)", "A-B-C"),
        ("$(VAR_REF)", "$(VAR_A)"),  # values are not expanded again
        ("$(VAR_EMPTY)", ""),
        ("$(UNKNOWN)", "$(UNKNOWN)"),
        ("x$(UNKNOWN)y$(VAR_A)", "x$(UNKNOWN)yA"),
        ("$$(VAR_A)", "$(VAR_A)"),  # escaped operator
        ("$$$(VAR_A)", "$A"),
        ("$$$$(VAR_A)", "$$(VAR_A)"),
        ("$$", "$"),
        ("$$$$", "$$"),
        ("echo completed > /var/log/katib/$$$$.pid", "echo completed > /var/log/katib/$$.pid"),
        ("$", "$"),
        ("a$", "a$"),
        ("$x", "$x"),
        ("$VAR_A", "$VAR_A"),
        ("$(VAR_A", "$(VAR_A"),  # incomplete reference stays
        ("$(", "$("),
        ("$()", "$()"),
        ("$($(VAR_A))", "$($(VAR_A))"),  # name runs to the first ')': "$(VAR_A" unknown
        ("$(VAR_A)$(VAR_B)", "AB"),
        ("${VAR_A}", "${VAR_A}"),
        ("ünï$(VAR_A)cödé", "ünïAcödé"),
        ("$$(UNKNOWN)", "$(UNKNOWN)"),
        ("(VAR_A)", "(VAR_A)"),
    ],
)
def test_expand_matches_kubelet(text: str, want: str) -> None:
    assert expand(text, mapping_for(CTX)) == want


def test_mapping_contexts_in_order() -> None:
    lookup = mapping_for({"A": "first"}, {"A": "second", "B": "b"})
    assert expand("$(A)$(B)", lookup) == "firstb"


def test_expand_all_handles_none() -> None:
    assert expand_all(None, CTX) == []
    assert expand_all(["$(VAR_A)", "$$(VAR_A)"], CTX) == ["A", "$(VAR_A)"]


def _pod(env: list[JSON], env_from: list[JSON] | None = None) -> JSON:
    return {
        "metadata": {
            "name": "p1",
            "namespace": "ns1",
            "uid": "uid-1",
            "labels": {"app": "x", "tier": "be"},
            "annotations": {"note": 'say "hi"'},
        },
        "spec": {
            "nodeName": "node-a",
            "serviceAccountName": "sa1",
            "containers": [
                {
                    "name": "c",
                    "env": env,
                    "envFrom": env_from or [],
                    "resources": {"limits": {"cpu": "1500m", "memory": "64Mi"}},
                }
            ],
        },
    }


CMS: dict[str, JSON] = {"cm1": {"data": {"K1": "v1", "K2": "v2", "BAD=KEY": "x"}}}
SECRETS: dict[str, JSON] = {
    "s1": {"data": {"PASS": base64.b64encode(b"s3cret").decode()}},
}


def _cm(ns: str, name: str) -> JSON | None:
    assert ns == "ns1"
    return CMS.get(name)


def _secret(ns: str, name: str) -> JSON | None:
    assert ns == "ns1"
    return SECRETS.get(name)


def _build(pod: JSON) -> dict[str, str]:
    svc = service_env("127.0.0.1", 6443)
    return build_env(
        pod,
        pod["spec"]["containers"][0],
        svc,
        _cm,
        _secret,
        "192.0.2.2",
        "192.0.2.2",
        {"cpu": "8", "memory": "1Gi"},
    )


def test_env_order_expansion_and_sources() -> None:
    pod = _pod(
        [
            {"name": "LATER_REF", "value": "$(DEFINED_LATER)"},
            {"name": "A", "value": "a"},
            {"name": "B", "value": "$(A)-$(K1)-$(KUBERNETES_SERVICE_HOST)"},
            {"name": "DEFINED_LATER", "value": "x"},
            {"name": "ESC", "value": "$$(A)"},
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "LBL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {
                "name": "ANN",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['note']"}},
            },
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
            {"name": "FROMCM", "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": "K2"}}},
            {"name": "FROMSECRET", "valueFrom": {"secretKeyRef": {"name": "s1", "key": "PASS"}}},
            {"name": "VERBATIM", "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": "K1"}}},
            {
                "name": "CPU",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}},
            },
            {
                "name": "MEM",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
            {
                "name": "OPT",
                "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k", "optional": True}},
            },
        ],
        [{"configMapRef": {"name": "cm1"}, "prefix": "CM_"}, {"configMapRef": {"name": "cm1"}}],
    )
    env = _build(pod)
    assert env["LATER_REF"] == "$(DEFINED_LATER)"
    assert env["B"] == "a-v1-127.0.0.1"
    assert env["ESC"] == "$(A)"
    assert (env["NAME"], env["NS"], env["UID"]) == ("p1", "ns1", "uid-1")
    assert env["LBL"] == "x"
    assert env["ANN"] == 'say "hi"'
    assert env["IP"] == "192.0.2.2"
    assert env["NODE"] == "node-a"
    assert env["SA"] == "sa1"
    assert env["FROMCM"] == "v2"
    assert env["FROMSECRET"] == "s3cret"
    assert env["CPU"] == "1500"
    assert env["MEM"] == "64"
    assert "OPT" not in env
    assert env["CM_K1"] == "v1" and env["K2"] == "v2"
    assert "BAD=KEY" not in env and "CM_BAD=KEY" not in env
    keys = list(env)
    assert keys.index("CM_K1") < keys.index("K1") < keys.index("LATER_REF")


def test_env_from_order_later_wins() -> None:
    pod = _pod([{"name": "K1", "value": "override"}], [{"configMapRef": {"name": "cm1"}}])
    assert _build(pod)["K1"] == "override"


@pytest.mark.parametrize(
    ("env", "env_from", "message"),
    [
        (
            [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}],
            None,
            'configmap "nope" not found',
        ),
        (
            [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": "zz"}}}],
            None,
            "couldn't find key zz in ConfigMap ns1/cm1",
        ),
        (
            [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}],
            None,
            'secret "nope" not found',
        ),
        ([], [{"secretRef": {"name": "nope"}}], 'secret "nope" not found'),
    ],
)
def test_env_missing_sources_are_config_errors(
    env: list[JSON], env_from: list[JSON] | None, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _build(_pod(env, env_from))


def test_quantities() -> None:
    assert parse_quantity("500m") * 1000 == 500
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("2") == 2
    assert parse_quantity("1e3") == 1000
    with pytest.raises(ValueError, match="bad quantity"):
        parse_quantity("12XB")


def test_image_map_builtin_python(tmp_path: Any) -> None:
    m = ImageMap.load(None)
    assert m.argv("python:3.11-slim", None, None) == [sys.executable]
    assert m.argv("python", None, ["-c", "x"]) == ["-c", "x"]  # args replace CMD
    assert m.argv("python:3", ["python3"], ["-c", "x"]) == ["python3", "-c", "x"]
    env = m.base_env("python:3.12")
    assert env["PATH"].split(":")[0] == str(__import__("os").path.dirname(sys.executable))
    with pytest.raises(ImageMapError, match=r'image "busybox:1" has no entry.*<builtin>'):
        m.argv("busybox:1", None, ["sleep", "1"])
    assert m.argv("busybox:1", ["sleep"], ["1"]) == ["sleep", "1"]


def test_image_map_file(tmp_path: Any) -> None:
    f = tmp_path / "images.yaml"
    f.write_text(
        "images:\n"
        "  - match: 'ghcr.io/acme/*'\n"
        "    entrypoint: [/bin/echo, acme]\n"
        "    cmd: [default]\n"
        "    env: {ACME: '1'}\n"
        "    path: [/opt/acme/bin]\n"
        "  - match: 'ghcr.io/acme/special'\n"
        "    cmd: [/bin/true]\n"
        "  - match: 'python:3.11'\n"
        "    cmd: [/usr/bin/python3]\n"
    )
    m = ImageMap.load(str(f))
    assert m.argv("ghcr.io/acme/tool:v1", None, None) == ["/bin/echo", "acme", "default"]
    assert m.argv("ghcr.io/acme/tool:v1", None, ["x"]) == ["/bin/echo", "acme", "x"]
    assert m.argv("ghcr.io/acme/special:v2", None, None) == ["/bin/true"]
    assert m.argv("python:3.11", None, None) == ["/usr/bin/python3"]
    assert m.argv("python:3.12", None, None) == [sys.executable]
    env = m.base_env("ghcr.io/acme/tool:v1")
    assert env["ACME"] == "1" and env["PATH"].startswith("/opt/acme/bin:")
    with pytest.raises(ImageMapError, match=str(f)):
        m.argv("unknown:1", None, None)


def test_hosts_file_names_services_and_headless_pods() -> None:
    """A pod's hosts file resolves what its DNS search path would: `<svc>.<ns>`, `.svc`,
    `.svc.cluster.local`, the short name in its own namespace, headless pod hostnames;
    terminating endpoints and slices of no Service are left out."""
    from localcluster.nodeagent.names import NameTable

    def ep(ip: str, **kw: Any) -> JSON:
        return {"addresses": [ip], **kw}

    slices: list[JSON] = [
        {
            "metadata": {
                "namespace": "kubeflow",
                "labels": {"kubernetes.io/service-name": "katib-db-manager"},
            },
            "addressType": "IPv4",
            "endpoints": [
                ep("10.244.1.2", conditions={"ready": False}),
                ep("10.244.1.9", conditions={"terminating": True}),
            ],
        },
        {
            "metadata": {"namespace": "team", "labels": {"kubernetes.io/service-name": "job"}},
            "addressType": "IPv4",
            "endpoints": [ep("10.244.1.3", hostname="job-worker-0")],
        },
        {"metadata": {"namespace": "team", "labels": {}}, "endpoints": [ep("10.244.1.4")]},
    ]
    table = NameTable.from_slices(slices)
    pod = {"metadata": {"name": "p", "namespace": "team"}, "spec": {}}
    text = table.render(pod, "10.244.1.3")
    hosts: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            ip, *names = line.split()
            for n in names:
                hosts.setdefault(n, set()).add(ip)
    assert hosts["katib-db-manager.kubeflow"] == {"10.244.1.2"}
    assert hosts["katib-db-manager.kubeflow.svc"] == {"10.244.1.2"}
    assert hosts["katib-db-manager.kubeflow.svc.cluster.local"] == {"10.244.1.2"}
    assert "katib-db-manager" not in hosts  # another namespace: no short name
    assert hosts["job"] == hosts["job.team.svc"] == {"10.244.1.3"}
    assert hosts["job-worker-0.job"] == hosts["job-worker-0.job.team.svc.cluster.local"]
    assert hosts["p"] == {"10.244.1.3"} and hosts["localhost"] == {"127.0.0.1", "::1"}
    assert "10.244.1.9" not in text and "10.244.1.4" not in text
    sub = {
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {"hostname": "h", "subdomain": "s"},
    }
    assert "10.244.1.3\th.s.team.svc.cluster.local\th\n" in table.render(sub, "10.244.1.3")


def test_spdy_header_dictionary_is_the_one_peers_expect() -> None:
    """zlib names a preset dictionary by its Adler-32; SPDY/3 peers (Go's spdystream) ask
    for 0xe3c6a7c2 and refuse a header block compressed against anything else."""
    import zlib

    from localcluster.nodeagent import spdy

    assert zlib.adler32(spdy.HEADER_DICTIONARY) == 0xE3C6A7C2
    headers = {"streamtype": "error", "x-empty": ""}
    deflate = zlib.compressobj(zdict=spdy.HEADER_DICTIONARY)
    block = deflate.compress(spdy.encode_headers(headers)) + deflate.flush(zlib.Z_SYNC_FLUSH)
    inflate = zlib.decompressobj(zdict=spdy.HEADER_DICTIONARY)
    assert spdy.decode_headers(inflate.decompress(block)) == headers
    with pytest.raises(ValueError, match="malformed"):
        spdy.decode_headers(b"\x00\x00\x00\x02\x00")


def test_exec_status_carries_the_exit_code_client_go_reads() -> None:
    from localcluster.nodeagent import spdy

    assert spdy.exit_status(0) == {"metadata": {}, "status": "Success"}
    failed = spdy.exit_status(3)
    assert failed["reason"] == "NonZeroExitCode"
    assert failed["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert spdy.exit_status(-15)["details"]["causes"][0]["message"] == "143"
    assert spdy.negotiate(["v5.channel.k8s.io, v4.channel.k8s.io"]) == spdy.PROTOCOL
    assert spdy.negotiate(["v1.channel.k8s.io"]) is None


def test_a_pod_whose_startup_probe_passed_sleeps_until_its_next_probe() -> None:
    """After a startup probe passed it never runs again, so its past schedule must not wake the
    pod's worker: it did at once, for ever (a busy loop holding the agent's GIL, which slowed
    every other pod's start and exit)."""
    import time
    from types import SimpleNamespace

    from localcluster.nodeagent.podworker import PodWorker
    from localcluster.nodeagent.probes import ProbeState

    probe = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5}
    pod = {
        "metadata": {"name": "db", "namespace": "ns", "uid": "u1"},
        "spec": {
            "containers": [
                {"name": "main", "image": "x", "startupProbe": probe, "livenessProbe": probe}
            ]
        },
    }
    worker = PodWorker(SimpleNamespace(node_ip="10.0.0.1", state_dir="/nonexistent"), pod)  # type: ignore[arg-type]
    worker.sandbox = object()  # type: ignore[assignment]
    worker.last_refresh = time.monotonic()
    run = worker.app_runs[0]
    run.proc = object()  # type: ignore[assignment]
    past = time.monotonic() - 60
    run.probes = {
        "startup": ProbeState(probe, "startup"),
        "liveness": ProbeState(probe, "liveness"),
    }
    run.probes["startup"].record(True, past)  # passed a minute ago; its next_at is long gone
    run.status.started = True
    run.probes["liveness"].record(True, time.monotonic())
    assert worker._next_wakeup() > 1.0
    # Before the startup probe passed, it is the one that schedules the worker.
    run.status.started = False
    assert worker._next_wakeup() == 0.0
