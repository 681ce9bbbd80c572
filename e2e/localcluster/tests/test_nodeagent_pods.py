"""Kubelet behaviours of the node agent on a real control plane: volumes, probes, init
containers, waiting reasons, deadlines, and the agent's own start-up and shutdown."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

JSON = dict[str, Any]
PY = "python:3.11"


def _apply(cluster: Any, ns: str, obj: JSON) -> None:
    cluster.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(obj))


def _pod(cluster: Any, ns: str, name: str) -> JSON:
    return dict(json.loads(cluster.kubectl("get", "pod", name, "-n", ns, "-o", "json").stdout))


def _wait(what: str, check: Callable[[], Any], timeout: float | None = None) -> Any:
    """Poll through kubectl (a process each) a little less often than the default."""
    return wait_for(what, check, timeout, interval=0.3)


def _done(cluster: Any, ns: str, name: str) -> JSON:
    return dict(
        _wait(
            f"pod {name} finished",
            lambda: (
                p
                if (p := _pod(cluster, ns, name))["status"].get("phase") in ("Succeeded", "Failed")
                else None
            ),
        )
    )


def _logs(cluster: Any, ns: str, name: str, container: str = "main") -> str:
    return str(cluster.kubectl("logs", "-n", ns, name, "-c", container).stdout)


def _simple_pod(name: str, code: str, **spec: Any) -> JSON:
    container = {"name": "main", "image": PY, "command": ["python3", "-c", code]}
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [container], **spec},
    }


def _cond(pod: JSON, ctype: str) -> str:
    return next(
        (c["status"] for c in pod["status"].get("conditions", []) if c["type"] == ctype), ""
    )


def test_volumes_configmap_secret_downward_token(cluster: Any, namespace: str) -> None:
    _apply(
        cluster,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg"},
            "data": {"a.txt": "from-configmap", "b.txt": "bee"},
        },
    )
    _apply(
        cluster,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "sec"},
            "stringData": {"pw": "hunter2"},
        },
    )
    code = (
        "import json, os\n"
        "r = lambda p: open(p).read()\n"
        "sa = '/var/run/secrets/kubernetes.io/serviceaccount/'\n"
        "out = {\n"
        " 'cm': r('/mnt/nat/cfg/a.txt'), 'item': r('/mnt/nat/items/renamed'),\n"
        " 'sub': r('/mnt/nat/single.txt'), 'secret': r('/mnt/nat/sec/pw'),\n"
        " 'labels': r('/mnt/nat/pod/labels'), 'name': r('/mnt/nat/pod/name'),\n"
        " 'ns': r(sa + 'namespace'), 'ca': r(sa + 'ca.crt')[:27],\n"
        " 'token_parts': len(r(sa + 'token').split('.')),\n"
        " 'env_cm': os.environ['FROM_CM'], 'env_secret': os.environ['PW'],\n"
        "}\n"
        "try:\n"
        "    open('/mnt/nat/cfg/new', 'w')\n"
        "    out['ro'] = False\n"
        "except OSError:\n"
        "    out['ro'] = True\n"
        "print(json.dumps(out, sort_keys=True))\n"
    )
    pod = _simple_pod(
        "vols",
        code,
        container={
            "env": [
                {
                    "name": "FROM_CM",
                    "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "b.txt"}},
                },
                {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "pw"}}},
            ],
            "volumeMounts": [
                {"name": "cfg", "mountPath": "/mnt/nat/cfg"},
                {"name": "items", "mountPath": "/mnt/nat/items"},
                {"name": "cfg", "mountPath": "/mnt/nat/single.txt", "subPath": "b.txt"},
                {"name": "sec", "mountPath": "/mnt/nat/sec"},
                {"name": "pod", "mountPath": "/mnt/nat/pod"},
            ],
        },
        volumes=[
            {"name": "cfg", "configMap": {"name": "cfg"}},
            {
                "name": "items",
                "configMap": {"name": "cfg", "items": [{"key": "a.txt", "path": "renamed"}]},
            },
            {"name": "sec", "secret": {"secretName": "sec"}},
            {
                "name": "pod",
                "downwardAPI": {
                    "items": [
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                    ]
                },
            },
        ],
    )
    pod["metadata"]["labels"] = {"app": "vols"}
    _apply(cluster, namespace, pod)
    done = _done(cluster, namespace, "vols")
    out = _logs(cluster, namespace, "vols")
    assert done["status"]["phase"] == "Succeeded", out
    assert json.loads(out) == {
        "cm": "from-configmap",
        "item": "from-configmap",
        "sub": "bee",
        "secret": "hunter2",
        "labels": 'app="vols"',
        "name": "vols",
        "ns": namespace,
        "ca": "-----BEGIN CERTIFICATE-----",
        "token_parts": 3,
        "env_cm": "bee",
        "env_secret": "hunter2",
        "ro": True,
    }


def test_missing_configmap_waits_then_starts(cluster: Any, namespace: str) -> None:
    pod = _simple_pod(
        "cfgwait",
        "import os; print(os.environ['X'])",
        container={
            "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "late", "key": "x"}}}]
        },
    )
    _apply(cluster, namespace, pod)
    waiting = _wait(
        "CreateContainerConfigError",
        lambda: (
            w
            if (
                w := (
                    _pod(cluster, namespace, "cfgwait")["status"].get("containerStatuses") or [{}]
                )[0]
                .get("state", {})
                .get("waiting")
            )
            and w.get("reason") == "CreateContainerConfigError"
            else None
        ),
    )
    assert waiting["message"] == 'configmap "late" not found'
    _apply(
        cluster,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "late"},
            "data": {"x": "arrived"},
        },
    )
    assert _done(cluster, namespace, "cfgwait")["status"]["phase"] == "Succeeded"
    assert _logs(cluster, namespace, "cfgwait").strip() == "arrived"


def test_unmapped_image_reports_errimagepull(cluster: Any, namespace: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "noimg"},
        "spec": {"containers": [{"name": "main", "image": "example.com/unknown:1"}]},
    }
    _apply(cluster, namespace, pod)
    waiting = _wait(
        "ErrImagePull",
        lambda: (
            (_pod(cluster, namespace, "noimg")["status"].get("containerStatuses") or [{}])[0]
            .get("state", {})
            .get("waiting")
        ),
    )
    assert waiting["reason"] == "ErrImagePull"
    assert "example.com/unknown:1" in waiting["message"] and "image map" in waiting["message"]
    assert _pod(cluster, namespace, "noimg")["status"]["phase"] == "Pending"


def test_init_containers_run_first_in_order(cluster: Any, namespace: str) -> None:
    step = "import os; open('/mnt/nat/work/order', 'a').write('{}\\n')"
    pod = _simple_pod(
        "inits",
        "print(open('/mnt/nat/work/order').read(), end='')",
        container={"volumeMounts": [{"name": "w", "mountPath": "/mnt/nat/work"}]},
        volumes=[{"name": "w", "emptyDir": {}}],
        initContainers=[
            {
                "name": f"init{i}",
                "image": PY,
                "command": ["python3", "-c", step.format(i)],
                "volumeMounts": [{"name": "w", "mountPath": "/mnt/nat/work"}],
            }
            for i in (1, 2)
        ],
    )
    _apply(cluster, namespace, pod)
    done = _done(cluster, namespace, "inits")
    assert done["status"]["phase"] == "Succeeded"
    assert _logs(cluster, namespace, "inits") == "1\n2\n"
    inits = done["status"]["initContainerStatuses"]
    assert [s["state"]["terminated"]["reason"] for s in inits] == ["Completed", "Completed"]
    assert _cond(done, "Initialized") == "True"


def test_failing_init_container_fails_never_pod(cluster: Any, namespace: str) -> None:
    pod = _simple_pod(
        "badinit",
        "print('must not run')",
        initContainers=[
            {"name": "init", "image": PY, "command": ["python3", "-c", "raise SystemExit(9)"]}
        ],
    )
    _apply(cluster, namespace, pod)
    done = _done(cluster, namespace, "badinit")
    assert done["status"]["phase"] == "Failed"
    assert done["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 9
    assert "waiting" in done["status"]["containerStatuses"][0]["state"]


def test_http_readiness_and_liveness_restart(cluster: Any, namespace: str) -> None:
    server = (
        "import http.server, os, sys\n"
        "port = int(sys.argv[1])\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        ok = os.path.exists('/tmp/healthy-' + str(port))\n"
        "        self.send_response(200 if ok else 500); self.end_headers()\n"
        "    def log_message(self, *a): pass\n"
        "http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()\n"
    )
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    flag = Path(f"/tmp/healthy-{port}")
    flag.unlink(missing_ok=True)
    pod = _simple_pod(
        "probed",
        server,
        restartPolicy="Always",
        container={
            "args": [str(port)],
            "ports": [{"name": "http", "containerPort": port}],
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
            "livenessProbe": {
                "tcpSocket": {"port": port},
                "periodSeconds": 1,
                "initialDelaySeconds": 1,
                "failureThreshold": 2,
            },
        },
    )
    _apply(cluster, namespace, pod)
    running = _wait(
        "running, not ready",
        lambda: (
            p
            if (p := _pod(cluster, namespace, "probed"))["status"].get("phase") == "Running"
            else None
        ),
    )
    time.sleep(2)
    assert _cond(_pod(cluster, namespace, "probed"), "Ready") == "False"
    assert running["status"]["containerStatuses"][0]["ready"] is False
    flag.write_text("")  # /tmp is shared with the host: the pod now answers 200
    try:
        _wait("Ready", lambda: _cond(_pod(cluster, namespace, "probed"), "Ready") == "True")
        # Kill the server from the host: liveness fails and the container restarts.
        pid = int(running["status"]["containerStatuses"][0]["containerID"].split("//")[1])
        for child in psutil.Process(pid).children(recursive=True):
            if str(port) in " ".join(child.cmdline()):
                child.kill()
        restarted = _wait(
            "restart",
            lambda: (
                p
                if (p := _pod(cluster, namespace, "probed"))["status"]["containerStatuses"][0][
                    "restartCount"
                ]
                >= 1
                else None
            ),
            timeout=40,
        )
        assert restarted["status"]["phase"] == "Running"
        _wait("Ready again", lambda: _cond(_pod(cluster, namespace, "probed"), "Ready") == "True")
    finally:
        flag.unlink(missing_ok=True)


def test_active_deadline_fails_the_pod(cluster: Any, namespace: str) -> None:
    pod = _simple_pod("deadline", "import time; time.sleep(60)", activeDeadlineSeconds=2)
    _apply(cluster, namespace, pod)
    done = _done(cluster, namespace, "deadline")
    assert done["status"]["phase"] == "Failed"
    assert done["status"]["reason"] == "DeadlineExceeded"


def test_service_endpoints_get_the_pod_ip(cluster: Any, namespace: str) -> None:
    pod = _simple_pod(
        "svcpod",
        "import time; time.sleep(300)",
        restartPolicy="Always",
        container={"ports": [{"containerPort": 6789}]},
    )
    pod["metadata"]["labels"] = {"app": "svc"}
    _apply(cluster, namespace, pod)
    _apply(
        cluster,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc"},
            "spec": {"selector": {"app": "svc"}, "ports": [{"port": 6789}]},
        },
    )
    ip = _wait(
        "pod ready",
        lambda: (
            p["status"]["podIP"]
            if _cond(p := _pod(cluster, namespace, "svcpod"), "Ready") == "True"
            else None
        ),
    )
    assert not ip.startswith("127.")

    def addresses() -> list[str]:
        out = cluster.kubectl(
            "get",
            "endpointslices",
            "-n",
            namespace,
            "-l",
            "kubernetes.io/service-name=svc",
            "-o",
            "json",
        ).stdout
        return [
            a
            for s in json.loads(out)["items"]
            for e in s.get("endpoints") or []
            for a in e["addresses"]
            if (e.get("conditions") or {}).get("ready")
        ]

    assert _wait("ready endpoint", addresses) == [ip]


def test_emptydir_at_tmp_with_the_state_dir_under_tmp(cluster: Any, namespace: str) -> None:
    """Argo's pods mount an emptyDir over /tmp; volume sources under /tmp (the session's state
    dir with the configMap's files, and here a hostPath made under /tmp whatever TMPDIR says)
    must stay reachable for the later mounts."""
    host_dir = Path(tempfile.mkdtemp(prefix="nodeagent-late-", dir="/tmp"))
    (host_dir / "h").write_text("host reachable")
    _apply(
        cluster,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "late"},
            "data": {"k": "reachable"},
        },
    )
    code = (
        "print(open('/zz/late/k').read(), open('/zz/host/h').read());"
        " open('/tmp/x', 'w').write('1')"
    )
    pod = _simple_pod(
        "tmpfirst",
        code,
        container={
            "volumeMounts": [
                {"name": "tmp", "mountPath": "/tmp"},
                {"name": "late", "mountPath": "/zz/late"},
                {"name": "host", "mountPath": "/zz/host"},
            ]
        },
        volumes=[
            {"name": "tmp", "emptyDir": {}},
            {"name": "late", "configMap": {"name": "late"}},
            {"name": "host", "hostPath": {"path": str(host_dir)}},
        ],
    )
    try:
        _apply(cluster, namespace, pod)
        done = _done(cluster, namespace, "tmpfirst")
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert "reachable host reachable" in _logs(cluster, namespace, "tmpfirst")
    assert not Path("/zz").exists()


def test_exec_probe_sees_the_container_filesystem(cluster: Any, namespace: str) -> None:
    """A workingDir that does not exist on the host lives in the container's own root; an
    exec probe runs in that root too (nsenter --root), as in a container image."""
    workdir = f"/nodeagent-probe-{uuid.uuid4().hex[:8]}/w"
    pod = _simple_pod(
        "probed",
        "import time; open('ready', 'w').close(); time.sleep(300)",
        restartPolicy="Always",
        container={
            "workingDir": workdir,
            "readinessProbe": {
                "exec": {"command": ["test", "-e", f"{workdir}/ready"]},
                "periodSeconds": 1,
            },
        },
    )
    _apply(cluster, namespace, pod)
    _wait("probed pod ready", lambda: _cond(_pod(cluster, namespace, "probed"), "Ready") == "True")
    assert not Path(workdir).parent.exists()


def test_pods_resolve_services_and_headless_pod_names(cluster: Any, namespace: str) -> None:
    """No cluster DNS runs: each pod's /etc/hosts names Services (`<svc>.<ns>`, `.svc`,
    `.svc.cluster.local`, short), headless pod hostnames, and Services made after the pod
    started (kept current), all at the endpoint pod's address; the host's file is untouched."""
    host_hosts = Path("/etc/hosts").read_text()
    server = _simple_pod(
        "server",
        "import time; time.sleep(300)",
        restartPolicy="Always",
        hostname="w0",
        subdomain="hl",
    )
    server["metadata"]["labels"] = {"app": "names"}
    _apply(cluster, namespace, server)
    for name, extra in (("hl", {"clusterIP": "None"}), ("svc", {})):
        _apply(
            cluster,
            namespace,
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name},
                "spec": {"selector": {"app": "names"}, "ports": [{"port": 2222}], **extra},
            },
        )
    ns = namespace
    wanted = [
        "svc",
        f"svc.{ns}",
        f"svc.{ns}.svc",
        f"svc.{ns}.svc.cluster.local",
        f"w0.hl.{ns}.svc.cluster.local",
        f"w0.hl.{ns}.svc",
        "w0.hl",
        f"late.{ns}.svc",
    ]
    code = (
        "import json, socket, sys, time\n"
        "deadline = time.time() + 90\n"
        "while True:\n"
        "    try:\n"
        "        print(json.dumps({n: socket.gethostbyname(n) for n in sys.argv[1:]}))\n"
        "        break\n"
        "    except OSError as exc:\n"
        "        if time.time() > deadline:\n"
        "            raise\n"
        "        time.sleep(0.5)\n"
    )
    client = _simple_pod("client", code)
    client["spec"]["containers"][0]["command"] = ["python3", "-c", code, *wanted]
    _apply(cluster, namespace, client)
    _wait(
        "client running",
        lambda: _pod(cluster, namespace, "client")["status"].get("phase") == "Running",
    )
    time.sleep(2)  # the client is already looking up names when the Service appears
    _apply(
        cluster,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "late"},
            "spec": {"selector": {"app": "names"}, "ports": [{"port": 2223}]},
        },
    )
    pod = _done(cluster, namespace, "client")
    out = _logs(cluster, namespace, "client")
    assert pod["status"]["phase"] == "Succeeded", out
    resolved = json.loads(out.strip().splitlines()[-1])
    ip = _pod(cluster, namespace, "server")["status"]["podIP"]
    assert resolved == dict.fromkeys(wanted, ip)
    assert Path("/etc/hosts").read_text() == host_hosts


def _node_agent(cluster: Any, node: str, state: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "localcluster.nodeagent",
            "--kubeconfig",
            cluster.kubeconfig,
            "--node-name",
            node,
            "--state-dir",
            str(state),
            "--status-interval",
            "5",
        ],
        stdout=open(state.parent / f"{node}.log", "ab"),
        stderr=subprocess.STDOUT,
    )


def test_second_agent_adopts_pods_survives_restart_and_stops_cleanly(
    cluster: Any, namespace: str, tmp_path: Path
) -> None:
    node = f"extra-{uuid.uuid4().hex[:6]}"
    state = tmp_path / "agent"
    code = "import time; print('up', flush=True); time.sleep(300)"
    pod = _simple_pod(
        "pinned", code, nodeName=node, restartPolicy="Always", terminationGracePeriodSeconds=1
    )
    _apply(cluster, namespace, pod)  # bound before the node (and its agent) exists
    agent = _node_agent(cluster, node, state)
    try:
        running = _wait(
            "pinned Running",
            lambda: (
                p
                if (p := _pod(cluster, namespace, "pinned"))["status"].get("phase") == "Running"
                else None
            ),
        )
        assert running["status"]["podIP"] != "127.0.0.1"
        lease = json.loads(
            cluster.kubectl("get", "lease", node, "-n", "kube-node-lease", "-o", "json").stdout
        )
        assert lease["spec"]["holderIdentity"] == node
        uid = running["metadata"]["uid"]

        def pod_processes() -> list[psutil.Process]:
            record = json.loads((state / "sandboxes" / f"{uid}.json").read_text())
            pause = psutil.Process(record["pid"])
            cid = _pod(cluster, namespace, "pinned")["status"]["containerStatuses"][0][
                "containerID"
            ]
            main = psutil.Process(int(cid.split("//")[1]))
            return [pause, main, *main.children(recursive=True)]

        # 1. SIGKILL: nothing of the pod may survive the agent.
        first = pod_processes()
        agent.kill()
        agent.wait()
        _, alive = psutil.wait_procs(first, timeout=5)
        assert alive == []
        # 2. A new agent continues the pod as a kubelet would after a restart.
        agent = _node_agent(cluster, node, state)
        again = _wait(
            "restarted by the new agent",
            lambda: (
                p
                if (
                    cs := (p := _pod(cluster, namespace, "pinned"))["status"]["containerStatuses"][
                        0
                    ]
                )["restartCount"]
                == 1
                and "running" in cs["state"]
                else None
            ),
        )
        last = again["status"]["containerStatuses"][0]["lastState"]["terminated"]
        assert (last["exitCode"], last["reason"]) == (137, "ContainerStatusUnknown")
        # 3. SIGTERM: exit 0, every pod process gone, the lo address removed.
        second = pod_processes()
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=30) == 0
        _, alive = psutil.wait_procs(second, timeout=5)
        assert alive == []
        with open("/proc/net/fib_trie") as fh:
            assert again["status"]["podIP"] not in fh.read()
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        cluster.kubectl(
            "delete", "pod", "-n", namespace, "pinned", "--force", "--grace-period=0", check=False
        )
        cluster.kubectl("delete", "node", node, "--wait=false", check=False)


def test_native_sidecar_runs_alongside_and_is_stopped(cluster: Any, namespace: str) -> None:
    sidecar = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "open('/mnt/nat/shared/sidecar-up', 'w').close()\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    main = "import os, sys; sys.exit(0 if os.path.exists('/mnt/nat/shared/sidecar-up') else 4)"
    mount = [{"name": "shared", "mountPath": "/mnt/nat/shared"}]
    pod = _simple_pod(
        "sidecar",
        main,
        container={"volumeMounts": mount},
        terminationGracePeriodSeconds=10,
        volumes=[{"name": "shared", "emptyDir": {}}],
        initContainers=[
            {
                "name": "proxy",
                "image": PY,
                "restartPolicy": "Always",
                "command": ["python3", "-c", sidecar],
                "volumeMounts": mount,
                # main must not start before the sidecar is really up
                "startupProbe": {
                    "exec": {"command": ["test", "-e", "/mnt/nat/shared/sidecar-up"]},
                    "periodSeconds": 1,
                    "failureThreshold": 10,
                },
            }
        ],
    )
    _apply(cluster, namespace, pod)
    done = _done(cluster, namespace, "sidecar")
    assert done["status"]["phase"] == "Succeeded", done["status"]
    main_term = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert main_term["exitCode"] == 0
    side = done["status"]["initContainerStatuses"][0]
    assert side["state"]["terminated"]["exitCode"] == 0  # SIGTERM handler ran
    assert side["state"]["terminated"]["finishedAt"] >= main_term["finishedAt"]


def test_events_explain_a_crashing_container(cluster: Any, namespace: str) -> None:
    pod = _simple_pod("crashy", "raise SystemExit(2)", restartPolicy="Always")
    _apply(cluster, namespace, pod)

    def reasons() -> set[str]:
        out = cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
        return {
            e["reason"]
            for e in json.loads(out)["items"]
            if e["involvedObject"].get("name") == "crashy"
        }

    assert _wait("Started and BackOff events", lambda: {"Started", "BackOff"} <= reasons())
    waiting = _pod(cluster, namespace, "crashy")["status"]["containerStatuses"][0]
    assert waiting["restartCount"] >= 1


def test_exec_runs_in_the_container_and_returns_output_and_exit_code(
    cluster: Any, namespace: str
) -> None:
    """``kubectl exec`` (WebSocket to the API server, SPDY from there to the agent) runs the
    command in the container's own root, returns stdout and stderr apart and the exit code;
    a signal sent through exec reaches the container's PID 1 (which, as in any container,
    dies of it only through its own handler), as Argo's controller uses it to stop a sidecar."""
    workdir = f"/nodeagent-exec-{uuid.uuid4().hex[:8]}"
    pod = _simple_pod(
        "execd",
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
        "open('here', 'w').close(); time.sleep(300)",
        restartPolicy="Never",
        container={"workingDir": workdir, "env": [{"name": "GREETING", "value": "hi"}]},
    )
    _apply(cluster, namespace, pod)
    _wait(
        "execd running", lambda: _pod(cluster, namespace, "execd")["status"]["phase"] == "Running"
    )
    # Running means the process started, not that it has written its file yet.
    _wait(
        "execd's file",
        lambda: (
            cluster.kubectl(
                "exec",
                "-n",
                namespace,
                "execd",
                "-c",
                "main",
                "--",
                "test",
                "-e",
                f"{workdir}/here",
                check=False,
            ).returncode
            == 0
        ),
    )
    script = f"ls {workdir}; echo $GREETING; echo oops >&2; exit 3"
    out = cluster.kubectl(
        "exec", "-n", namespace, "execd", "-c", "main", "--", "sh", "-c", script, check=False
    )
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert out.stdout.split() == ["here", "hi"]
    assert "oops" in out.stderr
    assert not Path(workdir).exists()
    ok = cluster.kubectl("exec", "-n", namespace, "execd", "--", "kill", "-TERM", "1", check=False)
    assert ok.returncode == 0, ok.stderr
    done = _done(cluster, namespace, "execd")
    state = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] == 7, state
